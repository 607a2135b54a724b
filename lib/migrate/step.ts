/**
 * How far a migration got. Each value is written before the step it names
 * starts, so after a crash it says what may have happened, not what finished.
 */
export type Step =
  | typeof StepPreparing
  | typeof StepStoppingSource
  | typeof StepStartingTarget
  | typeof StepPersisting
  | typeof StepAwaitingReady
  | typeof StepReady
  | typeof StepComplete
  | typeof StepRolledBack
  | typeof StepFailed
  | typeof StepReprovisioning
  | typeof StepBootstrapping
  | typeof StepBootstrapped;

/** Precedes Prepare: a target slot may be partially built. */
export const StepPreparing = "preparing";
/** Precedes the source stop: the source may be stopped. */
export const StepStoppingSource = "stopping-source";
/** Precedes the target start: the target may be running. */
export const StepStartingTarget = "starting-target";
/** Precedes PersistTarget: the target's applied config may exist. */
export const StepPersisting = "persisting";
/** Follows PersistTarget: the target runs and is recorded. */
export const StepAwaitingReady = "awaiting-ready";
/** Follows a successful WaitReady: only source cleanup is left. */
export const StepReady = "ready";
/** Follows source cleanup: the migration is done. */
export const StepComplete = "complete";
/**
 * Terminal: the migration failed and the node runs in its original mode
 * again. The journal's message says why until the outcome is acknowledged.
 */
export const StepRolledBack = "rolled-back";
/**
 * Terminal: the migration failed and the node could not be put back, so it
 * needs attention. The journal's message says why.
 */
export const StepFailed = "failed";
/**
 * A reprovision mode change whose reset and bootstrap are carried out by the
 * handoff command; the process that started the migration is gone by then.
 */
export const StepReprovisioning = "reprovisioning";
/** Follows the reset of a reprovision: bootstrap in the target mode is running or retrying. */
export const StepBootstrapping = "bootstrapping";
/** The node runs in the target mode and only the report is left. */
export const StepBootstrapped = "bootstrapped";

/** The in-place steps in the order a migration records them. */
export const inPlaceSteps: readonly Step[] = Object.freeze([
  StepPreparing,
  StepStoppingSource,
  StepStartingTarget,
  StepPersisting,
  StepAwaitingReady,
  StepReady,
  StepComplete,
]);

/** Every step a journal may hold. */
export const allSteps: readonly Step[] = Object.freeze([
  ...inPlaceSteps,
  StepRolledBack,
  StepFailed,
  StepReprovisioning,
  StepBootstrapping,
  StepBootstrapped,
]);

/** Steps after which nothing is left to do but report the outcome and remove the journal. */
export function isTerminal(step: Step): boolean {
  return step === StepComplete || step === StepRolledBack || step === StepFailed ||
    step === StepBootstrapped;
}

/** Reports whether `s` is a step value. */
export function isStep(s: unknown): s is Step {
  return typeof s === "string" && (allSteps as readonly string[]).includes(s);
}
