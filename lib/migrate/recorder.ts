import type { Mode, Slot } from "../isolation/mod.ts";
import { type Journal, JournalVersion } from "./journal.ts";
import type { JournalStore } from "./journal_store.ts";
import type { RecordOptions } from "./spec.ts";
import type { Step } from "./step.ts";
import type { Strategy } from "./strategy.ts";

/** What a new migration's journal says before its first step. */
export interface JournalStart {
  readonly strategy: Strategy;
  readonly from: Mode;
  readonly to: Mode;
  readonly sourceSlot?: Slot;
  readonly targetSlot?: Slot;
  /**
   * When the migration started; default: its first record. A caller that
   * tags things with the migration's identity (the config snapshot) sets it.
   */
  readonly startedAt?: Date;
}

/** A Record hook over a JournalStore, and the journal it last wrote. */
export interface Recorder {
  (step: Step, opts: RecordOptions): Promise<void>;
  /** The journal as last saved; undefined before the first step. */
  readonly current: () => Journal | undefined;
}

/**
 * Returns the Record hook that writes each step to `store` before it runs.
 * Starts a new journal from `start`, or continues an existing one.
 *
 * `attempts` counts resumes without progress: recording a step other than the
 * one in the journal resets it to zero, so a migration that is resumed once
 * per boot but moves on every time never trips resume's loop guard.
 */
export function recorder(store: JournalStore, start: JournalStart | Journal): Recorder {
  let current: Journal | undefined = "step" in start ? start : undefined;
  const base = start;
  const rec = async (step: Step, opts: RecordOptions): Promise<void> => {
    const now = store.now();
    const prev: Journal = current ?? {
      version: JournalVersion,
      strategy: base.strategy,
      from: base.from,
      to: base.to,
      ...(base.sourceSlot ? { sourceSlot: base.sourceSlot } : {}),
      ...(base.targetSlot ? { targetSlot: base.targetSlot } : {}),
      step,
      startedAt: base.startedAt ?? now,
      updatedAt: now,
    };
    const { attempts: _a, message: _m, ...rest } = prev;
    const attempts = step === prev.step ? prev.attempts ?? 0 : 0;
    current = await store.save({
      ...rest,
      step,
      ...(attempts > 0 ? { attempts } : {}),
      ...(opts.message ? { message: opts.message } : {}),
    });
  };
  return Object.assign(rec, { current: () => current });
}
