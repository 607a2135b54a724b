// deno-lint-ignore-file no-console
// Measures, on real systemd in the test sandbox, a migration's downtime
// (source stopped → target healthy) against the target stack's own
// start-to-healthy time, and the orchestration overhead (run time minus time
// inside hooks and backend calls). Needs root and namespaces.
//
// Run: deno task bench:migrate [RUNS]
import { join } from "node:path";
import { makeBundle } from "../tests/support/bundle.ts";
import { nspawnUnavailable, repoRoot, Sandbox } from "../tests/support/sandbox.ts";

if (nspawnUnavailable) {
  console.error(`cannot measure here: ${nspawnUnavailable}`);
  Deno.exit(1);
}
const runs = Number(Deno.args[0] ?? "5");
await Deno.mkdir(join(repoRoot, ".test-tmp"), { recursive: true });
const bundle = await makeBundle(
  await Deno.makeTempDir({ dir: join(repoRoot, ".test-tmp"), prefix: "bench-" }),
);
const med = (xs: number[]) => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)]!;

for (const [from, to] of [["host", "nspawn"], ["nspawn", "host"]] as const) {
  const rows: Record<string, number>[] = [];
  for (let i = 0; i < runs; i++) {
    await using sb = await Sandbox.start();
    const r = await sb.deno([
      "run",
      "-A",
      "tests/support/sandbox/measure_migrate.ts",
      from,
      to,
      bundle,
    ]);
    if (r.code !== 0) throw new Error(r.stderr);
    rows.push(JSON.parse(r.stdout));
  }
  const m = (k: string) => med(rows.map((r) => r[k]!));
  console.log(`${from} → ${to}, median of ${runs} runs:`);
  console.log(`  downtime, probed every 5 ms:           ${m("downtimeProbedMs").toFixed(0)} ms`);
  console.log(`  downtime, stop-source → wait-ready:    ${m("downtimeHooksMs").toFixed(0)} ms`);
  console.log(
    `  target stack's own start → healthy:    ${m("targetStartToHealthyMs").toFixed(0)} ms`,
  );
  console.log(
    `  ratio downtime / own start:            ${
      (m("downtimeProbedMs") / m("targetStartToHealthyMs")).toFixed(2)
    }`,
  );
  console.log("  while neither serves, time in each call (median):");
  for (const k of Object.keys(rows[0]!).filter((k) => k.startsWith("down."))) {
    console.log(`    ${k.slice(5).padEnd(34)} ${m(k).toFixed(1)} ms`);
  }
  console.log(`  whole run:                             ${m("totalMs").toFixed(0)} ms`);
  console.log(`  orchestration overhead (run - hooks):  ${m("overheadMs").toFixed(2)} ms`);
}
await Deno.remove(bundle, { recursive: true });
