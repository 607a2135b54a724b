// Resuming the migration the journal records: the use case of `stratum
// migrate resume`, and the first half of `stratum node boot`, which must
// decide the same way.

import type * as host from "../host/mod.ts";
import * as isolation from "../isolation/mod.ts";
import * as migrate from "../migrate/mod.ts";
import type { SelfCommand } from "./boot_unit.ts";
import { handoffStore } from "./failpoint.ts";
import { type LockOptions, withLock } from "./lock.ts";
import { reprovisionSpec } from "./reprovision.ts";
import { inPlaceHooks } from "./in_place_hooks.ts";
import { appendHistory } from "./history.ts";
import { messageOf } from "../errors/mod.ts";
import { rollingBackLine, stepLines } from "./step_lines.ts";

/** The journal, undefined when there is none. An unreadable one rejects, never reads as "none". */
export async function loadJournal(
  store: migrate.JournalStore,
): Promise<migrate.Journal | undefined> {
  try {
    return await store.load();
  } catch (err) {
    if (migrate.is(err, migrate.ErrNoJournal)) return undefined;
    throw err;
  }
}

/** What resuming a recorded migration needs. */
export interface ResumeOptions {
  readonly paths: host.HostPaths;
  readonly systemctl: host.Systemctl;
  readonly waitReadyMs: number;
  readonly signal: AbortSignal;
  readonly log: (line: string) => void;
  /** How systemd runs stratum: a reprovision's bootstrap writes the boot unit with it. */
  readonly self: SelfCommand;
  /** STRATUM_FAILPOINT (`kill-after-record:STEP`) for a reprovision handoff, a test aid. */
  readonly failpoint?: string | undefined;
  readonly killSelf?: (() => void) | undefined;
  /** Who resumes, for the node's history: `migrate resume` (default) or the boot. */
  readonly cause?: "resume" | "boot";
}

/**
 * `stratum migrate resume`: under the migration lock, finishes or rolls
 * back the migration the journal records; undefined when there is none.
 */
export async function resume(
  o: ResumeOptions & { lock: LockOptions },
): Promise<migrate.ResumeOutcome | undefined> {
  return await withLock(o.paths, o.lock, () => resumeRecorded(o));
}

/**
 * Resumes the recorded migration, if any: undefined when there is no
 * journal; the journal untouched (`acted: false`) when it is terminal.
 * The caller holds the migration lock.
 */
export async function resumeRecorded(
  o: ResumeOptions,
): Promise<migrate.ResumeOutcome | undefined> {
  const startedAt = new Date().toISOString();
  const r = await resumeSteps(o);
  if (r?.acted) {
    const j = r.journal;
    const failed = migrate.find(r.error, migrate.ActionError);
    await appendHistory(o.paths, {
      event: o.cause ?? "resume",
      asked: o.cause === "boot" ? "node boot" : "migrate resume",
      from: { mode: j.from, ...(isolation.isSlot(j.sourceSlot) ? { slot: j.sourceSlot } : {}) },
      to: { mode: j.to, ...(isolation.isSlot(j.targetSlot) ? { slot: j.targetSlot } : {}) },
      outcome: j.step,
      ...(failed ? { failedStep: failed.action } : {}),
      ...(r.error ? { message: messageOf(r.error) } : j.message ? { message: j.message } : {}),
      startedAt,
      endedAt: new Date().toISOString(),
    }, o.log);
  }
  return r;
}

async function resumeSteps(
  o: ResumeOptions,
): Promise<migrate.ResumeOutcome | undefined> {
  const { paths } = o;
  const store = new migrate.JournalStore(paths.journal);
  const j = await loadJournal(store);
  if (!j) return undefined;
  if (migrate.isTerminal(j.step)) {
    return { journal: j, acted: false, rolledBack: j.step === migrate.StepRolledBack };
  }
  if (j.strategy === migrate.StrategyReprovision) {
    o.log(`continuing the ${j.from} → ${j.to} reprovision recorded at step ${j.step}`);
    const h = await migrate.handoff(
      handoffStore(paths.journal, o.failpoint, o.killSelf),
      reprovisionSpec({
        paths,
        systemctl: o.systemctl,
        from: j.from,
        to: j.to,
        self: o.self,
        waitReadyMs: o.waitReadyMs,
        migrationId: j.startedAt.toISOString(),
        log: o.log,
      }),
      { signal: o.signal },
    );
    return {
      journal: h.journal,
      acted: h.acted,
      rolledBack: false,
      ...(h.error ? { error: h.error } : {}),
    };
  }
  if (!isolation.isSlot(j.sourceSlot) || !isolation.isSlot(j.targetSlot)) {
    throw new migrate.ErrCorruptJournal(store.path, "an in-place journal without its slots");
  }
  const applied = await isolation.readNodeConfig(paths.nodeConfig).catch(() => undefined);
  const spec = inPlaceHooks({
    paths,
    systemctl: o.systemctl,
    from: j.from,
    to: j.to,
    sourceSlot: j.sourceSlot,
    node: applied?.node ?? "node",
    waitReadyMs: o.waitReadyMs,
    migrationId: j.startedAt.toISOString(),
    log: o.log,
  });
  o.log(`resuming the ${j.from} → ${j.to} migration recorded at step ${j.step}`);
  // The same line per step as the run that recorded the journal.
  const c = { targetSlot: j.targetSlot, to: j.to, waitReadyMs: o.waitReadyMs };
  return await migrate.resume(store, { ...spec, rollingBack: rollingBackLine(o.log) }, {
    signal: o.signal,
    wrapRecord: (record) => stepLines(record, c, o.log).record,
  });
}
