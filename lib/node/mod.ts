/**
 * The use cases below the command line, one function each (install,
 * migrate in place, reprovision, resume what is recorded, boot, ack,
 * upgrade, rollback, repair: see
 * docs/use-cases.md), and the seed's InPlaceSpec hooks wired to this node
 * (files under a root, systemctl, bundles, network, state directories) that
 * they run. `lib/migrate` stays pure orchestration; each CLI command parses
 * its flags, calls one function here and reports.
 *
 * @example Migrate this node to nspawn mode, as `stratum migrate run` does
 * ```ts
 * import * as host from "../host/mod.ts";
 * import * as node from "./mod.ts";
 * const { journal, result } = await node.migrateInPlace({
 *   paths: host.hostPaths("/"),
 *   systemctl: new host.Systemctl(),
 *   to: "nspawn",
 *   bundle: "/srv/stratum-bundle",
 *   waitReadyMs: 120_000,
 *   lock: { command: "stratum migrate run --to nspawn", waitMs: 0 },
 *   self: node.selfCommand(import.meta.url),
 *   signal: new AbortController().signal,
 *   log: () => {},
 *   killSelf: () => Deno.kill(Deno.pid, "SIGKILL"),
 * });
 * if (result.rolledBack) {
 *   // the source runs again; journal?.message says why
 * }
 * ```
 *
 * @module
 */

export {
  bundlePolicy,
  checkKernelFiles,
  ErrPreflight,
  freeSpace,
  preflight,
  type PreflightInput,
  stackOf,
} from "./preflight.ts";
export {
  ErrNotReady,
  inPlaceHooks,
  type InPlaceHooksOptions,
  waitReady,
} from "./in_place_hooks.ts";
export {
  bundleDigest,
  ErrInstalledOtherwise,
  install,
  type Installed,
  type InstallOptions,
  type InstallStep,
  installSteps,
} from "./install.ts";
export { plan, planMigration, type Planned, type PlannedStep, planReprovision } from "./plan.ts";
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
export { boot, type BootDeps, bootNode, type BootNodeOptions, type BootResult } from "./boot.ts";
export { ErrBadRequest, ErrDamagedRelease, ErrJournalExists, ErrNotInstalled } from "./errors.ts";
export { type LockOptions, withLock } from "./lock.ts";
export { appliedNode, nextFor, requireNoJournal } from "./applied.ts";
export { loadJournal, resume, type ResumeOptions, resumeRecorded } from "./recorded.ts";
export {
  type Migrated,
  migrateInPlace,
  type MigrateOptions,
  runRecorded,
} from "./migrate_in_place.ts";
export {
  rollingBackLine,
  seconds,
  stamp,
  type StepContext,
  type StepLines,
  stepLines,
} from "./step_lines.ts";
export {
  ErrReprovisionRefused,
  handoffUnit,
  type ReprovisionStartOptions,
  startReprovision,
} from "./reprovision_start.ts";
export {
  ErrUnitNotStarted,
  startTransient,
  transientArgv,
  type TransientUnit,
} from "./transient_unit.ts";
export { provision } from "./provision.ts";
export { upgrade, type Upgraded, type UpgradeOptions } from "./upgrade.ts";
export { ack } from "./ack.ts";
export {
  appendHistory,
  type HistoryEvent,
  maxHistoryBytes,
  type Place,
  placeOf,
  readHistory,
} from "./history.ts";
export { rollback, type RollbackOptions } from "./rollback.ts";
export { releaseDamage, repair, type Repaired, type RepairOptions } from "./repair.ts";
export {
  type ChangePlan,
  type Downtime,
  lockFree,
  migrationRefusal,
  planInstall,
  planRollback,
  planUpgrade,
  type Release,
  type SlotChangePlanOptions,
} from "./plan_change.ts";
