/**
 * Isolation modes, the backend interface a migration drives, and the two
 * real backends.
 *
 * A node stack runs in one {@linkcode Mode}: `host` (systemd units on the
 * host) or `nspawn` (a systemd-nspawn machine). Each mode's stack lives in a
 * blue/green {@linkcode Slot}; a migration builds the target in the slot the
 * source does not use. This package also knows what each mode writes on the
 * host (config files, host preparation, the applied node config).
 *
 * @example Build and start the host stack in slot b
 * ```ts
 * import * as host from "../host/mod.ts";
 * import * as isolation from "./mod.ts";
 * const deps = { paths: host.hostPaths("/"), systemctl: new host.Systemctl() };
 * const backend = isolation.backendFor("host", deps);
 * const ref = await backend.prepare({ slot: "b", node: "node-1" });
 * await backend.start(ref);
 * ```
 *
 * @module
 */

export { isMode, type Mode, modes } from "./mode.ts";
export { isSlot, type NodeSpec, otherSlot, type Slot, type SlotRef, slots } from "./slot.ts";
export type { Backend, CallOptions } from "./backend.ts";
export { type BackendDeps } from "./_slot_backend.ts";
export { HostBackend } from "./host_backend.ts";
export { NspawnBackend } from "./nspawn_backend.ts";
export { backendFor } from "./backend_for.ts";
export {
  ErrBadStack,
  expand,
  type Grant,
  grants,
  parseStack,
  readStack,
  type Runtime,
  type RuntimeKind,
  runtimeKinds,
  type Service,
  type Stack,
} from "./stack.ts";
export { type ProbeContext, probeHealth, probeStack, probeStackWithin } from "./health.ts";
export {
  checkState,
  checkStateDir,
  checkWipe,
  claimState,
  ensureIdentity,
  ErrState,
  type NodeIdentity,
  planState,
  readIdentity,
  stateListProblem,
  stateMarkerName,
  wipeState,
} from "./state.ts";
export { serviceUnit, targetUnit, unitsOf } from "./units.ts";
export { configFiles, snapshotFiles } from "./config_files.ts";
export {
  discardKernelRecord,
  isKernelFile,
  kernelFileProblem,
  restoreKernelConfig,
} from "./host_kernel.ts";
export {
  conflictingPackages,
  firewallUnit,
  hostPackages,
  hostPrepConfig,
  installedPackages,
  packagePinsWanted,
  prepareHost,
  unprepareHost,
} from "./host_prep.ts";
export {
  ErrBadNodeConfig,
  type NodeConfig,
  readNodeConfig,
  restoreNodeConfig,
  saveNodeConfig,
  writeNodeConfig,
} from "./node_config.ts";
