import type { Backend, NodeSpec, SlotRef } from "../isolation/mod.ts";
import type { Step } from "./step.ts";

/** What {@linkcode InPlaceSpec.record} is given besides the step. */
export interface RecordOptions {
  /** Why the migration ended; set only with StepRolledBack and StepFailed. */
  readonly message?: string;
  readonly signal: AbortSignal;
}

/**
 * Describes an in-place migration. Hooks may be left out only where noted;
 * a missing required hook is a programming error that runInPlace reports
 * before anything happens. Every hook takes an AbortSignal last: the forward
 * path passes the run's signal, a rollback passes one that never aborts, since
 * stopping a rollback half-way is worse than finishing it.
 */
export interface InPlaceSpec {
  readonly source: Backend;
  /** Names the slot the source runs in. */
  readonly sourceRoot: SlotRef;
  readonly target: Backend;
  /** Names the alternate slot and the node to prepare. */
  readonly targetSpec: NodeSpec;
  /**
   * Names the target slot. Required by resumeInPlace, which has no prepare
   * result to take it from; runInPlace uses it only to clean up after a
   * failed prepare.
   */
  readonly targetRoot?: SlotRef;

  /** Checks the target backend's requirements before anything is mutated. Required. */
  readonly preflight?: (target: Backend, signal: AbortSignal) => Promise<void>;
  /** Fetches the artifacts the target needs, before anything is mutated. Optional. */
  readonly download?: (signal: AbortSignal) => Promise<void>;
  /**
   * Saves the host configuration files both stacks write, before the first
   * step that changes the host. Optional; when set, restoreConfig and
   * discardConfig must be too. The snapshot must appear whole or not at all:
   * a rollback may run restoreConfig after a crash during the snapshot.
   */
  readonly snapshotConfig?: (signal: AbortSignal) => Promise<void>;
  /**
   * Puts the saved files back during a rollback, after the target is gone and
   * before the source starts. Resolves when there is no snapshot to restore.
   * The snapshot is kept when it fails.
   */
  readonly restoreConfig?: (signal: AbortSignal) => Promise<void>;
  /** Removes the snapshot once the migration is over, after a success or a completed rollback. */
  readonly discardConfig?: (signal: AbortSignal) => Promise<void>;
  /** Removes host networking the stopped source left behind, as a repave does. Required. */
  readonly cleanupNetwork?: (signal: AbortSignal) => Promise<void>;
  /** Records the new mode, slot and owning backend. Optional. */
  readonly persistTarget?: (target: SlotRef, signal: AbortSignal) => Promise<void>;
  /**
   * Puts the source's applied config back after persistTarget when the
   * migration rolls back. Required whenever persistTarget is set.
   */
  readonly restoreSource?: (signal: AbortSignal) => Promise<void>;
  /**
   * Resolves once the target node stack is up, or rejects after a bounded
   * timeout. Cordoning, draining and uncordoning the Node belong to the
   * operator, not to the migration. Required.
   */
  readonly waitReady?: (signal: AbortSignal) => Promise<void>;
  /** Removes the source's applied config after success. Required. */
  readonly removeSourceConfig?: (signal: AbortSignal) => Promise<void>;
  /**
   * Applies the host preparation a bootstrap in the target mode would have,
   * once the target is up. Optional. A failure does not undo the migration;
   * it leaves it short of StepComplete, so a resume runs it again.
   */
  readonly prepareHost?: (signal: AbortSignal) => Promise<void>;
  /**
   * Called before each step that changes the host, with the step about to run
   * (and with StepReady, StepComplete, StepRolledBack and StepFailed after the
   * matching work). A write-ahead log: when it rejects, the step does not run
   * and the migration is rolled back like any failure. Optional, but without
   * it nothing can be resumed.
   */
  readonly record?: (step: Step, opts: RecordOptions) => Promise<void>;
  /**
   * Told once a failure starts a rollback, before its first action, with
   * the failure: for progress lines (the journal records only its end).
   * Optional; must not throw.
   */
  readonly rollingBack?: (cause: Error) => void;
}

/** How a migration ended. */
export interface Result {
  /** The slot the node now runs in. Set only when the target is up and recorded ready. */
  readonly target?: SlotRef;
  /**
   * True when a failure was followed by a completed rollback: the source runs
   * in its original mode again (started, or never stopped). Agrees with a
   * journal at rolled-back, also when recording it failed.
   */
  readonly rolledBack: boolean;
  /**
   * Why the migration did not complete, every cause joined: test it with
   * `is` for ErrRollbackFailed and ErrInterrupted. Unset on success. This is
   * Go's `(Result, error)` pair: the result still says what state the node is
   * in when there is an error.
   */
  readonly error?: Error;
}
