import { ErrInvalidSpec, ErrTooManyAttempts } from "./errors.ts";
import type { Journal } from "./journal.ts";
import type { JournalStore } from "./journal_store.ts";
import { recorder } from "./recorder.ts";
import { resumeInPlace } from "./resume_in_place.ts";
import type { InPlaceSpec, Result } from "./spec.ts";
import { isTerminal, StepFailed } from "./step.ts";
import { StrategyInPlace } from "./strategy.ts";

/** The bound on resumes without progress, after which resume records failed. */
export const defaultMaxAttempts = 3;

/** Options for {@linkcode resume}. */
export interface ResumeJournalOptions {
  /** Resumes allowed at one step before giving up. Default {@linkcode defaultMaxAttempts}. */
  readonly maxAttempts?: number;
  readonly signal?: AbortSignal;
}

/** What {@linkcode resume} did. */
export interface ResumeOutcome extends Result {
  /** The journal as it stands afterwards. */
  readonly journal: Journal;
  /** False when the journal was terminal and nothing was done. */
  readonly acted: boolean;
}

/**
 * Resumes the in-place migration recorded in `store`, with a loop guard.
 *
 * Each resume is counted in the journal's `attempts` (durably, before it
 * acts). Recording any new step resets the count, so only resumes that keep
 * landing on the same step add up: past `maxAttempts` of them, recovery
 * itself is what crashes the node, and resume records failed with a message
 * instead of trying again. Rejects with ErrNoJournal when nothing is
 * recorded and ErrCorruptJournal when the journal cannot be read; a terminal
 * journal is returned untouched.
 */
export async function resume(
  store: JournalStore,
  spec: Omit<InPlaceSpec, "record">,
  opts: ResumeJournalOptions = {},
): Promise<ResumeOutcome> {
  const found = await store.load();
  if (isTerminal(found.step)) {
    return {
      journal: found,
      acted: false,
      rolledBack: false,
      ...(found.step === "complete" ? { target: spec.targetRoot! } : {}),
    };
  }
  if (found.strategy !== StrategyInPlace) {
    return {
      journal: found,
      acted: false,
      rolledBack: false,
      error: new ErrInvalidSpec(`Cannot resume a ${found.strategy} migration in place`),
    };
  }
  const counted = await store.save({ ...found, attempts: (found.attempts ?? 0) + 1 });
  const max = opts.maxAttempts ?? defaultMaxAttempts;
  if ((counted.attempts ?? 0) > max) {
    const err = new ErrTooManyAttempts(found.step, max);
    const journal = await store.save({ ...counted, step: StepFailed, message: err.message });
    return { journal, acted: true, rolledBack: false, error: err };
  }
  const record = recorder(store, counted);
  const result = await resumeInPlace(
    { ...spec, record },
    found.step,
    opts.signal ? { signal: opts.signal } : {},
  );
  return { ...result, journal: record.current() ?? counted, acted: true };
}
