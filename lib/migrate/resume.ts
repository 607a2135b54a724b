import { ActionError, ErrInvalidSpec, ErrTooManyAttempts } from "./errors.ts";
import type { Journal } from "./journal.ts";
import type { JournalStore } from "./journal_store.ts";
import { recorder } from "./recorder.ts";
import { resumeInPlace } from "./resume_in_place.ts";
import type { InPlaceSpec, Result } from "./spec.ts";
import { isTerminal, StepComplete, StepFailed, StepRolledBack } from "./step.ts";
import { StrategyInPlace } from "./strategy.ts";

/** The bound on resumes without progress, after which resume records failed. */
export const defaultMaxAttempts = 3;

/** Options for {@linkcode resume}. */
export interface ResumeJournalOptions {
  /** Resumes allowed at one step before giving up. Default {@linkcode defaultMaxAttempts}. */
  readonly maxAttempts?: number;
  readonly signal?: AbortSignal;
  /**
   * Wraps the journal's write-ahead hook (progress lines, say); the wrapper
   * must record through the hook it is given.
   */
  readonly wrapRecord?: (
    record: NonNullable<InPlaceSpec["record"]>,
  ) => NonNullable<InPlaceSpec["record"]>;
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
 * acts) and takes its count back when it returns, so only resumes that did
 * not finish (the process died under them) add up; recording any new step
 * resets the count too. Past `maxAttempts` such resumes at one step,
 * recovery itself is what kills the node, and resume records failed with a
 * message instead of trying again. A resume that ends cleanly short of the
 * end (host preparation failing at ready, say) is not a crash loop and may be
 * retried any number of times. Rejects with ErrNoJournal when nothing is
 * recorded and ErrCorruptJournal when the journal cannot be read; a terminal
 * journal is returned untouched, and so is one whose count cannot be written
 * (with that error, `acted: false`).
 */
export async function resume(
  store: JournalStore,
  spec: Omit<InPlaceSpec, "record">,
  opts: ResumeJournalOptions = {},
): Promise<ResumeOutcome> {
  const found = await store.load();
  if (isTerminal(found.step)) {
    // The result describes the node as the journal left it.
    return {
      journal: found,
      acted: false,
      rolledBack: found.step === StepRolledBack,
      ...(found.step === StepComplete ? { target: spec.targetRoot! } : {}),
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
  let counted: Journal;
  try {
    counted = await store.save({ ...found, attempts: (found.attempts ?? 0) + 1 });
  } catch (err) {
    // Write-ahead: a resume that cannot be counted does not act.
    return {
      journal: found,
      acted: false,
      rolledBack: false,
      error: new ActionError("record", found.step, err),
    };
  }
  const max = opts.maxAttempts ?? defaultMaxAttempts;
  if ((counted.attempts ?? 0) > max) {
    const err = new ErrTooManyAttempts(found.step, max);
    const journal = await store.save({ ...counted, step: StepFailed, message: err.message });
    return { journal, acted: true, rolledBack: false, error: err };
  }
  const record = recorder(store, counted);
  const result = await resumeInPlace(
    { ...spec, record: opts.wrapRecord ? opts.wrapRecord(record) : record },
    found.step,
    opts.signal ? { signal: opts.signal } : {},
  );
  let journal = record.current() ?? counted;
  if (journal.step === found.step && journal.attempts === counted.attempts) {
    // This resume finished: it was not a crash, so it does not count.
    const { attempts: _a, ...rest } = journal;
    journal = await store.save(found.attempts ? { ...rest, attempts: found.attempts } : rest)
      .catch(() => journal);
  }
  return { ...result, journal, acted: true };
}
