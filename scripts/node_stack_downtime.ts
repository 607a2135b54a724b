// deno-lint-ignore-file no-console
// Downtime of the real node stack (examples/node-stack: containerd + runc,
// etcd, the kubelet stand-in and its container) in a VM with its own kernel
// (cgroup v2, which the container runtime needs and this machine's host may
// lack): each migration, host → nspawn and nspawn → host, against the same
// stack's own restart in the target mode right after it (stop then start of
// the slot's units, its workloads killed in host mode as stratum's stop does;
// in nspawn mode that includes the machine's boot, reported apart).
//
// Downtime is from the source's stop beginning (the first "Stopped target" /
// "Stopping" of its units in the guest's journal, at the time the kernel took
// PID 1's message) until the new pod-1 container's process started
// (/proc/PID/stat's start time): both recorded by the guest as they happen,
// read afterwards, so no probing interval is in the figure. Unit timestamps
// of stopped units cannot be asked of systemd: it unloads them (and their
// timestamps) once inactive. The target's start is systemd's own
// InactiveExitTimestampMonotonic of its (running) units.
//
// Run: deno task bench:node-stack [RUNS]   (root; builds the artifact first)

import { join } from "node:path";
import { stopWorkloadsScript } from "../lib/isolation/workloads.ts";
import { repoRoot } from "../tests/support/sandbox.ts";
import { stratumBin } from "../tests/support/stratum_bin.ts";
import { buildImage, vmUnavailable, vmWithArtifact } from "../tests/support/vm.ts";
import { lacking } from "./packages.ts";

type Mode = "host" | "nspawn";
type Slot = "a" | "b";

const runs = Number(Deno.args[0] ?? "3");
const why = vmUnavailable ??
  (stratumBin ? undefined : "the VM runs the artifact: set STRATUM_BIN (the task builds it)") ??
  ["containerd", "runc", "etcd-server", "etcd-client", "busybox-static"].map(lacking).find(
    (w) => w,
  );
if (why || !(runs >= 1)) {
  console.error(`cannot measure here: ${why ?? `RUNS must be a positive number, not ${runs}`}`);
  Deno.exit(1);
}

const stratum = "/srv/payload/stratum";
const bundle = "/srv/payload/node-bundle";
const podPattern = "^/bin/sh -c while :; do cat /run/secret/token";
/** systemd's catalogue ids of a unit's stop job starting and finishing. */
const unitStopping = "de5b426a63be47a7b6ac3eaac82e2f6f";
const unitStopped = "9d1aaa27d60140bd96365438aad20286";

/** What happened in one stop-then-start of the stack, in µs of the guest's CLOCK_MONOTONIC. */
interface Events {
  stopBegan: number;
  sourceDown: number;
  targetStart: number;
  /** nspawn target: the machine's basic.target reached (its boot before the stack's units). */
  machineBooted?: number;
  podStarted: number;
  targetReady: number;
}

/** The figures of one move, in ms. */
interface Figures {
  downtime: number;
  stop: number;
  between: number;
  startToPod: number;
  boot?: number;
}

const log = (msg: string) => console.error(`bench: ${msg}`);
const t0 = performance.now();
const elapsed = () => `${((performance.now() - t0) / 1000).toFixed(0)} s`;

const image = await buildImage();
await using vm = await vmWithArtifact(image.dir, stratumBin!, async (payload) => {
  const built = await new Deno.Command("bash", {
    args: [join(repoRoot, "examples/node-stack/build.sh"), join(payload, "node-bundle")],
    env: { STRATUM: stratumBin! },
    stdout: "null",
    stderr: "piped",
  }).output();
  if (!built.success) throw new Error(new TextDecoder().decode(built.stderr));
});
log(`VM lock taken, booting (${elapsed()})`);
await vm.boot();
const guest = (await vm.sh(
  "uname -r; test -e /sys/fs/cgroup/cgroup.controllers && echo cgroup2 || echo cgroup1; nproc",
)).trim().split("\n").join(", ");
log(`guest: ${guest}`);
// /proc/PID/stat counts from boot in CLOCK_BOOTTIME; systemd and the journal
// in CLOCK_MONOTONIC. They differ only by time suspended: measured, not assumed.
const clocks = (await vm.sh(
  `getconf CLK_TCK; python3 -c 'import time; print(round((time.clock_gettime(time.CLOCK_BOOTTIME) - time.clock_gettime(time.CLOCK_MONOTONIC)) * 1e6))'`,
)).trim().split("\n").map(Number);
const clkTck = clocks[0]!;
const bootMinusMonoUs = clocks[1]!;
log(`CLK_TCK ${clkTck}, CLOCK_BOOTTIME - CLOCK_MONOTONIC = ${bootMinusMonoUs} µs`);

await must(
  [stratum, "node", "install", "--mode", "nspawn", "--bundle", bundle, "--node", "node-1"],
);
await settled();
log(`installed in nspawn mode (${elapsed()})`);

const results: Record<Mode, { migration: Figures; restart: Figures }[]> = { host: [], nspawn: [] };
for (let i = 0; i < runs; i++) {
  for (const to of ["host", "nspawn"] as const) {
    const from = (await node()).slot;
    const cursor = await journalCursor();
    const m0 = performance.now();
    await must([stratum, "migrate", "run", "--to", to, "--bundle", bundle]);
    const target = (await node()).slot;
    const migration = figures(await events(cursor, from, target, to));
    log(`run ${i + 1}: migrate → ${to}: ${ms(performance.now() - m0)} whole, ${show(migration)}`);
    await must([stratum, "migrate", "ack"]);
    await settled();

    const restart = figures(await restartSlot(target, to));
    log(`run ${i + 1}: restart in ${to}: ${show(restart)} (${elapsed()})`);
    await settled();
    results[to].push({ migration, restart });
  }
}
printTable();
log(`wall time ${elapsed()}`);

/** Stops the slot's units in one call, its workloads in host mode (as stratum's stop), starts it. */
async function restartSlot(slot: Slot, mode: Mode): Promise<Events> {
  const stack = JSON.parse(await vm.sh(`cat /var/lib/stratum/slots/${slot}/stack.json`));
  const workloads: string[] = mode === "host" ? stack.workloads ?? [] : [];
  const cursor = await journalCursor();
  const services = (await slotServices(slot)).join(" ");
  await must([
    "sh",
    "-c",
    `set -e; systemctl stop stratum-${slot}.target ${services}
${workloads.length ? `sh -c "$1" sh ${workloads.join(" ")}` : ""}
systemctl start stratum-${slot}.target`,
    "sh",
    stopWorkloadsScript,
  ]);
  return await events(cursor, slot, slot, mode);
}

/** The events of the stop of `source` and start of `target` since `cursor` (see the header). */
async function events(cursor: string, source: Slot, target: Slot, mode: Mode): Promise<Events> {
  const ours = new RegExp(`^stratum-${source}(\\.target|-[a-z0-9-]+\\.service)$`);
  const stops = (await vm.sh(`journalctl --after-cursor='${cursor}' -o json _PID=1`))
    .trim().split("\n").filter(Boolean).map((l) => JSON.parse(l))
    .filter((j) => ours.test(j.UNIT ?? "") && [unitStopping, unitStopped].includes(j.MESSAGE_ID))
    .map((j) => ({
      unit: j.UNIT as string,
      id: j.MESSAGE_ID as string,
      // When the kernel took PID 1's message (journald may write it later).
      at: Number(j.__MONOTONIC_TIMESTAMP) -
        (Number(j.__REALTIME_TIMESTAMP) -
          Number(j._SOURCE_REALTIME_TIMESTAMP ?? j.__REALTIME_TIMESTAMP)),
    }));
  const down = stops.filter((s) => s.id === unitStopped && s.unit.endsWith(".service"));
  if (stops.length === 0 || down.length === 0) {
    throw new Error(`no stop of slot ${source} in the guest's journal`);
  }
  const services = await slotServices(target);
  const starts = await Promise.all(
    services.map(async (u) => Number(await prop(u, "InactiveExitTimestampMonotonic"))),
  );
  const pids = (await vm.exec(["pgrep", "-f", podPattern])).stdout.trim().split(/\s+/)
    .filter(Boolean);
  if (pids.length !== 1) throw new Error(`${pids.length} pod containers run, not 1`);
  const stat = await vm.sh(`cat /proc/${pids[0]}/stat`);
  const startTicks = Number(stat.slice(stat.lastIndexOf(")") + 2).split(" ")[19]);
  const e: Events = {
    stopBegan: Math.min(...stops.map((s) => s.at)),
    sourceDown: Math.max(...down.map((s) => s.at)),
    targetStart: Math.min(...starts),
    podStarted: startTicks * 1e6 / clkTck - bootMinusMonoUs,
    targetReady: Number(await prop(`stratum-${target}.target`, "ActiveEnterTimestampMonotonic")),
  };
  if (mode === "nspawn") {
    // Asked inside the machine (its PID namespace too: its systemd does not
    // answer a client from outside it). Not the downtime: logged when missing.
    const r = await vm.exec([
      "sh",
      "-c",
      `pid=$(systemctl show -P MainPID stratum-${target}-machine.service); ` +
      `nsenter -t $(cat /proc/$pid/task/$pid/children) -m -p ` +
      `systemctl show -P ActiveEnterTimestampMonotonic basic.target`,
    ]);
    if (r.code === 0 && Number(r.stdout) > 0) e.machineBooted = Number(r.stdout);
    else log(`the machine's basic.target: ${r.stdout.trim()} ${r.stderr.trim()}`);
  }
  // Every event after the one before it (the pod's start is in 1/CLK_TCK s steps).
  const order = [e.stopBegan, e.sourceDown, e.targetStart, e.machineBooted, e.podStarted]
    .filter((x) => x !== undefined);
  if (order.some((x, i) => i > 0 && x < order[i - 1]! - 1e6 / clkTck)) {
    throw new Error(`events out of order (a pod from before the stop?): ${JSON.stringify(e)}`);
  }
  return e;
}

function figures(e: Events): Figures {
  const f: Figures = {
    downtime: (e.podStarted - e.stopBegan) / 1000,
    stop: (e.sourceDown - e.stopBegan) / 1000,
    between: (e.targetStart - e.sourceDown) / 1000,
    startToPod: (e.podStarted - e.targetStart) / 1000,
  };
  if (e.machineBooted !== undefined) f.boot = (e.machineBooted - e.targetStart) / 1000;
  return f;
}

function printTable() {
  const med = (xs: number[]) => {
    const s = [...xs].sort((a, b) => a - b);
    const m = Math.floor(s.length / 2);
    return s.length % 2 ? s[m]! : (s[m - 1]! + s[m]!) / 2;
  };
  const cell = (xs: number[], unit = "", digits = 0) => {
    if (xs.length === 0) return "";
    const f = (x: number) => x.toFixed(digits);
    return xs.length === 1
      ? `${f(xs[0]!)}${unit}`
      : `${f(med(xs))}${unit} (${f(Math.min(...xs))}–${f(Math.max(...xs))})`;
  };
  const dirs = [["host", "nspawn"], ["nspawn", "host"]] as const;
  const rows: string[][] = [[
    "ms, median (min–max)",
    ...dirs.flatMap(([f, t]) => [`${f} → ${t}: migration`, `restart in ${t}`]),
  ]];
  const row = (label: string, key: keyof Figures) =>
    rows.push([
      label,
      ...dirs.flatMap(([, t]) =>
        (["migration", "restart"] as const).map((k) =>
          cell(results[t].map((r) => r[k][key]).filter((x) => x !== undefined))
        )
      ),
    ]);
  row("stop began → new pod started", "downtime");
  row("  source's stop (units down)", "stop");
  row("  stopped → first unit starts", "between");
  row("  first unit starts → pod", "startToPod");
  row("    of which machine boot", "boot");
  rows.push([
    "ratio migration / restart",
    ...dirs.flatMap(([, t]) => [
      cell(results[t].map((r) => r.migration.downtime / r.restart.downtime), " ×", 2),
      "",
    ]),
  ]);
  const widths = rows[0]!.map((_, c) => Math.max(...rows.map((r) => r[c]!.length)));
  console.log(
    `The node stack's downtime in a VM (${guest}; qemu TCG), ${runs} run(s) per direction:`,
  );
  for (const r of rows) console.log(r.map((c, i) => c.padEnd(widths[i]!)).join("  ").trimEnd());
  console.log(
    "machine boot: the machine unit's start → basic.target in the machine (before its stack starts)",
  );
}

function show(f: Figures): string {
  return `down ${ms(f.downtime)} (stop ${ms(f.stop)}, between ${ms(f.between)}, ` +
    `start → pod ${ms(f.startToPod)}${f.boot === undefined ? "" : `, boot ${ms(f.boot)}`})`;
}

function ms(x: number): string {
  return `${x.toFixed(0)} ms`;
}

async function must(argv: string[]): Promise<string> {
  const r = await vm.exec(argv);
  if (r.code !== 0) throw new Error(`${argv.slice(0, 4).join(" ")}: exit ${r.code}: ${r.stderr}`);
  return r.stdout;
}

async function node(): Promise<{ mode: Mode; slot: Slot }> {
  return JSON.parse(await vm.sh("cat /etc/stratum/node.json"));
}

async function journalCursor(): Promise<string> {
  const out = await vm.sh("journalctl --show-cursor -n 0 -q");
  const c = out.match(/^-- cursor: (.+)$/m)?.[1];
  if (!c) throw new Error(`no journal cursor: ${out}`);
  return c;
}

/** The slot's service units systemd has loaded (in nspawn mode: its machine). */
async function slotServices(slot: Slot): Promise<string[]> {
  const out = await vm.sh(
    `systemctl list-units --all --plain --no-legend 'stratum-${slot}-*.service'`,
  );
  return out.trim().split("\n").map((l) => l.split(/\s+/)[0]!).filter(Boolean);
}

async function prop(unit: string, name: string): Promise<string> {
  return (await vm.sh(`systemctl show -P ${name} ${unit}`)).trim();
}

/** Waits (4 min at most) until the stack's own probe passes in its context, as the VM test does. */
async function settled(): Promise<void> {
  const { mode, slot } = await node();
  const slotDir = `/var/lib/stratum/slots/${slot}`;
  const check = mode === "host"
    ? `/bin/sh ${slotDir}/opt/node/lib/node-check ${slotDir}/opt/node/bin`
    : `pid=$(systemctl show -P MainPID stratum-${slot}-machine.service); ` +
      `nsenter -t $(cat /proc/$pid/task/$pid/children) -m -p /bin/sh /opt/node/lib/node-check /opt/node/bin`;
  const s = performance.now();
  for (;;) {
    const r = await vm.exec(["sh", "-c", check]);
    if (r.code === 0) return;
    if (performance.now() - s > 240_000) {
      throw new Error(`the stack's probe: ${r.stdout}${r.stderr}`);
    }
    await new Promise((res) => setTimeout(res, 1000));
  }
}
