// deno-lint-ignore-file no-console
// What a machine's command probe and readiness check cost: an nspawn-mode
// node (real systemd in the sandbox, needs root) with a command probe, per
// artifact given, `stratum node status --json` (the HTTP probe and the
// command probe) and a restart of the slot's target (the machine's boot,
// its readiness check included), RUNS times each; the medians are printed,
// with each artifact's ratio to the first. Give an older build to compare
// (e.g. one from before the probe became a service of the machine); each
// artifact installs its own node, since the units it writes differ.
//
// Run: scripts/compile x86_64 && deno task bench:probe [RUNS] [ARTIFACT...]
import { join } from "node:path";
import { makeBundle } from "../tests/support/bundle.ts";
import { nspawnUnavailable, repoRoot, Sandbox } from "../tests/support/sandbox.ts";

if (nspawnUnavailable) {
  console.error(`cannot measure here: ${nspawnUnavailable}`);
  Deno.exit(1);
}
const runs = Number(Deno.args[0] ?? "10");
const bins = Deno.args.length > 1
  ? Deno.args.slice(1).map((b) => (b.startsWith("/") ? b : join(Deno.cwd(), b)))
  : [join(repoRoot, "dist/stratum-linux-x86_64")];

function median(xs: number[]): number {
  const s = [...xs].sort((a, b) => a - b);
  return s[Math.floor(s.length / 2)]!;
}

await Deno.mkdir(join(repoRoot, ".test-tmp"), { recursive: true });
const scratch = await Deno.makeTempDir({ dir: join(repoRoot, ".test-tmp"), prefix: "bench-" });
const rows: { bin: string; status: number; restart: number }[] = [];
try {
  const bundle = await makeBundle(scratch, { healthExec: ["/bin/sh", "-c", "exit 0"] });
  const env = { STRATUM_CACHE: join(scratch, "cache") };
  for (const bin of bins) {
    await using sb = await Sandbox.start();
    const install = await sb.exec(
      [bin, "node", "install", "--mode", "nspawn", "--bundle", bundle, "--node", "node-1"],
      { env },
    );
    if (install.code !== 0) throw new Error(`${bin}: node install: ${install.stderr}`);
    const status: number[] = [];
    const restart: number[] = [];
    for (let i = 0; i < runs; i++) {
      let t = performance.now();
      const s = await sb.exec([bin, "node", "status", "--json"], { env });
      status.push(performance.now() - t);
      if (s.code !== 0) throw new Error(`${bin}: node status exit ${s.code}: ${s.stdout}`);
      // Restarts a second apart would hit the unit's start limit (5 in 10 s).
      await sb.exec(["systemctl", "reset-failed", "stratum-a-machine.service"]);
      t = performance.now();
      const r = await sb.exec(["systemctl", "restart", "stratum-a.target"]);
      restart.push(performance.now() - t);
      if (r.code !== 0) {
        const j = await sb.exec([
          "journalctl",
          "--no-pager",
          "-n",
          "60",
          "-u",
          "stratum-a-machine",
        ]);
        throw new Error(`${bin}: restart: ${r.stderr}\n${j.stdout}`);
      }
    }
    rows.push({ bin, status: median(status), restart: median(restart) });
  }
} finally {
  await Deno.remove(scratch, { recursive: true });
}
const [first] = rows;
console.log(`medians of ${runs} runs, ms (ratio to the first artifact)`);
for (const r of rows) {
  console.log(
    `${r.bin}: node status ${r.status.toFixed(0)} (${(r.status / first!.status).toFixed(2)} ×), ` +
      `machine restart with readiness check ${r.restart.toFixed(0)} (${
        (r.restart / first!.restart).toFixed(2)
      } ×)`,
  );
}
