// deno-lint-ignore-file no-console
// Runs inside the systemd sandbox for scripts/migrate_downtime.ts: installs a
// node in FROM mode, migrates it to TO with every hook and backend call timed,
// while a prober polls the health endpoint every 5 ms. Then measures the
// target stack's own start-to-healthy time. Prints one JSON document.
//   measure_migrate.ts FROM TO BUNDLE_DIR

import * as host from "../../../lib/host/mod.ts";
import * as isolation from "../../../lib/isolation/mod.ts";
import * as migrate from "../../../lib/migrate/mod.ts";
import * as node from "../../../lib/node/mod.ts";
import { bringUp } from "../bring_up.ts";

const [from, to, bundle] = Deno.args;
if (!isolation.isMode(from) || !isolation.isMode(to) || !bundle) throw new Error("usage");
const paths = host.hostPaths("/");
const systemctl = new host.Systemctl({ timeout: 60_000 });
import { healthUrl as url } from "./_health.ts";

async function healthy(): Promise<boolean> {
  try {
    const r = await fetch(url, { signal: AbortSignal.timeout(500) });
    await r.body?.cancel();
    return r.ok;
  } catch {
    return false;
  }
}

const self = node.selfCommand(new URL("../../../main.ts", import.meta.url).href);
await bringUp({ paths, systemctl, mode: from, slot: "a", node: "node-1", bundle, self });

// Time inside every hook and backend call.
let inside = 0;
let stopStarted = 0;
let readyAt = 0;
/** Time in each call made while neither stack serves (stop → wait-ready), by name. */
const down: Record<string, number> = {};
function timed<A extends unknown[], R>(name: string, fn: (...a: A) => Promise<R>) {
  return async (...a: A): Promise<R> => {
    const t0 = performance.now();
    if (name === "stop") stopStarted = t0;
    try {
      return await fn(...a);
    } finally {
      const t1 = performance.now();
      inside += t1 - t0;
      if (name === "waitReady") readyAt = t1;
      if (stopStarted > 0 && readyAt === 0) down[name] = (down[name] ?? 0) + t1 - t0;
    }
  };
}
function timedBackend(b: isolation.Backend): isolation.Backend {
  return {
    mode: b.mode,
    prepare: timed("prepare", b.prepare.bind(b)),
    start: timed("start", b.start.bind(b)),
    stop: timed("stop", b.stop.bind(b)),
    destroy: timed("destroy", b.destroy.bind(b)),
  };
}
const spec = node.inPlaceHooks({
  migrationId: new Date().toISOString(),
  paths,
  systemctl,
  from,
  to,
  sourceSlot: "a",
  node: "node-1",
  bundle,
  waitReadyMs: 30_000,
});
const hooks = Object.fromEntries(
  Object.entries(spec).map(([k, v]) => [k, typeof v === "function" ? timed(k, v as never) : v]),
) as unknown as typeof spec;
const store = new migrate.JournalStore(paths.journal);
const record = timed(
  "record",
  migrate.recorder(store, { strategy: "in-place", from, to, sourceSlot: "a", targetSlot: "b" }),
);

// The prober: the real outage as a client sees it.
let probing = true;
let lastOkBeforeGap = 0;
let firstOkAfterGap = 0;
let sawGap = false;
const prober = (async () => {
  while (probing) {
    const t = performance.now();
    const ok = await healthy();
    if (ok && !sawGap) lastOkBeforeGap = t;
    if (!ok) sawGap = true;
    if (ok && sawGap && firstOkAfterGap === 0) firstOkAfterGap = t;
    await new Promise((r) => setTimeout(r, 5));
  }
})();

const t0 = performance.now();
const result = await migrate.runInPlace({
  ...hooks,
  source: timedBackend(spec.source),
  target: timedBackend(spec.target),
  record,
});
const total = performance.now() - t0;
probing = false;
await prober;
if (result.error) throw result.error;

// The target stack's own start-to-healthy time, measured the same way.
const own: number[] = [];
const target = isolation.backendFor(to, { paths, systemctl });
for (let i = 0; i < 3; i++) {
  await target.stop({ mode: to, slot: "b" });
  const s = performance.now();
  await target.start({ mode: to, slot: "b" });
  while (!(await healthy())) await new Promise((r) => setTimeout(r, 5));
  own.push(performance.now() - s);
}
own.sort((a, b) => a - b);
console.log(JSON.stringify({
  from,
  to,
  totalMs: total,
  insideHooksMs: inside,
  overheadMs: total - inside,
  downtimeHooksMs: readyAt - stopStarted,
  downtimeProbedMs: firstOkAfterGap - lastOkBeforeGap,
  targetStartToHealthyMs: own[1],
  ...Object.fromEntries(Object.entries(down).map(([k, v]) => [`down.${k}`, v])),
}));
