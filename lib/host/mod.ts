/**
 * Side effects on the host that a migration needs, knowing nothing of
 * isolation modes: durable file writes, systemctl, the config snapshot,
 * the lock and network cleanup. Every path is under a root (`hostPaths`), so
 * tests can run against a scratch tree.
 *
 * @example Replace a state file so a crash leaves the old or the new one
 * ```ts
 * import * as host from "./mod.ts";
 * await host.writeFileDurable("/var/lib/stratum/state.json", "{}\n", { mode: 0o644 });
 * ```
 *
 * @module
 */

export {
  ensureDir,
  removeFileDurable,
  removeStaleTemps,
  removeTreeDurable,
  symlinkDurable,
  syncDir,
  syncTree,
  writeFileDurable,
  type WriteOptions,
} from "./durable_file.ts";
export { type HostPaths, hostPaths } from "./paths.ts";
export { serviceInCgroup, serviceOf } from "./process_unit.ts";
export { sha256Hex, sha256Stream } from "./sha256.ts";
export { ErrUnitValue, quoteEnvAssignment, quoteExecArg } from "./unit_quote.ts";
export { ErrUnsafeFile, readSmallFile } from "./small_file.ts";
export { Systemctl, type SystemctlOptions, type UnitCallOptions, UnitError } from "./systemctl.ts";
export { ConfigSnapshot } from "./config_snapshot.ts";
export {
  chainPattern,
  cleanupNetwork,
  type CleanupReport,
  linkPattern,
  tablePattern,
} from "./network_cleanup.ts";
export {
  type AcquireOptions,
  bootId,
  ErrBusy,
  lockHeld,
  type LockHolder,
  MigrationLock,
  readHolder,
  runningHolder,
} from "./lock.ts";
