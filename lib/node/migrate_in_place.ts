import type * as bundle from "../bundle/mod.ts";
import type * as host from "../host/mod.ts";
import * as isolation from "../isolation/mod.ts";
import * as migrate from "../migrate/mod.ts";
import { appliedNode, requireNoJournal } from "./applied.ts";
import { installBootUnit, type SelfCommand } from "./boot_unit.ts";
import { ErrBadRequest } from "./errors.ts";
import { withFailpoint } from "./failpoint.ts";
import { type LockOptions, withLock } from "./lock.ts";
import { inPlaceHooks } from "./in_place_hooks.ts";
import { appendHistory, type HistoryEvent, placeOf } from "./history.ts";
import { messageOf } from "../errors/mod.ts";
import { rollingBackLine, stepLines } from "./step_lines.ts";

/** What `stratum migrate run` (in place) needs. */
export interface MigrateOptions {
  readonly paths: host.HostPaths;
  readonly systemctl: host.Systemctl;
  readonly to: isolation.Mode;
  /** The operator's bundle (one subdirectory per mode); unset: the installed copy. */
  readonly bundle?: string | undefined;
  /** The target's mode directory itself (a kept release), instead of `bundle`. */
  readonly bundleModeDir?: string | undefined;
  readonly requireSignature?: boolean;
  /** Accept a bundle older than the one the node runs. */
  readonly allowDowngrade?: boolean;
  readonly waitReadyMs: number;
  readonly lock: LockOptions;
  /** How systemd runs stratum, for the boot unit. */
  readonly self: SelfCommand;
  readonly signal: AbortSignal;
  readonly log: (line: string) => void;
  /** STRATUM_FAILPOINT and the kill it uses (lib/node/failpoint.ts), a test aid. */
  readonly failpoint?: string | undefined;
  readonly killSelf: () => void;
}

/** How an in-place migration ended: the journal it left (undefined: none) and runInPlace's result. */
export interface Migrated {
  readonly journal: migrate.Journal | undefined;
  readonly result: migrate.Result & { readonly error?: Error | undefined };
  /** The mode and slot the node ran in before. */
  readonly from: isolation.NodeConfig;
  /** How long the node was down (see StepLines.downtimeMs); null: the source never stopped. */
  readonly downtimeMs: number | null;
  /** The releases (BUNDLE.json's version) it ran before and was moved to, where known. */
  readonly versions: { readonly from: string | null; readonly to: string | null };
}

/**
 * `stratum migrate run --strategy in-place`: under the migration lock,
 * refuses (ErrBadRequest, nothing changed) while a journal is open, on a
 * node never installed, or when it already runs in the target mode; runs
 * preflight, and only a migration that passed it gets the boot unit, the
 * write-ahead journal and runInPlace. A preflight failure comes back as the
 * result's error (an ActionError of `preflight`) with no journal.
 */
export async function migrateInPlace(o: MigrateOptions): Promise<Migrated> {
  return await withLock(o.paths, o.lock, async () => {
    await requireNoJournal(o.paths);
    const current = await appliedNode(o.paths);
    if (current.mode === o.to) throw new ErrBadRequest(`This node already runs in ${o.to} mode`);
    return await runRecorded(o, current);
  });
}

/**
 * The in-place steps from `current` to `o.to` (the same mode for an
 * upgrade), once the caller holds the lock and has checked the request:
 * preflight, the boot unit, the write-ahead journal and runInPlace.
 */
export async function runRecorded(
  o: Omit<MigrateOptions, "lock"> & {
    readonly event?: HistoryEvent["event"];
    /** The progress line said once preflight passed (a refusal says one line only). */
    readonly announce?: string;
  },
  current: isolation.NodeConfig,
  verified?: bundle.Verified,
): Promise<Migrated> {
  const startedAt = new Date();
  const from = await placeOf(o.paths, current.mode, current.slot);
  const steps = await runSteps(o, current, startedAt, verified);
  const targetSlot = isolation.otherSlot(current.slot);
  const to = steps.journal?.step === migrate.StepComplete
    ? await placeOf(o.paths, o.to, targetSlot)
    : undefined;
  const m: Migrated = {
    ...steps,
    versions: {
      from: from.version ?? null,
      // What was verified, else (a mode change from the installed copy) what now runs.
      to: verified?.identity?.version ?? to?.version ?? null,
    },
  };
  const error = m.result.error;
  const failed = migrate.find(error, migrate.ActionError);
  // A refusal before the first change (no journal was written) changed
  // nothing, history included: bad input leaves the node as it was.
  if (!m.journal && error) return m;
  await appendHistory(o.paths, {
    event: o.event ?? "migrate",
    asked: o.event === "upgrade" || o.event === "rollback" || o.event === "repair"
      ? `node ${o.event}`
      : `migrate run --to ${o.to}`,
    from,
    to: to ??
      { mode: o.to, slot: targetSlot, ...(verified ? { digest: verified.manifestDigest } : {}) },
    outcome: m.journal?.step ?? "complete",
    ...(failed ? { failedStep: failed.action } : {}),
    ...(error ? { message: messageOf(error) } : {}),
    startedAt: startedAt.toISOString(),
    endedAt: new Date().toISOString(),
  }, o.log);
  return m;
}

async function runSteps(
  o: Omit<MigrateOptions, "lock"> & { readonly announce?: string },
  current: isolation.NodeConfig,
  startedAt: Date,
  verified?: bundle.Verified,
): Promise<Omit<Migrated, "versions">> {
  const { paths, systemctl } = o;
  const spec = inPlaceHooks({
    paths,
    systemctl,
    from: current.mode,
    to: o.to,
    sourceSlot: current.slot,
    node: current.node,
    ...(o.bundle ? { bundle: o.bundle } : {}),
    ...(o.bundleModeDir ? { bundleModeDir: o.bundleModeDir } : {}),
    ...(o.requireSignature ? { requireSignature: true } : {}),
    ...(o.allowDowngrade ? { allowDowngrade: true } : {}),
    waitReadyMs: o.waitReadyMs,
    migrationId: startedAt.toISOString(),
    log: o.log,
    verified,
  });
  // Refuse before the first change: the boot unit is installed only for a
  // migration that passed preflight.
  try {
    await spec.preflight!(spec.target, o.signal);
  } catch (err) {
    const failed = new migrate.ActionError("preflight", undefined, err);
    return {
      journal: undefined,
      result: { rolledBack: false, error: failed },
      from: current,
      downtimeMs: null,
    };
  }
  if (await installBootUnit(paths, o.self) && paths.root === "/") {
    await systemctl.daemonReload();
  }
  const store = new migrate.JournalStore(paths.journal);
  const targetSlot = isolation.otherSlot(current.slot);
  // The step's line is said once it is durably recorded; a failpoint acts around both.
  const lines = stepLines(
    migrate.recorder(store, {
      strategy: migrate.StrategyInPlace,
      from: current.mode,
      to: o.to,
      sourceSlot: current.slot,
      targetSlot,
      startedAt,
    }),
    { targetSlot, to: o.to, waitReadyMs: o.waitReadyMs },
    o.log,
  );
  const record = withFailpoint(lines.record, o.failpoint, o.killSelf);
  o.log(o.announce ?? `migrating from ${current.mode} (slot ${current.slot}) to ${o.to}`);
  const result = await migrate.runInPlace(
    { ...spec, record, rollingBack: rollingBackLine(o.log) },
    { signal: o.signal },
  );
  let journal = await store.load().catch(() => undefined);
  const first = migrate.find(result.error, migrate.ActionError);
  if (
    journal?.step === migrate.StepPreparing && !result.rolledBack &&
    first?.action === "record" && first.step === undefined
  ) {
    // The first journal write failed after its rename landed: nothing was
    // changed, so the journal must not outlive the run.
    await store.remove().catch(() => {});
    journal = await store.load().catch(() => undefined);
  }
  return { journal, result, from: current, downtimeMs: lines.downtimeMs() };
}
