// deno-lint-ignore-file no-console
// Runs inside the systemd sandbox: installs a node in FROM mode, then runs
// lib/migrate's runInPlace with the real backends and hooks (lib/node) to TO
// mode, and prints the result and the node's state as one JSON document.
//
//   drive_migrate.ts FROM TO BUNDLE_DIR [WAIT_READY_MS]

import * as host from "../../../lib/host/mod.ts";
import * as isolation from "../../../lib/isolation/mod.ts";
import * as migrate from "../../../lib/migrate/mod.ts";
import * as node from "../../../lib/node/mod.ts";
import { bringUp } from "../bring_up.ts";
import { health } from "./_health.ts";

const [from, to, bundle, waitArg] = Deno.args;
if (!isolation.isMode(from) || !isolation.isMode(to) || !bundle) {
  throw new Error("usage: FROM TO BUNDLE_DIR [WAIT_READY_MS]");
}
const paths = host.hostPaths("/");
const systemctl = new host.Systemctl({ timeout: 60_000 });

const self = node.selfCommand(new URL("../../../main.ts", import.meta.url).href);
await bringUp({ paths, systemctl, mode: from, slot: "a", node: "node-1", bundle, self });
const before = await health();
const store = new migrate.JournalStore(paths.journal);
const spec = node.inPlaceHooks({
  migrationId: new Date().toISOString(),
  paths,
  systemctl,
  from,
  to,
  sourceSlot: "a",
  node: "node-1",
  bundle,
  waitReadyMs: Number(waitArg ?? "20000"),
  log: (l) => console.error(l),
});
const result = await migrate.runInPlace({
  ...spec,
  record: migrate.recorder(store, {
    strategy: "in-place",
    from,
    to,
    sourceSlot: "a",
    targetSlot: "b",
  }),
});
console.log(JSON.stringify({
  before,
  result: {
    target: result.target ?? null,
    rolledBack: result.rolledBack,
    error: result.error?.message ?? null,
    rollbackFailed: migrate.is(result.error, migrate.ErrRollbackFailed),
  },
  journal: await store.load().then((j) => j.step, (e) => String(e)),
  node: await isolation.readNodeConfig(paths.nodeConfig),
  units: { a: await isolation.unitsOf(paths, "a"), b: await isolation.unitsOf(paths, "b") },
  active: {
    a: await systemctl.isActive(isolation.targetUnit("a")),
    b: await systemctl.isActive(isolation.targetUnit("b")),
  },
  slots: {
    a: await Deno.stat(paths.slot("a")).then(() => true, () => false),
    b: await Deno.stat(paths.slot("b")).then(() => true, () => false),
  },
  health: await health(),
  sysctl: await Deno.readTextFile("/etc/sysctl.d/90-stratum.conf").catch(() => null),
  snapshot: await Deno.stat(paths.snapshotDir).then(() => true, () => false),
  pins: [...Deno.readDirSync("/etc/apt/preferences.d")].map((e) => e.name).filter((n) =>
    n.startsWith("stratum")
  ).sort(),
}));
