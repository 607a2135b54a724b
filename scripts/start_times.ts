// deno-lint-ignore-file no-console
// Start-up of the artifact on an installed node, side by side with the tool
// the operator runs next to it, in one run: `stratum --version`, `stratum
// migrate status` and `stratum node status` against `kubectl version
// --client`. A sandboxed node (real systemd, needs root) is installed with
// the artifact; a Python loop inside it runs the commands interleaved, one
// round of every command per pair, and the medians and their ratios to
// kubectl are printed. Other artifacts (an older build) can be given to
// compare them in the same run; each is unpacked once before timing.
//
// With STRATUM_BENCH_BUNDLE_MIB=N the installed bundle carries N MiB more
// (one file), so `node status` (the cheap check) and `node status --verify`
// (every file hashed) show what the bundle's size costs each.
//
// Run: scripts/compile x86_64 && deno task bench:start [RUNS] [ARTIFACT...]
import { join } from "node:path";
import { makeBundle } from "../tests/support/bundle.ts";
import { repoRoot, Sandbox, sandboxUnavailable } from "../tests/support/sandbox.ts";

if (sandboxUnavailable) {
  console.error(`cannot measure here: ${sandboxUnavailable}`);
  Deno.exit(1);
}
const runs = Number(Deno.args[0] ?? "15");
const bins = Deno.args.length > 1
  ? Deno.args.slice(1).map((b) => (b.startsWith("/") ? b : join(Deno.cwd(), b)))
  : [join(repoRoot, "dist/stratum-linux-x86_64")];
await Deno.mkdir(join(repoRoot, ".test-tmp"), { recursive: true });
const scratch = await Deno.makeTempDir({ dir: join(repoRoot, ".test-tmp"), prefix: "bench-" });
try {
  const bundle = await makeBundle(scratch);
  const mib = Number(Deno.env.get("STRATUM_BENCH_BUNDLE_MIB") ?? "0");
  if (mib > 0) {
    const { makeManifest } = await import("../lib/bundle/mod.ts");
    const f = await Deno.open(join(bundle, "host/payload.bin"), { write: true, create: true });
    const chunk = crypto.getRandomValues(new Uint8Array(1 << 16));
    for (let i = 0; i < mib * 16; i++) await f.write(chunk);
    f.close();
    await makeManifest(join(bundle, "host"));
  }
  await using sb = await Sandbox.start();
  const install = await sb.exec([
    bins[0]!,
    ...["node", "install", "--mode", "host", "--bundle", bundle, "--node", "node-1"],
  ]);
  if (install.code !== 0) throw new Error(`node install: ${install.stderr}`);
  const cases: [string, string[]][] = [["kubectl version --client", [
    "kubectl",
    "version",
    "--client",
  ]]];
  for (const [i, bin] of bins.entries()) {
    const tag = bins.length > 1 ? ` [${i}]` : "";
    for (
      const args of [["--version"], ["migrate", "status"], ["node", "status"], [
        "node",
        "status",
        "--verify",
      ]]
    ) {
      cases.push([`stratum ${args.join(" ")}${tag}`, [bin, ...args]]);
    }
  }
  // Interleaved rounds, timed inside the node: no nsenter in the figures.
  const loop = `
import json, subprocess, sys, time
cases = json.loads(sys.argv[1]); runs = int(sys.argv[2])
for _, argv in cases:  # unpack and warm every cache once
    subprocess.run(argv, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
times = {name: [] for name, _ in cases}
for _ in range(runs):
    for name, argv in cases:
        t = time.perf_counter()
        r = subprocess.run(argv, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        times[name].append((time.perf_counter() - t) * 1000)
        if r.returncode != 0: sys.exit(f"{' '.join(argv)}: exit {r.returncode}")
print(json.dumps(times))
`;
  const r = await sb.exec(["python3", "-c", loop, JSON.stringify(cases), String(runs)]);
  if (r.code !== 0) throw new Error(r.stderr);
  const times: Record<string, number[]> = JSON.parse(r.stdout);
  const med = (xs: number[]) => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)]!;
  const kubectl = med(times["kubectl version --client"]!);
  console.log(
    `medians of ${runs} interleaved rounds on an installed node (host mode, bundle + ${mib} MiB):`,
  );
  for (const [i, bin] of bins.entries()) {
    if (bins.length > 1) console.log(`  [${i}] ${bin}`);
  }
  for (const [name] of cases) {
    const m = med(times[name]!);
    console.log(
      `  ${name.padEnd(36)} ${m.toFixed(1).padStart(6)} ms  ${(m / kubectl).toFixed(2)} × kubectl`,
    );
  }
} finally {
  await Deno.remove(scratch, { recursive: true });
}
