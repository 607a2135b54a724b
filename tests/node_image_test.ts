// deno-lint-ignore-file no-console
// A node image (stack.json `root`, docs/nspawn.md): an nspawn-mode slot
// that brings its own root tree runs on the image's userland, not the
// host's, in the real systemd sandbox. Invariants:
// - the machine boots the image (the host's /usr is not bound), and the
//   stack's command probe, which passes only where the image's mark is,
//   passes; node status says healthy;
// - the node moves to host mode (the host's userland) and back, its data
//   kept, exactly one stack running after each move;
// - an image that cannot boot (no systemd) or would overwrite a file of
//   the bundle fails the prepare, saying why (the clash is refused, never
//   written over a slot file, which is a hard link to the installed copy),
//   and rolls back: the source runs;
// - "root" in a host-mode stack, or naming a file the manifest does not
//   list, is bad input: exit 2, one line, nothing changed.

import { join } from "node:path";
import { assert, assertEquals } from "./support/assert.ts";
import { makeBundle, nodeImageMark, withNodeImage } from "./support/bundle.ts";
import { nspawnUnavailable, repoRoot } from "./support/sandbox.ts";
import { Node } from "./support/sandbox_node.ts";
import { nodeImage } from "./support/node_image.ts";
import * as bundle from "../lib/bundle/mod.ts";
import { lacking } from "../scripts/packages.ts";

const ignore = nspawnUnavailable !== undefined;
const imageSkip = nspawnUnavailable ??
  (Deno.uid() !== 0 ? "building a node image needs root" : undefined) ??
  lacking("mmdebstrap");
if (imageSkip) console.error(`node image tests that boot an image are skipped: ${imageSkip}`);

/** A fresh test bundle under the checkout (the sandbox sees the checkout). */
async function bundleDir(): Promise<string> {
  await Deno.mkdir(join(repoRoot, ".test-tmp"), { recursive: true });
  return await makeBundle(
    await Deno.makeTempDir({ dir: join(repoRoot, ".test-tmp"), prefix: "bundle-" }),
  );
}

/** A tar of `files` (name → text), made with the machine's tar, at `out`. */
async function tarOf(out: string, files: Record<string, string>): Promise<void> {
  const dir = await Deno.makeTempDir({ dir: join(repoRoot, ".test-tmp"), prefix: "tree-" });
  for (const [f, text] of Object.entries(files)) {
    await Deno.mkdir(join(dir, f, ".."), { recursive: true });
    await Deno.writeTextFile(join(dir, f), text);
  }
  const o = await new Deno.Command("tar", { args: ["-C", dir, "-cf", out, "."] }).output();
  assert(o.success, "tar");
  await Deno.remove(dir, { recursive: true });
}

Deno.test({
  name:
    "a node image: the nspawn machine runs the image's userland, moves to host mode and back with its data",
  ignore: imageSkip !== undefined,
  sanitizeResources: false,
  async fn() {
    const image = await nodeImage();
    const dir = await withNodeImage(await bundleDir(), image);
    await using n = await Node.boot("nspawn", undefined, { bundleDir: dir });
    // The mark is the image's alone: the host has none.
    assertEquals(await n.sb.sh(`test -e ${nodeImageMark} && echo host || echo none`), "none\n");
    assertEquals(
      (await n.inMachine("a", `cat ${nodeImageMark}`)).trim(),
      "stratum-test-node-image",
    );
    const unit = await n.sb.sh("systemctl cat stratum-a-machine.service");
    assert(!unit.includes("--bind-ro=/usr"), `the host's /usr is not bound:\n${unit}`);
    const status = await n.stratum(["node", "status", "--json"]);
    assertEquals([status.code, status.doc?.health?.healthy], [0, true], status.stdout);
    const starts = async () => (await n.sb.sh("cat /var/lib/stratum-test-node/starts-node")).trim();
    assertEquals(await starts(), "1");

    for (const [to, expect] of [["host", "2"], ["nspawn", "3"]] as const) {
      const r = await n.stratum(["migrate", "run", "--to", to, "--bundle", n.bundle, "--json"]);
      assertEquals([r.code, r.doc?.outcome], [0, "complete"], r.stderr);
      const s = await n.state();
      assertEquals(s.active.a !== s.active.b, true, `→ ${to}: exactly one stack runs`);
      assertEquals(s.node.mode, to);
      assertEquals(s.health, `200 ok ${to} node-1`, `→ ${to}`);
      // The node's data: the stack's start counter, kept and counted on.
      assertEquals(await starts(), expect, `→ ${to}: the node's data`);
      assertEquals((await n.stratum(["migrate", "ack"])).code, 0);
    }
    const slot = JSON.parse(await n.sb.sh("cat /etc/stratum/node.json")).slot;
    assertEquals(
      (await n.inMachine(slot, `cat ${nodeImageMark}`)).trim(),
      "stratum-test-node-image",
      "back in nspawn mode: the image's userland again",
    );
  },
});

for (
  const [label, files, says] of [
    ["no systemd in it", { "etc/hostname": "x\n" }, "a booted machine needs systemd"],
    ["a file that overwrites one of the bundle's", { "stack.json": "{}\n" }, "File exists"],
  ] as const
) {
  Deno.test({
    name: `a node image with ${label} fails the prepare and rolls back: the source runs`,
    ignore,
    async fn() {
      const dir = await bundleDir();
      await tarOf(join(dir, "nspawn", "rootfs.tar"), files);
      const stackPath = join(dir, "nspawn", "stack.json");
      const stack = JSON.parse(await Deno.readTextFile(stackPath));
      await Deno.writeTextFile(stackPath, JSON.stringify({ ...stack, root: "rootfs.tar" }));
      await bundle.makeManifest(join(dir, "nspawn"));
      await using n = await Node.boot("host", undefined, { bundleDir: dir });
      const r = await n.stratum(["migrate", "run", "--to", "nspawn", "--bundle", dir, "--json"]);
      assertEquals([r.code, r.doc?.outcome], [1, "rolled-back"], r.stderr);
      assert(JSON.stringify(r.doc).includes(says), `says ${says}: ${JSON.stringify(r.doc)}`);
      assertEquals(await n.assertInvariant(label), "rolled-back");
    },
  });
}

Deno.test({
  name:
    '"root" in a host-mode stack, or naming a file the manifest does not list, is bad input: exit 2, nothing changed',
  ignore,
  async fn() {
    const dir = await bundleDir();
    await using n = await Node.boot("nspawn", undefined, { bundleDir: dir });
    const before = await n.sb.sh(
      "cat /etc/stratum/node.json; ls /var/lib/stratum/slots; systemctl list-units --no-legend 'stratum-*'",
    );
    const cases: [string, string, string][] = [
      ["host", "rootfs.tar", "is for nspawn mode"],
      ["nspawn", "missing.tar", "does not list"],
    ];
    for (const [mode, root, says] of cases) {
      const bad = await bundleDir();
      const m = join(bad, mode);
      await tarOf(join(m, "rootfs.tar"), { "usr/lib/systemd/systemd": "" });
      const stack = JSON.parse(await Deno.readTextFile(join(m, "stack.json")));
      await Deno.writeTextFile(join(m, "stack.json"), JSON.stringify({ ...stack, root }));
      await bundle.makeManifest(m);
      const to = mode === "host" ? "host" : "nspawn";
      const args = to === "nspawn"
        ? ["node", "upgrade", "--bundle", bad]
        : ["migrate", "run", "--to", "host", "--bundle", bad];
      const r = await n.stratum(args);
      assertEquals(r.code, 2, `${mode}: ${r.stderr}`);
      assert(r.stderr.includes(says), `${mode}: says ${says}: ${r.stderr}`);
      assertEquals(r.stderr.trim().split("\n").length, 1, `one line: ${r.stderr}`);
      const v = await n.stratum(["bundle", "verify", bad, "--mode", mode]);
      assertEquals(v.code, 2, `bundle verify ${mode}: ${v.stdout}${v.stderr}`);
      await Deno.remove(bad, { recursive: true });
    }
    assertEquals(
      await n.sb.sh(
        "cat /etc/stratum/node.json; ls /var/lib/stratum/slots; systemctl list-units --no-legend 'stratum-*'",
      ),
      before,
      "nothing changed",
    );
  },
});
