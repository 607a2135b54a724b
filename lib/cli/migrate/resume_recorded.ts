// Resuming the migration the journal records: shared by `stratum migrate
// resume` and `stratum node boot`, which must decide the same way.

import type * as host from "../../host/mod.ts";
import * as isolation from "../../isolation/mod.ts";
import * as migrate from "../../migrate/mod.ts";
import * as node from "../../node/mod.ts";

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

/**
 * Resumes the recorded migration, if any: undefined when there is no
 * journal; the journal untouched (`acted: false`) when it is terminal.
 * The caller holds the migration lock.
 */
export async function resumeRecorded(o: {
  paths: host.HostPaths;
  systemctl: host.Systemctl;
  waitReadyMs: number;
  signal: AbortSignal;
  log: (line: string) => void;
  /** How systemd runs stratum: a reprovision's bootstrap writes the boot unit with it. */
  self: node.SelfCommand;
  /** STRATUM_FAILPOINT (`kill-after-record:STEP`) for a reprovision handoff, a test aid. */
  failpoint?: string | undefined;
  killSelf?: () => void;
}): Promise<migrate.ResumeOutcome | undefined> {
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
      node.handoffStore(paths.journal, o.failpoint, o.killSelf),
      node.reprovisionSpec({
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
  const spec = node.nodeSpec({
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
  return await migrate.resume(store, spec, { signal: o.signal });
}
