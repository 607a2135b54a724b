/**
 * The real migration of this node: the seed's InPlaceSpec hooks wired to the
 * host (files under a root, systemctl, bundles, network) and to the real
 * backends. `lib/migrate` stays pure orchestration; this package is what the
 * CLI and the sandbox tests run.
 *
 * @example Wire a host → nspawn migration
 * ```ts ignore
 * import * as host from "../host/mod.ts";
 * import * as node from "./mod.ts";
 * const spec = node.nodeSpec({
 *   paths: host.hostPaths("/"), systemctl: new host.Systemctl(),
 *   from: "host", to: "nspawn", sourceSlot: "a", node: "node-1",
 *   bundle: "/srv/stratum-bundle", waitReadyMs: 120_000,
 * });
 * ```
 *
 * @module
 */

export {
  bundlePolicy,
  ErrPreflight,
  freeSpace,
  preflight,
  type PreflightInput,
} from "./preflight.ts";
export { ErrNotReady, nodeSpec, type NodeSpecOptions, waitReady } from "./spec.ts";
export {
  bundleDigest,
  ErrInstalledOtherwise,
  install,
  type Installed,
  installNode,
  type InstallOptions,
  type InstallStep,
  installSteps,
} from "./install.ts";
export { plan, type PlannedStep } from "./plan.ts";
export { handoffStore, installFailpoint, withFailpoint } from "./failpoint.ts";
export { type ReprovisionOptions, reprovisionSpec } from "./reprovision.ts";
export { dropWipeRequest, requestWipe, wipeRequested } from "./wipe_state.ts";
export {
  bootUnit,
  bootUnitText,
  installBootUnit,
  legacyResumeUnit,
  type SelfCommand,
  selfCommand,
} from "./boot_unit.ts";
export { boot, type BootDeps, type BootResult } from "./boot.ts";
