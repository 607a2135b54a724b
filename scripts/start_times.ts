// deno-lint-ignore-file no-console
// Start-up of the artifact beside the tools an operator runs next to it, in
// one run: first run (fresh unpack) and later runs of `stratum --version` and
// `stratum migrate status` (no journal), against `kubectl version --client`
// and `systemctl --version`. Medians of N runs, and their ratio to kubectl.
//
// Run: scripts/compile x86_64 && deno task bench:start [RUNS]
import { join } from "node:path";

const bin = join(new URL("..", import.meta.url).pathname, "dist/stratum-linux-x86_64");
const runs = Number(Deno.args[0] ?? "15");
const cache = await Deno.makeTempDir({ prefix: "stratum-cache-" });
const root = await Deno.makeTempDir({ prefix: "stratum-root-" });
const env = { STRATUM_CACHE: cache, PATH: Deno.env.get("PATH") ?? "/usr/bin:/bin" };

async function time(argv: string[]): Promise<number> {
  const t0 = performance.now();
  const o = await new Deno.Command(argv[0]!, {
    args: argv.slice(1),
    env,
    stdout: "null",
    stderr: "null",
  })
    .output();
  if (!o.success) throw new Error(`${argv.join(" ")}: exit ${o.code}`);
  return performance.now() - t0;
}
const med = (xs: number[]) => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)]!;

const first = await time([bin, "--version"]);
const cases: [string, string[]][] = [
  ["stratum --version", [bin, "--version"]],
  ["stratum migrate status (no journal)", [bin, "migrate", "status", "--root", root]],
  ["kubectl version --client", ["kubectl", "version", "--client"]],
  ["systemctl --version", ["systemctl", "--version"]],
];
const times = new Map<string, number[]>(cases.map(([n]) => [n, []]));
for (let i = 0; i < runs; i++) {
  for (const [name, argv] of cases) times.get(name)!.push(await time(argv));
}
const kubectl = med(times.get("kubectl version --client")!);
console.log(`artifact: ${(Deno.statSync(bin).size / 1048576).toFixed(1)} MiB`);
console.log(`first run (unpack) of stratum --version: ${first.toFixed(0)} ms`);
for (const [name] of cases) {
  const m = med(times.get(name)!);
  console.log(
    `${name.padEnd(38)} ${m.toFixed(0).padStart(5)} ms  ${(m / kubectl).toFixed(2)} × kubectl`,
  );
}
await Deno.remove(cache, { recursive: true });
