import { join } from "../errors/mod.ts";
import { checkSpec, finish, neverAborted, Progress, rollback, targetLost } from "./_progress.ts";
import { ErrInterrupted, ErrInvalidSpec } from "./errors.ts";
import type { InPlaceSpec, Result } from "./spec.ts";
import {
  type Step,
  StepAwaitingReady,
  StepComplete,
  StepFailed,
  StepPersisting,
  StepPreparing,
  StepReady,
  StepRolledBack,
  StepStartingTarget,
  StepStoppingSource,
} from "./step.ts";

/** Options for {@linkcode resumeInPlace}. */
export interface ResumeOptions {
  /** Stops waiting for the target; the rollback that follows is not interrupted. */
  readonly signal?: AbortSignal;
}

/**
 * Decides what to do with an in-place migration a restart interrupted, from
 * the last step record saw.
 *
 * - preparing: the source was never stopped. Removes the partial target,
 *   restores the host config, makes sure the source runs (a reboot may have
 *   left it down) and records rolled-back. No error.
 * - stopping-source, starting-target, persisting: the source may be stopped.
 *   Rolls back to the source and returns ErrInterrupted joined with the
 *   rollback's outcome: repeating a step that crashed the process could loop.
 * - awaiting-ready: the target ran and was recorded. Starts it (a no-op if it
 *   runs), waits for it as the original run would, then finishes or rolls back.
 * - ready: only cleanup was left. Makes sure the target runs and finishes.
 *   A target that will not start again is recorded failed (ErrTargetLost):
 *   the source's config and slot may already be removed, so there may be
 *   nothing to roll back to.
 * - complete, rolled-back, failed: nothing to do.
 *
 * Never rejects; see Result.
 */
export async function resumeInPlace(
  spec: InPlaceSpec,
  last: Step,
  opts: ResumeOptions = {},
): Promise<Result> {
  const invalid = checkSpec(spec, true);
  if (invalid) return { rolledBack: false, error: invalid };
  const signal = opts.signal ?? neverAborted;
  const target = spec.targetRoot!;
  const progress = new Progress(last);

  switch (last) {
    case StepComplete:
      return { target, rolledBack: false };
    case StepRolledBack:
      return { rolledBack: true };
    case StepFailed:
      return { rolledBack: false };
    case StepPreparing: {
      const r = await rollback(spec, progress, {
        target,
        persisted: false,
        startSource: true,
      }, new ErrInterrupted("Migration was interrupted before the source was stopped"));
      // The source never stopped: a clean undo is not an error of its own.
      return r.error instanceof ErrInterrupted ? { rolledBack: r.rolledBack } : r;
    }
    case StepStoppingSource:
    case StepStartingTarget:
    case StepPersisting: {
      const r = await rollback(spec, progress, {
        target,
        persisted: last === StepPersisting,
        startSource: true,
      }, new ErrInterrupted(`Isolation migration was interrupted at step ${last}`));
      return r;
    }
    case StepAwaitingReady: {
      try {
        await progress.act("start-target", () => spec.target.start(target, { signal }));
        await progress.act("wait-ready", () => spec.waitReady!(signal));
        await progress.record(spec, StepReady, signal);
      } catch (err) {
        return await rollback(spec, progress, {
          target,
          persisted: true,
          startSource: true,
        }, err as Error);
      }
      return await finish(spec, progress, target, signal);
    }
    case StepReady: {
      try {
        await progress.act("start-target", () => spec.target.start(target, { signal }));
      } catch (err) {
        return await targetLost(spec, progress, err);
      }
      return await finish(spec, progress, target, signal);
    }
    default:
      return {
        rolledBack: false,
        error: join(new ErrInvalidSpec(`Step ${last} is not a step of an in-place migration`))!,
      };
  }
}
