// One progress line per journal step, with the time since the command
// started (issue 38 item 7): an operator watching an upgrade sees where it
// is and when the downtime started, and the run ends knowing how long the
// node was down. The lines are said after each step is durably recorded,
// so a line on the terminal is a step the journal holds.

import { formatDuration } from "../duration/mod.ts";
import type * as isolation from "../isolation/mod.ts";
import * as migrate from "../migrate/mod.ts";

/** A journal write-ahead hook, as InPlaceSpec takes it. */
export type RecordHook = NonNullable<migrate.InPlaceSpec["record"]>;

/** What the lines name: the slot and mode being built, and how long health is waited for. */
export interface StepContext {
  readonly targetSlot: isolation.Slot;
  readonly to: isolation.Mode;
  readonly waitReadyMs: number;
}

/**
 * The line each step gets, once recorded. `downMs` is the downtime, known at
 * ready and rolled-back when this process saw the source stop.
 */
const lines: Readonly<
  Record<migrate.Step, (c: StepContext, downMs: number | null) => string>
> = {
  [migrate.StepPreparing]: (c) => `preparing slot ${c.targetSlot} (${c.to})`,
  [migrate.StepStoppingSource]: () => "stopping source: downtime starts",
  [migrate.StepStartingTarget]: () => "starting target",
  [migrate.StepPersisting]: () => "persisting the target as the node's",
  [migrate.StepAwaitingReady]: (c) => `waiting up to ${formatDuration(c.waitReadyMs)} for health`,
  [migrate.StepReady]: (_, down) => down === null ? "ready" : `ready: down ${seconds(down)}`,
  [migrate.StepComplete]: () => "complete",
  [migrate.StepRolledBack]: (_, down) =>
    down === null ? "rolled back" : `rolled back: down ${seconds(down)}`,
  [migrate.StepFailed]: () => "failed: neither stack is known to run",
  [migrate.StepReprovisioning]: () => "reprovisioning",
  [migrate.StepBootstrapping]: () => "bootstrapping",
  [migrate.StepBootstrapped]: () => "bootstrapped",
};

/** Seconds with one decimal, as the lines and the verdict say a time: `1.2 s`. */
export function seconds(ms: number): string {
  return `${(ms / 1000).toFixed(1)} s`;
}

/** The elapsed-time column in front of each line: `[  1.2 s]`. */
export function stamp(ms: number): string {
  return `[${(ms / 1000).toFixed(1).padStart(5)} s]`;
}

/** A run's progress lines: the hook to record through, and what they measured. */
export interface StepLines {
  /** Records through `record`, then says the step's line. */
  readonly record: RecordHook;
  /**
   * Milliseconds from the moment stopping-source was recorded (the source
   * stops next) to the moment the stack was back (waitReady passed, or the
   * rollback started the source again); null when this process never saw
   * the source stop, or never saw a stack back.
   */
  readonly downtimeMs: () => number | null;
}

/**
 * Wraps `record` so that each step, once durably recorded, is a line
 * through `log` stamped with `now()` (default: milliseconds since the
 * process started). A step whose record fails gets no line.
 */
export function stepLines(
  record: RecordHook,
  c: StepContext,
  log: (line: string) => void,
  now: () => number = () => performance.now(),
): StepLines {
  let stoppedAt: number | undefined;
  let backAt: number | undefined;
  const down = () =>
    stoppedAt === undefined || backAt === undefined ? null : Math.max(0, backAt - stoppedAt);
  return {
    record: async (step, opts) => {
      // The stack is back before its record is written: the write is not downtime.
      const before = now();
      await record(step, opts);
      const after = now();
      if (step === migrate.StepStoppingSource) stoppedAt = after;
      if (
        (step === migrate.StepReady || step === migrate.StepRolledBack) &&
        stoppedAt !== undefined && backAt === undefined
      ) backAt = before;
      log(`${stamp(after)} ${lines[step](c, down())}`);
    },
    downtimeMs: () => {
      const d = down();
      return d === null ? null : Math.round(d);
    },
  };
}

/** The InPlaceSpec.rollingBack hook that says a rollback starts, and why. */
export function rollingBackLine(
  log: (line: string) => void,
  now: () => number = () => performance.now(),
): (cause: Error) => void {
  return (cause) => log(`${stamp(now())} rolling back: ${cause.message}`);
}
