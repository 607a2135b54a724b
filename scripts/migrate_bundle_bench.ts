// deno-lint-ignore-file no-console
// `stratum migrate run` with a large bundle (default 1 GiB: four large files
// and 2000 small ones added to the test stack's nspawn bundle) against what
// it cannot do with less: one copy and one check of the same bundle, `cp -r`
// then `sha256sum -c`, timed in the same sandbox right before (page cache
// warm for both). A migration also builds the target slot from the installed
// copy and checks the slot before it starts, so its floor is above 1.
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
  const large = Math.floor((mib * 3) / 4 / 4);
  for (let i = 0; i < 4; i++) {
    await new Deno.Command("sh", {
      args: [
        "-c",
        `head -c ${large * 1048576} /dev/urandom > "$1"`,
        "sh",
        join(m, `image-${i}.tar`),
      ],
    }).output();
  }
  await Deno.mkdir(join(m, "small"));
  const chunk = new Uint8Array(Math.floor(((mib / 4) * 1048576) / 2000));
  for (let i = 0; i < 2000; i++) {
    crypto.getRandomValues(chunk.subarray(0, Math.min(65536, chunk.length)));
    await Deno.writeFile(join(m, "small", `f${i}.bin`), chunk);
  }
  await bundle.makeManifest(m);
  for (const checkout of checkouts) {
    await using sb = await Sandbox.start();
    const main = join(checkout.startsWith("/") ? checkout : join(Deno.cwd(), checkout), "main.ts");
    const stratum = (...args: string[]) =>
      sb.exec([Deno.execPath(), "run", "-A", main, ...args], { cwd: repoRoot });
    const install = await stratum(
      ...["node", "install", "--mode", "host", "--bundle", b, "--node", "node-1"],
    );
    if (install.code !== 0) throw new Error(install.stderr);
    const floor = await sb.sh(`
      s=$(date +%s%N)
      cp -r ${m} /var/tmp/copy && cd /var/tmp/copy && sha256sum -c --quiet SHA256SUMS
      e=$(date +%s%N); rm -rf /var/tmp/copy; echo $(( (e - s) / 1000000 ))`);
    const t0 = performance.now();
    const run = await stratum("migrate", "run", "--to", "nspawn", "--bundle", b);
    const runMs = performance.now() - t0;
    if (run.code !== 0) throw new Error(run.stderr);
    const floorMs = Number(floor.trim());
    console.log(`${checkout}: ${mib} MiB bundle`);
    console.log(`  cp -r + sha256sum -c:    ${floorMs.toFixed(0)} ms`);
    console.log(`  stratum migrate run:     ${runMs.toFixed(0)} ms`);
    console.log(`  ratio:                   ${(runMs / floorMs).toFixed(2)}`);
  }
} finally {
  await Deno.remove(dir, { recursive: true });
}
