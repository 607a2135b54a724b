// A signing-key rotation on sandboxed nodes, run from the procedure's own
// lines in docs/bundles.md ("Rotating the signing key"), each as written
// through sh inside the node, with `stratum` on PATH the program under test
// and /srv/bundle-2 a scratch release 2.

import { join } from "node:path";
import { assert, assertEquals } from "./assert.ts";
import { makeBundle } from "./bundle.ts";
import { repoRoot } from "./sandbox.ts";
import { Node } from "./sandbox_node.ts";
import { scratchDir } from "./scratch.ts";
import { stratumArgv, stratumEnv } from "./stratum_bin.ts";
import { makeSigningKey } from "./tls.ts";

/** The lines of the procedure's sh block, in order. */
export async function rotationLines(): Promise<string[]> {
  const doc = await Deno.readTextFile(join(repoRoot, "docs/bundles.md"));
  const section = doc.split("\n## Rotating the signing key\n")[1];
  assert(section, "docs/bundles.md has a section 'Rotating the signing key'");
  const block = /^```sh\n([\s\S]*?)^```/m.exec(section);
  assert(block, "the rotation section has an sh block");
  return block[1]!.split("\n").filter((l) => l.trim() !== "" && !l.trim().startsWith("#"));
}

/** The one line of `lines` that starts with `start`. */
export function line(lines: string[], start: string): string {
  const found = lines.filter((l) => l.startsWith(start));
  assertEquals(found.length, 1, `one rotation line starts with ${start}: ${lines.join("\n")}`);
  return found[0]!;
}

/**
 * A node that runs release 1 signed by the old key (its public half
 * installed as /etc/stratum/trust/release.pem, `stratum node install`), and
 * a working directory for the procedure: a `stratum` shim, release 2's
 * bundle, the old key's files as the operator has them.
 */
export class Rotation implements AsyncDisposable {
  private constructor(
    readonly n: Node,
    readonly dir: string,
    readonly bundle2: string,
    readonly oldPub: string,
  ) {}

  static async start(): Promise<Rotation> {
    const dir = await scratchDir("rotation-");
    const old = await makeSigningKey(dir, "signing");
    const env = Object.entries({ NO_COLOR: "1", ...stratumEnv() })
      .map(([k, v]) => `export ${k}='${v}'\n`).join("");
    await Deno.mkdir(join(dir, "bin"));
    await Deno.writeTextFile(
      join(dir, "bin/stratum"),
      `#!/bin/sh\n${env}exec ${stratumArgv([]).map((a) => `'${a}'`).join(" ")} "$@"\n`,
      { mode: 0o755 },
    );
    const bundle2 = await makeBundle(join(dir, "bundle-2"), { release: "2" });
    const n = await Node.fresh("host");
    const r = new Rotation(n, dir, bundle2, old.pub);
    try {
      await r.sh(`stratum bundle sign ${n.bundle} --key ${old.key}`);
      await r.sh(`install -D -m 0644 ${old.pub} /etc/stratum/trust/release.pem`);
      const i = await n.stratum([
        "node",
        "install",
        "--mode",
        "host",
        "--bundle",
        n.bundle,
        "--node",
        "node-1",
        "--json",
      ]);
      assertEquals([i.code, i.doc?.outcome], [0, "installed"], i.stdout + i.stderr);
      return r;
    } catch (err) {
      await r[Symbol.asyncDispose]();
      throw err;
    }
  }

  /** Runs `line` through sh in the node, as written but for /srv/bundle-2; fails on non-zero. */
  async sh(line: string): Promise<string> {
    const l = line.replaceAll("/srv/bundle-2", this.bundle2);
    const r = await this.n.sb.exec(["sh", "-c", l], {
      cwd: this.dir,
      env: { PATH: `${join(this.dir, "bin")}:/usr/sbin:/usr/bin:/sbin:/bin` },
    });
    assertEquals(r.code, 0, `${l}\n${r.stdout}${r.stderr}`);
    return r.stdout;
  }

  /** A key's id as docs/bundles.md computes it. */
  async keyId(pub: string): Promise<string> {
    return (await this.sh(`openssl pkey -pubin -in ${pub} -outform DER | sha256sum | cut -c1-16`))
      .trim();
  }

  async [Symbol.asyncDispose](): Promise<void> {
    await this.n[Symbol.asyncDispose]();
  }
}
