// deno-lint-ignore-file no-console
// `stratum migrate run` with a large bundle (default 1 GiB: four large files
// and 2000 small ones added to the test stack's nspawn bundle) against what
// it cannot do with less: one copy and one check of the same bundle, `cp -r`
// then `sha256sum -c`, timed in the same sandbox right before (page cache
// warm for both), then `node upgrade` to a release 2 of the same size
// against the same floor. A migration also fsyncs what it wrote and builds
// the target slot (hard links to the copy it just hashed).
// Checkouts to compare (an older commit in a `git worktree` under the
// repository, which the sandbox sees) can be given after the size.
//
// Run: deno task bench:bundle-migrate [MIB] [CHECKOUT...]
import { join } from "node:path";
import * as bundle from "../lib/bundle/mod.ts";
import { makeBundle } from "../tests/support/bundle.ts";
import { nspawnUnavailable, repoRoot, Sandbox } from "../tests/support/sandbox.ts";

if (nspawnUnavailable) {
  console.error(`cannot measure here: ${nspawnUnavailable}`);
  Deno.exit(1);
}
const mib = Number(Deno.args[0] ?? "1024");
const checkouts = Deno.args.length > 1 ? Deno.args.slice(1) : [repoRoot];
await Deno.mkdir(join(repoRoot, ".test-tmp"), { recursive: true });
const dir = await Deno.makeTempDir({ dir: join(repoRoot, ".test-tmp"), prefix: "bench-big-" });
try {
  const b = await makeBundle(dir);
  const m = join(b, "nspawn");
  await enlarge(m);
  // Release 2 of the same size, for `node upgrade` (the same large files).
  const b2 = await makeBundle(join(dir, "v2"), { release: "2" });
  const m2 = join(b2, "nspawn");
  await new Deno.Command("cp", { args: ["-r", join(m, "small"), ...images(m), m2] }).output();
  await bundle.makeManifest(m2);
  for (const checkout of checkouts) {
    await using sb = await Sandbox.start();
    const main = join(checkout.startsWith("/") ? checkout : join(Deno.cwd(), checkout), "main.ts");
    const stratum = (...args: string[]) =>
      sb.exec([Deno.execPath(), "run", "-A", main, ...args], { cwd: repoRoot });
    const install = await stratum(
      ...["node", "install", "--mode", "host", "--bundle", b, "--node", "node-1"],
    );
    if (install.code !== 0) throw new Error(install.stderr);
    const floor = async (modeDir: string) =>
      Number(
        (await sb.sh(`
      s=$(date +%s%N)
      cp -r ${modeDir} /var/tmp/copy && cd /var/tmp/copy && sha256sum -c --quiet SHA256SUMS
      e=$(date +%s%N); rm -rf /var/tmp/copy; echo $(( (e - s) / 1000000 ))`)).trim(),
      );
    const timed = async (...args: string[]) => {
      const t0 = performance.now();
      const r = await stratum(...args);
      if (r.code !== 0) throw new Error(`stratum ${args.join(" ")}: ${r.stderr}`);
      return performance.now() - t0;
    };
    console.log(`${checkout}: ${mib} MiB bundle`);
    const runFloor = await floor(m);
    const runMs = await timed("migrate", "run", "--to", "nspawn", "--bundle", b);
    report("migrate run", runFloor, runMs);
    await timed("migrate", "ack");
    const upFloor = await floor(m2);
    const upMs = await timed("node", "upgrade", "--bundle", b2);
    report("node upgrade", upFloor, upMs);
  }
} finally {
  await Deno.remove(dir, { recursive: true });
}

function report(what: string, floorMs: number, ms: number): void {
  console.log(`  cp -r + sha256sum -c:    ${floorMs.toFixed(0)} ms`);
  console.log(`  stratum ${what}:${" ".repeat(15 - what.length)}${ms.toFixed(0)} ms`);
  console.log(`  ratio:                   ${(ms / floorMs).toFixed(2)}`);
}

/** The large files' paths in a mode directory. */
function images(m: string): string[] {
  return [0, 1, 2, 3].map((i) => join(m, `image-${i}.tar`));
}

/** Adds `mib` MiB to the mode directory `m`: four large files, 2000 small ones. */
async function enlarge(m: string): Promise<void> {
  const large = Math.floor((mib * 3) / 4 / 4);
  for (const f of images(m)) {
    await new Deno.Command("sh", {
      args: ["-c", `head -c ${large * 1048576} /dev/urandom > "$1"`, "sh", f],
    }).output();
  }
  await Deno.mkdir(join(m, "small"));
  const chunk = new Uint8Array(Math.floor(((mib / 4) * 1048576) / 2000));
  for (let i = 0; i < 2000; i++) {
    crypto.getRandomValues(chunk.subarray(0, Math.min(65536, chunk.length)));
    await Deno.writeFile(join(m, "small", `f${i}.bin`), chunk);
  }
  await bundle.makeManifest(m);
}
