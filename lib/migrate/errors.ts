import type { Step } from "./step.ts";

/**
 * Returned, joined with the outcome of the rollback, by resumeInPlace when it
 * undid a migration that a restart interrupted. Test with `is`.
 */
export class ErrInterrupted extends Error {
  override name = "ErrInterrupted";
  constructor(message = "Isolation migration was interrupted", opts?: ErrorOptions) {
    super(message, opts);
  }
}

/** No migration is recorded. Test with `is`. */
export class ErrNoJournal extends Error {
  override name = "ErrNoJournal";
  constructor(message = "No migration journal", opts?: ErrorOptions) {
    super(message, opts);
  }
}

/**
 * Joined with the original failure when a failed migration could not restore
 * the source. The node needs attention. Test with `is`; the rollback action
 * that failed is its `cause`.
 */
export class ErrRollbackFailed extends Error {
  override name = "ErrRollbackFailed";
  constructor(opts?: ErrorOptions) {
    super(
      "Rollback to the source failed" +
        (opts?.cause instanceof Error ? `: ${opts.cause.message}` : ""),
      opts,
    );
  }
}

/**
 * The journal file exists but cannot be trusted: empty, truncated, not JSON,
 * a future version, or an unknown step. Never read as "no journal": a
 * migration may be under way.
 */
export class ErrCorruptJournal extends Error {
  override name = "ErrCorruptJournal";
  readonly path: string;
  constructor(path: string, detail: string, opts?: ErrorOptions) {
    super(`Migration journal ${path} is unreadable: ${detail}`, opts);
    this.path = path;
  }
}

/**
 * Resume gave up: the migration was resumed more times than the bound without
 * recording any progress, so recovery itself keeps crashing the node.
 */
export class ErrTooManyAttempts extends Error {
  override name = "ErrTooManyAttempts";
  readonly attempts: number;
  constructor(step: Step, attempts: number) {
    super(
      `Migration was resumed ${attempts} times at step ${step} without progress: giving up`,
    );
    this.attempts = attempts;
  }
}

/**
 * The target was proven ready and recorded so, but a resume could not start
 * it again, and the source may already be gone: nothing runs, so the
 * migration is recorded failed and the node needs attention. Test with `is`.
 */
export class ErrTargetLost extends Error {
  override name = "ErrTargetLost";
  constructor(opts?: ErrorOptions) {
    super(
      "The target, already recorded ready, did not start again" +
        (opts?.cause instanceof Error ? `: ${opts.cause.message}` : ""),
      opts,
    );
  }
}

/**
 * The migration was stopped (SIGINT/SIGTERM, or its signal aborted) before it
 * changed anything: no journal was written and nothing is undone.
 */
export class ErrAborted extends Error {
  override name = "ErrAborted";
}

/** A spec the orchestration cannot run: a programming error, found before anything happens. */
export class ErrInvalidSpec extends Error {
  override name = "ErrInvalidSpec";
}

/** What the orchestration was doing when a hook or backend call failed. */
export type Action =
  | "preflight"
  | "download"
  | "record"
  | "snapshot-config"
  | "prepare"
  | "stop-source"
  | "cleanup-network"
  | "start-target"
  | "persist-target"
  | "wait-ready"
  | "remove-source-config"
  | "destroy-source"
  | "prepare-host"
  | "discard-config"
  | "destroy-target"
  | "restore-source"
  | "restore-config"
  | "start-source";

/**
 * One hook or backend call that failed, naming the action and the last step
 * recorded before it, so a report can say where the migration stopped. The
 * hook's own error is the `cause`.
 */
export class ActionError extends Error {
  override name = "ActionError";
  readonly action: Action;
  readonly step: Step | undefined;
  constructor(action: Action, step: Step | undefined, cause: unknown) {
    super(`${action}: ${cause instanceof Error ? cause.message : String(cause)}`, { cause });
    this.action = action;
    this.step = step;
  }
}
