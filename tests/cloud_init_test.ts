// deno-lint-ignore-file no-console
// The cloud-init examples (examples/cloud-init/*.yaml): valid for
// cloud-init's own schema, and what each runs brings a fresh sandboxed node
// up healthy with its signed bundle. The examples' placeholders (the key,
// the executable's and bundle's paths, and in the kubelet example the
// kubelet's state directory, which the test stack names otherwise) are
// replaced by the test's; nothing else. The kubelet example's kubeconfig is
// adopted as it was written: the same bytes after the install.

import { join } from "node:path";
import { assert, assertEquals } from "./support/assert.ts";
import { nspawnUnavailable, repoRoot } from "./support/sandbox.ts";
import { Node } from "./support/sandbox_node.ts";
import { stratumArgv, stratumEnv } from "./support/stratum_bin.ts";
import { makeSigningKey, noOpenssl } from "./support/tls.ts";
import { lacking } from "../scripts/packages.ts";
import { stackState } from "./support/bundle.ts";

const example = join(repoRoot, "examples/cloud-init/user-data.yaml");
const examples = [example, join(repoRoot, "examples/cloud-init/user-data-kubelet.yaml")];
const noCloudInit = lacking("cloud-init");
if (noCloudInit) console.error(`cloud-init tests are skipped: ${noCloudInit}`);

Deno.test({
  name: "the cloud-init examples are valid for cloud-init schema, and a broken one is not",
  ignore: noCloudInit !== undefined,
  async fn() {
    for (const file of examples) {
      const ok = await new Deno.Command("cloud-init", {
        args: ["schema", "--config-file", file],
        stdout: "piped",
        stderr: "piped",
      }).output();
      assert(ok.success, `${file}: ${new TextDecoder().decode(ok.stderr)}`);
    }
    // The check is real: the same file with runcmd's entry made a number fails.
    const bad = join(await Deno.makeTempDir(), "user-data.yaml");
    await Deno.writeTextFile(
      bad,
      (await Deno.readTextFile(example)).replace(/^runcmd:/m, "runcmd: 5\nx:"),
    );
    const no = await new Deno.Command("cloud-init", {
      args: ["schema", "--config-file", bad],
      stdout: "null",
      stderr: "null",
    }).output();
    assert(!no.success);
  },
});

/** The example as data (cloud-init's own YAML parser, python3-yaml, reads it). */
async function loadExample(file: string): Promise<{
  write_files: { path: string; content: string; permissions: string }[];
  runcmd: string[][];
}> {
  const o = await new Deno.Command("python3", {
    args: [
      "-c",
      "import json,sys,yaml; print(json.dumps(yaml.safe_load(open(sys.argv[1]))))",
      file,
    ],
    stdout: "piped",
  }).output();
  assert(o.success, "python3-yaml cannot read the example");
  return JSON.parse(new TextDecoder().decode(o.stdout));
}

for (const file of examples) {
  Deno.test({
    name: `what ${
      file.slice(repoRoot.length + 1)
    } runs brings a fresh node up healthy with its signed bundle`,
    ignore: noCloudInit !== undefined || nspawnUnavailable !== undefined || noOpenssl !== undefined,
    async fn() {
      const cfg = await loadExample(file);
      // The kubelet's state directory is the test stack's.
      const path = (p: string) => p.replace(/^\/var\/lib\/kubelet(?=\/|$)/, stackState);
      await using n = await Node.fresh("nspawn");
      const tmp = await Deno.makeTempDir({ dir: join(repoRoot, ".test-tmp") });
      const { key, pub } = await makeSigningKey(tmp);
      const sign = await n.sb.exec([...stratumArgv(["bundle", "sign", n.bundle, "--key", key])], {
        env: stratumEnv(),
        cwd: repoRoot,
      });
      assertEquals(sign.code, 0, sign.stderr);
      // write_files, with the test's key in place of the placeholder.
      for (const f of cfg.write_files) {
        const content = f.content.includes("REPLACE-WITH-YOUR-RELEASE-KEY")
          ? await Deno.readTextFile(pub)
          : f.content;
        const staged = join(tmp, "staged");
        await Deno.writeTextFile(staged, content);
        const w = await n.sb.exec(["install", "-D", "-m", f.permissions, staged, path(f.path)]);
        assertEquals(w.code, 0, w.stderr);
      }
      // runcmd, with the artifact under test and the test's bundle in place of the paths.
      for (const argv of cfg.runcmd) {
        const [program, ...args] = argv.map((
          a,
        ) => (a === "/srv/stratum-bundle" ? n.bundle : path(a)));
        assertEquals(program, "/usr/local/bin/stratum");
        const r = await n.sb.exec(stratumArgv(args), { env: stratumEnv(), cwd: repoRoot });
        assertEquals(r.code, 0, r.stderr);
        const doc = JSON.parse(r.stdout);
        assertEquals([doc.outcome, doc.mode], ["installed", "nspawn"]);
        assert(doc.bundle.keyId, "the bundle was checked against the written key");
      }
      const s = await n.state();
      assertEquals(s.active, { a: true, b: false });
      assert(String(s.health).startsWith("200 ok nspawn"), s.health);
      for (const f of cfg.write_files.filter((f) => f.path !== path(f.path))) {
        assertEquals(await n.sb.sh(`cat ${path(f.path)}`), f.content, "adopted as it was written");
      }
      await Deno.remove(tmp, { recursive: true });
    },
  });
}
