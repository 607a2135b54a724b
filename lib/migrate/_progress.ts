// Pieces shared by runInPlace and resumeInPlace: the hook runner that tags
// failures, the rollback, and the cleanup after a ready target.

import { join, messageOf } from "../errors/mod.ts";
import type { SlotRef } from "../isolation/mod.ts";
import {
  type Action,
  ActionError,
  ErrInvalidSpec,
  ErrRollbackFailed,
  ErrTargetLost,
} from "./errors.ts";
import type { InPlaceSpec, Result } from "./spec.ts";
import { type Step, StepComplete, StepFailed, StepRolledBack } from "./step.ts";

/** A signal that never aborts: rollbacks run to the end. */
export const neverAborted: AbortSignal = new AbortController().signal;

/** Tracks the last step recorded, so each failure can say where it happened. */
export class Progress {
  recorded: Step | undefined;
  constructor(recorded?: Step) {
    this.recorded = recorded;
  }

  /** Runs one hook, turning its failure into an ActionError naming it. */
  async act<T>(action: Action, fn: () => Promise<T>): Promise<T> {
    try {
      return await fn();
    } catch (err) {
      throw new ActionError(action, this.recorded, err);
    }
  }

  /** Records `step` through the spec's write-ahead hook. */
  async record(
    spec: InPlaceSpec,
    step: Step,
    signal: AbortSignal,
    message?: string,
  ): Promise<void> {
    if (spec.record) {
      const rec = spec.record;
      await this.act("record", () => rec(step, message ? { signal, message } : { signal }));
    }
    this.recorded = step;
  }
}

/** The target slot when prepare gave none: the spec's targetRoot, or the one targetSpec names. */
export function targetRootOf(spec: InPlaceSpec): SlotRef {
  return spec.targetRoot ?? { mode: spec.target.mode, slot: spec.targetSpec.slot };
}

/** Reports the hooks a spec lacks, as one programming error, or undefined. */
export function checkSpec(spec: InPlaceSpec, forResume: boolean): ErrInvalidSpec | undefined {
  const missing: string[] = [];
  const need = (ok: unknown, name: string) => ok === undefined && missing.push(name);
  need(spec.source, "source");
  need(spec.target, "target");
  need(spec.sourceRoot, "sourceRoot");
  need(spec.targetSpec, "targetSpec");
  need(spec.preflight, "preflight");
  need(spec.cleanupNetwork, "cleanupNetwork");
  need(spec.waitReady, "waitReady");
  need(spec.removeSourceConfig, "removeSourceConfig");
  if (spec.persistTarget) need(spec.restoreSource, "restoreSource (persistTarget is set)");
  if (spec.snapshotConfig) {
    need(spec.restoreConfig, "restoreConfig (snapshotConfig is set)");
    need(spec.discardConfig, "discardConfig (snapshotConfig is set)");
  }
  if (forResume) need(spec.targetRoot, "targetRoot");
  if (missing.length === 0) return undefined;
  return new ErrInvalidSpec(`In-place migration spec is missing: ${missing.join(", ")}`);
}

/** What a rollback has to undo. */
export interface Undo {
  /** The target slot may be partly built or running. */
  readonly target: SlotRef | undefined;
  /** persistTarget may have run: put the source's applied config back. */
  readonly persisted: boolean;
  /** The source may not be running: start it. */
  readonly startSource: boolean;
}

/**
 * Undoes a migration in the order of the design: destroy the target, restore
 * the source's applied config, restore the host config, start the source,
 * then discard the snapshot and record rolled-back.
 *
 * It stops at the first of the first four actions that fails, since a later
 * one could make things worse (starting the source next to a target that
 * would not die), records failed and joins ErrRollbackFailed with the cause.
 * Once the source runs the rollback is done: a snapshot that cannot be
 * discarded is a warning joined to the error (a later migration never
 * restores another one's snapshot), and a rolled-back record that cannot be
 * written is joined too, with `rolledBack` still true, since that is what
 * happened to the node.
 */
export async function rollback(
  spec: InPlaceSpec,
  progress: Progress,
  undo: Undo,
  cause: Error,
): Promise<Result> {
  const s = neverAborted;
  spec.rollingBack?.(cause);
  const actions: [Action, () => Promise<void>][] = [];
  const target = undo.target;
  if (target) actions.push(["destroy-target", () => spec.target.destroy(target, { signal: s })]);
  if (undo.persisted && spec.restoreSource) {
    actions.push(["restore-source", bind(spec.restoreSource)]);
  }
  if (spec.restoreConfig) actions.push(["restore-config", bind(spec.restoreConfig)]);
  if (undo.startSource) {
    actions.push(["start-source", () => spec.source.start(spec.sourceRoot, { signal: s })]);
  }

  for (const [action, fn] of actions) {
    try {
      await progress.act(action, fn);
    } catch (err) {
      const failure = join(cause, new ErrRollbackFailed({ cause: err }))!;
      const recErr = await settle(progress.record(spec, StepFailed, s, messageOf(failure)));
      return { rolledBack: false, error: join(failure, recErr)! };
    }
  }
  const warning = spec.discardConfig
    ? await settle(progress.act("discard-config", bind(spec.discardConfig)))
    : undefined;
  const message = messageOf(cause) + (warning ? `; warning: ${messageOf(warning)}` : "");
  const recErr = await settle(progress.record(spec, StepRolledBack, s, message));
  return { rolledBack: true, error: join(cause, warning, recErr)! };
}

/** Resolves with the error `p` rejects with, or undefined. */
async function settle(p: Promise<unknown>): Promise<Error | undefined> {
  try {
    await p;
    return undefined;
  } catch (err) {
    return err instanceof Error ? err : new Error(String(err));
  }
}

/**
 * Records failed after a target recorded ready could not be started again
 * by a resume: the source may be gone, so nothing is undone.
 */
export async function targetLost(
  spec: InPlaceSpec,
  progress: Progress,
  cause: unknown,
): Promise<Result> {
  const failure = new ErrTargetLost({ cause });
  const recErr = await settle(
    progress.record(spec, StepFailed, neverAborted, messageOf(failure)),
  );
  return { rolledBack: false, error: join(failure, recErr)! };
}

/**
 * Finishes a migration whose target is ready: removes the source's config and
 * slot, prepares the host, discards the snapshot and records complete. A
 * failure leaves the journal at StepReady and the target running; a resume
 * runs this again, so every action must be idempotent.
 */
export async function finish(
  spec: InPlaceSpec,
  progress: Progress,
  target: SlotRef,
  signal: AbortSignal,
): Promise<Result> {
  try {
    await progress.act("remove-source-config", () => spec.removeSourceConfig!(signal));
    await progress.act("destroy-source", () => spec.source.destroy(spec.sourceRoot, { signal }));
    if (spec.prepareHost) await progress.act("prepare-host", () => spec.prepareHost!(signal));
    if (spec.discardConfig) await progress.act("discard-config", () => spec.discardConfig!(signal));
    await progress.record(spec, StepComplete, signal);
  } catch (err) {
    return { target, rolledBack: false, error: err as Error };
  }
  return { target, rolledBack: false };
}

function bind(fn: (signal: AbortSignal) => Promise<void>): () => Promise<void> {
  return () => fn(neverAborted);
}
