/**
 * Moves a live node from one isolation mode to another through blue/green
 * slots.
 *
 * The orchestration is written against `isolation.Backend`, so it does not
 * know how a mode works, and every host side effect it needs is a hook the
 * caller supplies. Each step that changes the host is written to a journal
 * first ({@linkcode JournalStore}, atomic and durable), so after a crash or
 * power loss at any instant {@linkcode resumeInPlace} can tell what may have
 * happened and finish or roll back. The invariant after every run or resume:
 * exactly one of source or target runs, or the journal says `failed`.
 *
 * @example Run a migration with a journal
 * ```ts
 * import * as migrate from "./mod.ts";
 * declare const hooks: Omit<migrate.InPlaceSpec, "record">; // see lib/node's inPlaceHooks
 * const store = new migrate.JournalStore("/var/lib/stratum/migration.json");
 * const record = migrate.recorder(store, { strategy: "in-place", from: "host", to: "nspawn" });
 * const result = await migrate.runInPlace({ ...hooks, record });
 * if (result.error && migrate.is(result.error, migrate.ErrRollbackFailed)) {
 *   // the node needs attention
 * }
 * ```
 *
 * @module
 */

export { find, is, join } from "../errors/mod.ts";
export {
  type Action,
  ActionError,
  ErrAborted,
  ErrCorruptJournal,
  ErrInterrupted,
  ErrInvalidSpec,
  ErrNoJournal,
  ErrRollbackFailed,
  ErrTargetLost,
  ErrTooManyAttempts,
} from "./errors.ts";
export { decodeJournal, encodeJournal, type Journal, JournalVersion } from "./journal.ts";
export { JournalStore, type JournalStoreOptions } from "./journal_store.ts";
export { type JournalStart, type Recorder, recorder } from "./recorder.ts";
export {
  defaultMaxAttempts,
  resume,
  type ResumeJournalOptions,
  type ResumeOutcome,
} from "./resume.ts";
export { resumeInPlace, type ResumeOptions } from "./resume_in_place.ts";
export {
  defaultHandoffAttempts,
  handoff,
  type HandoffOutcome,
  type ReprovisionSpec,
} from "./reprovision.ts";
export { runInPlace, type RunOptions } from "./run_in_place.ts";
export type { InPlaceSpec, RecordOptions, Result } from "./spec.ts";
export {
  allSteps,
  inPlaceSteps,
  isStep,
  isTerminal,
  type Step,
  StepAwaitingReady,
  StepBootstrapped,
  StepBootstrapping,
  StepComplete,
  StepFailed,
  StepPersisting,
  StepPreparing,
  StepReady,
  StepReprovisioning,
  StepRolledBack,
  StepStartingTarget,
  StepStoppingSource,
} from "./step.ts";
export {
  isStrategy,
  strategies,
  type Strategy,
  StrategyInPlace,
  StrategyReprovision,
} from "./strategy.ts";
