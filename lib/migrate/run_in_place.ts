import type { SlotRef } from "../isolation/mod.ts";
import { checkSpec, finish, neverAborted, Progress, rollback, targetRootOf } from "./_progress.ts";
import { ErrAborted } from "./errors.ts";
import type { InPlaceSpec, Result } from "./spec.ts";
import {
  StepAwaitingReady,
  StepPersisting,
  StepPreparing,
  StepReady,
  StepStartingTarget,
  StepStoppingSource,
} from "./step.ts";

/** Options for {@linkcode runInPlace}. */
export interface RunOptions {
  /**
   * Stops the forward path at the next hook, which then rolls back like any
   * failure. The rollback itself is not interrupted.
   */
  readonly signal?: AbortSignal;
}

/**
 * Performs the in-place steps of the design. Nothing is mutated, and no
 * journal written, when preflight or download fails, when the signal aborts
 * before the first step, or when the first journal write fails. Every step that changes the host is recorded
 * first. Once the target may exist, any failure destroys it and, if the
 * source may have been stopped, starts the source again. The source slot is
 * kept until waitReady succeeds.
 *
 * Never rejects: the result says how the node ended up and `error` why the
 * migration did not complete.
 */
export async function runInPlace(spec: InPlaceSpec, opts: RunOptions = {}): Promise<Result> {
  const invalid = checkSpec(spec, false);
  if (invalid) return { rolledBack: false, error: invalid };
  const signal = opts.signal ?? neverAborted;
  const progress = new Progress();

  try {
    await progress.act("preflight", () => spec.preflight!(spec.target, signal));
    if (spec.download) await progress.act("download", () => spec.download!(signal));
  } catch (err) {
    return { rolledBack: false, error: err as Error };
  }

  // Until preparing is recorded nothing has changed, so nothing is undone
  // and no journal is left: an abort here, or a first journal write that
  // fails, ends the run as if it never started.
  try {
    if (signal.aborted) {
      throw new ErrAborted("Migration stopped before it changed anything", {
        cause: signal.reason,
      });
    }
    await progress.record(spec, StepPreparing, signal);
  } catch (err) {
    return { rolledBack: false, error: err as Error };
  }

  // What a rollback must undo grows as the steps go.
  let target: SlotRef | undefined;
  let sourceMayBeStopped = false;
  let persisted = false;
  try {
    if (spec.snapshotConfig) {
      await progress.act("snapshot-config", () => spec.snapshotConfig!(signal));
    }
    target = await progress.act("prepare", () => spec.target.prepare(spec.targetSpec, { signal }));

    await progress.record(spec, StepStoppingSource, signal);
    sourceMayBeStopped = true;
    await progress.act("stop-source", () => spec.source.stop(spec.sourceRoot, { signal }));
    await progress.act("cleanup-network", () => spec.cleanupNetwork!(signal));

    await progress.record(spec, StepStartingTarget, signal);
    const started = target;
    await progress.act("start-target", () => spec.target.start(started, { signal }));

    await progress.record(spec, StepPersisting, signal);
    persisted = true;
    if (spec.persistTarget) {
      await progress.act("persist-target", () => spec.persistTarget!(started, signal));
    }

    await progress.record(spec, StepAwaitingReady, signal);
    await progress.act("wait-ready", () => spec.waitReady!(signal));
    await progress.record(spec, StepReady, signal);
  } catch (err) {
    return await rollback(spec, progress, {
      target: target ?? targetRootOf(spec),
      persisted,
      startSource: sourceMayBeStopped,
    }, err as Error);
  }
  return await finish(spec, progress, target, signal);
}
