// A valid in-place journal (host → nspawn, slots a → b) for tests and benchmarks.
import * as migrate from "../../lib/migrate/mod.ts";

export function sampleJournal(
  step: migrate.Step = migrate.StepPersisting,
  at: Date = new Date("2026-11-30T10:00:00Z"),
): migrate.Journal {
  return {
    version: migrate.JournalVersion,
    strategy: migrate.StrategyInPlace,
    from: "host",
    to: "nspawn",
    sourceSlot: "a",
    targetSlot: "b",
    step,
    startedAt: at,
    updatedAt: at,
  };
}
