// deno-lint-ignore-file no-console
// Wall time of `stratum rollout restart` against the naive by-hand sequence
// (the restartCommands lines, then `kubectl rollout status` for each target
// in turn), on the simulated cluster with every rollout taking T seconds.
// Both go through a shim that counts kubectl processes.
//
// Run: deno task bench:rollout [T_SECONDS] [RUNS]
import $ from "dax";
import * as rollout from "../lib/rollout/mod.ts";
import { defaultKubectl, SimCluster, stratumWorkloads } from "../tests/support/cluster.ts";

const T = Number(Deno.args[0] ?? "5");
const runs = Number(Deno.args[1] ?? "3");
const main = new URL("../main.ts", import.meta.url).pathname;

async function shim(dir: string): Promise<{ path: string; count: () => Promise<number> }> {
  const path = `${dir}/kubectl-shim`;
  const log = `${dir}/kubectl-calls`;
  await Deno.writeTextFile(log, "");
  await Deno.writeTextFile(path, `#!/bin/sh\necho x >> '${log}'\nexec '${defaultKubectl}' "$@"\n`);
  await Deno.chmod(path, 0o755);
  return {
    path,
    count: async () => (await Deno.readTextFile(log)).split("\n").filter(Boolean).length,
  };
}

/**
 * Times `run` against a fresh simulated cluster whose kubectl discovery cache
 * is warm (as on a node that ran kubectl before); returns seconds and the
 * kubectl processes it spawned.
 */
async function timed(
  run: (c: SimCluster, kubectl: string) => Promise<void>,
): Promise<{ secs: number; procs: number }> {
  await using c = await SimCluster.start({ workloads: stratumWorkloads(T * 1000) });
  const k = await shim(c.dir);
  await $`${k.path} --kubeconfig ${c.kubeconfig} get ns -o name`.env(c.cliEnv()).quiet().noThrow();
  await Deno.writeTextFile(`${c.dir}/kubectl-calls`, "");
  const t0 = performance.now();
  await run(c, k.path);
  return { secs: (performance.now() - t0) / 1000, procs: await k.count() };
}

const rows: { tool: number; naive: number; toolProcs: number; naiveProcs: number }[] = [];
for (let i = 0; i < runs; i++) {
  const stratum = await timed(async (c, k) => {
    await $`${Deno.execPath()} run -A ${main} rollout restart --kubeconfig ${c.kubeconfig} --kubectl ${k} --wait 5m`
      .env(c.cliEnv()).quiet();
  });
  // The naive sequence an operator would type.
  const byHand = await timed(async (c, k) => {
    for (const line of rollout.restartCommands()) {
      const args = line.split(" ").slice(1);
      await $`${k} --kubeconfig ${c.kubeconfig} ${args}`.env(c.cliEnv()).quiet();
    }
    for (const w of rollout.Workloads) {
      for (const t of w.targets) {
        await $`${k} --kubeconfig ${c.kubeconfig} -n ${w.namespace} rollout status ${t} --timeout=5m`
          .env(c.cliEnv()).quiet();
      }
    }
  });
  const [tool, toolProcs, naive, naiveProcs] = [
    stratum.secs,
    stratum.procs,
    byHand.secs,
    byHand.procs,
  ];
  rows.push({ tool, naive, toolProcs, naiveProcs });
  console.log(
    `run ${i + 1}: stratum ${tool.toFixed(2)} s (${toolProcs} kubectl), by hand ${
      naive.toFixed(2)
    } s (${naiveProcs} kubectl)`,
  );
}
const med = (xs: number[]) => xs.sort((a, b) => a - b)[Math.floor(xs.length / 2)]!;
const tool = med(rows.map((r) => r.tool));
const naive = med(rows.map((r) => r.naive));
console.log(`\nrollouts of T = ${T} s, median of ${runs} runs (kubectl ${defaultKubectl}):`);
console.log(
  `  stratum rollout restart: ${tool.toFixed(2)} s = ${(tool / T).toFixed(2)} x T, ${
    rows[0]!.toolProcs
  } kubectl processes`,
);
console.log(
  `  by hand (commands, then status in turn): ${naive.toFixed(2)} s = ${
    (naive / T).toFixed(2)
  } x T, ${rows[0]!.naiveProcs} kubectl processes`,
);
console.log(
  `  ratio stratum / by hand: ${(tool / naive).toFixed(2)}; target stratum <= 1.2 x T: ${
    tool <= 1.2 * T ? "met" : "NOT met"
  }`,
);
