import { messageOf } from "../errors/mod.ts";
import { ActionError, ErrInvalidSpec } from "./errors.ts";
import type { Journal } from "./journal.ts";
import type { JournalStore } from "./journal_store.ts";
import {
  isTerminal,
  StepBootstrapped,
  StepBootstrapping,
  StepFailed,
  StepReprovisioning,
} from "./step.ts";
import { StrategyReprovision } from "./strategy.ts";

/**
 * The side effects of a reprovision handoff. Each must be idempotent: a
 * handoff killed at any instant is run again from its journal step.
 */
export interface ReprovisionSpec {
  /** Stops and destroys every slot, cleans up networking, removes the applied config. */
  readonly reset: (signal: AbortSignal) => Promise<void>;
  /** Installs the node again in the journal's target mode (what `node install` does). */
  readonly bootstrap: (signal: AbortSignal) => Promise<void>;
}

/** How many handoff runs may start before the migration is recorded failed. */
export const defaultHandoffAttempts = 3;

/** What a handoff run did. */
export interface HandoffOutcome {
  /** The journal as it stands afterwards. */
  readonly journal: Journal;
  /** False when the journal was terminal (or could not be counted) and nothing was done. */
  readonly acted: boolean;
  /** Set when this run failed; the journal's message says it too. */
  readonly error?: Error;
}

/**
 * One run of a reprovision handoff, from the journal's step: counts the run
 * in `attempts` durably before acting; at `reprovisioning` resets the node
 * and records `bootstrapping`; then bootstraps and records `bootstrapped`.
 * A failure records its message at the step it happened in, for the next
 * run (the boot path) to retry; a run that fails with no attempts left, or
 * a journal whose attempts are used up, records `failed`. A terminal journal
 * is returned untouched.
 */
export async function handoff(
  store: JournalStore,
  spec: ReprovisionSpec,
  opts: { readonly maxAttempts?: number; readonly signal?: AbortSignal } = {},
): Promise<HandoffOutcome> {
  const found = await store.load();
  if (isTerminal(found.step)) return { journal: found, acted: false };
  if (found.strategy !== StrategyReprovision) {
    return {
      journal: found,
      acted: false,
      error: new ErrInvalidSpec(`Cannot hand off a ${found.strategy} migration`),
    };
  }
  const max = opts.maxAttempts ?? defaultHandoffAttempts;
  const signal = opts.signal ?? new AbortController().signal;
  const tried = found.attempts ?? 0;
  if (tried >= max) {
    const message = `gave up after ${tried} attempts: ${found.message ?? "no message"}`;
    const journal = await store.save({ ...found, step: StepFailed, message });
    return { journal, acted: true, error: new Error(message) };
  }
  let journal: Journal;
  try {
    journal = await store.save({ ...found, attempts: tried + 1 });
  } catch (err) {
    // Write-ahead: a run that cannot be counted does not act.
    return { journal: found, acted: false, error: new ActionError("record", found.step, err) };
  }
  try {
    if (journal.step === StepReprovisioning) {
      await spec.reset(signal);
      journal = await store.save(withoutMessage({ ...journal, step: StepBootstrapping }));
    }
    await spec.bootstrap(signal);
    journal = await store.save(withoutMessage({ ...journal, step: StepBootstrapped }));
    return { journal, acted: true };
  } catch (err) {
    const error = err instanceof Error ? err : new Error(String(err));
    const last = (journal.attempts ?? 0) >= max;
    const message = last
      ? `attempt ${journal.attempts} of ${max} failed, giving up: ${messageOf(error)}`
      : `attempt ${journal.attempts} of ${max} failed: ${messageOf(error)}`;
    journal = await store.save({ ...journal, ...(last ? { step: StepFailed } : {}), message })
      .catch(() => journal);
    return { journal, acted: true, error };
  }
}

function withoutMessage(j: Journal): Journal {
  const { message: _m, ...rest } = j;
  return rest;
}
