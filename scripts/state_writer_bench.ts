// deno-lint-ignore-file no-console
// `deno task bench:writer`: a client writes keys to the node's etcd in a
// bounded loop on loopback while the node migrates host → nspawn → host, and
// while its stack is restarted in each mode, inside the systemd sandbox.
// Reports acknowledged writes, lost writes (acknowledged, then missing: must
// be 0) and the write-unavailable window of each move (the longest gap
// between two acknowledged writes) as a ratio to etcd's own restart in the
// target mode, measured in the same run. A benchmark: nothing here is a
// pass/fail timing; it exits 1 only when a write was lost.
//
//   deno task bench:writer [ROUNDS]   (default 3 rounds; medians reported)
//
// Needs root, namespaces, systemd-nspawn and Debian's etcd-server.
import { join } from "node:path";
import { etcdUrl, makeEtcdBundle } from "../tests/support/bundle.ts";
import { getKeys } from "../tests/support/etcd.ts";
import { nspawnUnavailable, repoRoot, Sandbox } from "../tests/support/sandbox.ts";
import { stratumArgv, stratumEnv } from "../tests/support/stratum_bin.ts";

if (nspawnUnavailable) {
  console.error(`bench:writer needs the systemd sandbox: ${nspawnUnavailable}`);
  Deno.exit(2);
}
const rounds = Number(Deno.args[0] ?? "3");

// Writes key w/NNNNNN in order, each under its own 1 s deadline; prints one
// line per acknowledged write (index and monotonic ms), until STOP exists or
// 120 s pass.
const writer = `
import base64, json, os, sys, time, urllib.request
url, stop, out = sys.argv[1], sys.argv[2], sys.argv[3]
b64 = lambda s: base64.b64encode(s.encode()).decode()
t0 = time.monotonic(); i = 0; failed = 0
with open(out, "w", buffering=1) as f:
    while not os.path.exists(stop) and time.monotonic() - t0 < 120:
        body = json.dumps({"key": b64("w/%06d" % i), "value": b64(str(i))}).encode()
        try:
            req = urllib.request.Request(url + "/v3/kv/put", body, {"Content-Type": "application/json"})
            with urllib.request.urlopen(req, timeout=1) as r:
                r.read()
            f.write("%d %.1f\\n" % (i, (time.monotonic() - t0) * 1000))
            i += 1
        except Exception:
            failed += 1
            time.sleep(0.002)
`;

interface Window {
  what: string;
  gapMs: number;
}

async function once(): Promise<{ windows: Window[]; acked: number; lost: number }> {
  const tmp = await Deno.makeTempDir({ dir: join(repoRoot, ".test-tmp"), prefix: "bench-" });
  const bundle = await makeEtcdBundle(join(tmp, "bundle"));
  await using sb = await Sandbox.start();
  const stratum = async (...args: string[]) => {
    const r = await sb.exec(stratumArgv(args), {
      env: { NO_COLOR: "1", ...stratumEnv() },
      cwd: repoRoot,
    });
    if (r.code !== 0) throw new Error(`stratum ${args.join(" ")}: exit ${r.code}: ${r.stderr}`);
  };
  await stratum("node", "install", "--mode", "host", "--bundle", bundle, "--node", "node-1");
  const stop = join(tmp, "stop");
  const log = join(tmp, "acks");
  const client = sb.spawn(["python3", "-c", writer, etcdUrl, stop, log]);
  const now = async () => {
    const lines = (await Deno.readTextFile(log).catch(() => "")).trim().split("\n");
    return lines.length;
  };
  const marks: { what: string; from: number; to: number }[] = [];
  const during = async (what: string, f: () => Promise<void>) => {
    // A few writes before, so the window has a start.
    for (const seen = await now(); (await now()) < seen + 20;) await sleep(5);
    const from = await now();
    await f();
    for (const seen = await now(); (await now()) < seen + 20;) await sleep(5);
    marks.push({ what, from, to: await now() });
  };
  await during("restart, host", () => sb.sh("systemctl restart stratum-a.target").then(() => {}));
  await during(
    "migrate host → nspawn",
    () => stratum("migrate", "run", "--to", "nspawn", "--bundle", bundle),
  );
  await stratum("migrate", "ack");
  await during("restart, nspawn", () => sb.sh("systemctl restart stratum-b.target").then(() => {}));
  await during(
    "migrate nspawn → host",
    () => stratum("migrate", "run", "--to", "host", "--bundle", bundle),
  );
  await Deno.writeTextFile(stop, "");
  await client.status;
  await client.stdout.cancel().catch(() => {});
  await client.stderr.cancel().catch(() => {});
  const acks = (await Deno.readTextFile(log)).trim().split("\n").map((l) =>
    Number(l.split(" ")[1])
  );
  const windows = marks.map(({ what, from, to }) => {
    let gap = 0;
    for (let i = Math.max(from, 1); i < to && i < acks.length; i++) {
      gap = Math.max(gap, acks[i]! - acks[i - 1]!);
    }
    return { what, gapMs: gap };
  });
  const present = (await getKeys(sb, "w/")).keys.length;
  await Deno.remove(tmp, { recursive: true });
  return { windows, acked: acks.length, lost: acks.length - present };
}

function sleep(ms: number) {
  return new Promise((r) => setTimeout(r, ms));
}
const median = (xs: number[]) => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)]!;

await Deno.mkdir(join(repoRoot, ".test-tmp"), { recursive: true });
const runs: Awaited<ReturnType<typeof once>>[] = [];
for (let i = 0; i < rounds; i++) {
  const r = await once();
  runs.push(r);
  console.error(
    `round ${i + 1}: ${r.acked} writes acknowledged, ${r.lost} lost; ` +
      r.windows.map((w) => `${w.what} ${Math.round(w.gapMs)} ms`).join(", "),
  );
}
const w = (what: string) => median(runs.map((r) => r.windows.find((x) => x.what === what)!.gapMs));
const lost = runs.reduce((s, r) => s + r.lost, 0);
console.log(`writes acknowledged: ${runs.map((r) => r.acked).join(", ")}; lost: ${lost}`);
console.log(
  "| move | write-unavailable window (median ms) | ratio to etcd's restart in the target mode |",
);
console.log("|---|---|---|");
for (
  const [move, restart] of [
    ["migrate host → nspawn", "restart, nspawn"],
    ["migrate nspawn → host", "restart, host"],
  ] as const
) {
  console.log(`| ${move} | ${Math.round(w(move))} | ${(w(move) / w(restart)).toFixed(2)} × |`);
}
for (const r of ["restart, host", "restart, nspawn"]) {
  console.log(`| ${r} | ${Math.round(w(r))} | 1 |`);
}
Deno.exit(lost === 0 ? 0 : 1);
