import { join } from "node:path";
import * as bundle from "../bundle/mod.ts";
import * as host from "../host/mod.ts";
import * as isolation from "../isolation/mod.ts";
import * as migrate from "../migrate/mod.ts";
import { appliedNode, requireNoJournal } from "./applied.ts";
import { ErrBadRequest, ErrJournalExists } from "./errors.ts";
import { readHistory } from "./history.ts";
import { bundleDigest, checkInstall, ErrInstalledOtherwise } from "./install.ts";
import type { LockOptions } from "./lock.ts";
import { plan, planMigration, type PlannedStep } from "./plan.ts";
import { bundlePolicy, ErrPreflight, freeSpace, preflight } from "./preflight.ts";

/** One release: where it runs (or would), and which bundle it is. */
export interface Release {
  readonly mode: isolation.Mode;
  readonly slot: isolation.Slot;
  /** BUNDLE.json's version; undefined for a bundle that names none. */
  readonly version?: string;
  /** sha256 of the bundle's manifest. */
  readonly digest?: string;
}

/** How long the node's stack is down for the change, as far as it can be told before it runs. */
export interface Downtime {
  /** The step that stops the running stack (downtime starts), or null: nothing stops. */
  readonly startsAt: string | null;
  /**
   * The most the new stack may take to be healthy once started (--wait-ready)
   * before the change is rolled back and the running release started again.
   */
  readonly healthWaitMs: number;
  /** How long the last change of this kind on this node took, start to end (its history), or null. */
  readonly lastMs: number | null;
}

/**
 * What `node upgrade|rollback|install --plan` found. `planned`: the run
 * would change the node; `nothing-to-do`: it would change nothing (exit 0
 * both); `refused`: the run would refuse, with `refused` saying why (exit
 * 2), and nothing would change.
 */
export interface ChangePlan {
  readonly command: "upgrade" | "rollback" | "install";
  readonly outcome: "planned" | "nothing-to-do" | "refused";
  readonly from: Release | null;
  readonly to: Release | null;
  readonly steps: readonly PlannedStep[];
  readonly downtime: Downtime;
  readonly refused?: string;
  readonly keyId?: string;
  readonly freeBytes?: number;
  readonly warnings: readonly string[];
}

/**
 * The migration lock checked as the run would take it, without taking it
 * (a plan must never make a run find the node busy): held past `waitMs`,
 * host.ErrBusy naming the holder, as the run would reject.
 */
export async function lockFree(paths: host.HostPaths, o: LockOptions): Promise<void> {
  const deadline = performance.now() + o.waitMs;
  let waiting = false;
  for (;;) {
    // Held with no record (a holder that has not written it yet, flock(1))
    // is held all the same.
    if (!(await host.lockHeld(paths.lock))) return;
    const holder = await host.readHolder(paths.lock);
    if (performance.now() >= deadline) throw new host.ErrBusy(paths.lock, holder);
    if (!waiting) o.onWait?.(holder);
    waiting = true;
    await new Promise((r) => setTimeout(r, 200));
  }
}

/**
 * The checks `migrate run` (in place) makes before its first change, made
 * as `migrate plan` makes them, changing nothing: the lock (host.ErrBusy
 * when held past its wait), an open journal, node.json, the mode it runs
 * already, preflight (the bundle, its version, the space, the state
 * directories). The refusal's message, or undefined when the run would go
 * ahead; an unreadable journal or node.json rejects as for the run.
 */
export async function migrationRefusal(o: {
  readonly paths: host.HostPaths;
  readonly to: isolation.Mode;
  readonly bundle?: string | undefined;
  readonly requireSignature: boolean;
  readonly allowDowngrade: boolean;
  readonly waitReadyMs: number;
  readonly lock: LockOptions;
}): Promise<string | undefined> {
  await lockFree(o.paths, o.lock);
  // In the run's order: a journal in the way, the mode it runs, preflight.
  try {
    await requireNoJournal(o.paths);
  } catch (err) {
    if (err instanceof ErrJournalExists) return err.message;
    throw err;
  }
  const p = await planMigration({
    paths: o.paths,
    to: o.to,
    strategy: migrate.StrategyInPlace,
    ...(o.bundle ? { bundle: o.bundle } : {}),
    ...(o.requireSignature ? { requireSignature: true } : {}),
    ...(o.allowDowngrade ? { allowDowngrade: true } : {}),
    waitReadyMs: o.waitReadyMs,
  });
  if (p.current.mode === o.to) return `This node already runs in ${o.to} mode`;
  return p.refused;
}

/** The refusals a run makes with nothing changed (exit 2); anything else is the caller's to map. */
function isRefusal(err: unknown): err is Error {
  return err instanceof ErrBadRequest || err instanceof bundle.BundleError ||
    err instanceof ErrPreflight || err instanceof ErrInstalledOtherwise ||
    err instanceof isolation.ErrBadStack || err instanceof isolation.ErrState;
}

/** What the running slot holds. */
async function running(paths: host.HostPaths, cfg: isolation.NodeConfig): Promise<Release> {
  const dir = paths.slot(cfg.slot);
  const version = (await bundle.readIdentity(dir).catch(() => undefined))?.version;
  const digest = await bundleDigest(dir);
  return {
    mode: cfg.mode,
    slot: cfg.slot,
    ...(version !== undefined ? { version } : {}),
    ...(digest ? { digest } : {}),
  };
}

/** How long the last completed change of `event` took on this node, from its history. */
async function lastMs(paths: host.HostPaths, event: string): Promise<number | null> {
  const events = await readHistory(paths).catch(() => []);
  const last = events.filter((e) => e.event === event && e.outcome === "complete").pop();
  if (!last) return null;
  const ms = Date.parse(last.endedAt) - Date.parse(last.startedAt);
  return Number.isFinite(ms) && ms >= 0 ? ms : null;
}

/** What every slot-change plan is given. */
export interface SlotChangePlanOptions {
  readonly paths: host.HostPaths;
  readonly requireSignature?: boolean;
  /** Accept an older release (an upgrade's --allow-downgrade; a rollback always does). */
  readonly allowDowngrade?: boolean;
  readonly waitReadyMs: number;
  readonly lock: LockOptions;
}

/**
 * The plan of an upgrade or a rollback to the release in `modeDir` (found
 * under the lock's checks by `target`): the checks `node upgrade` and
 * `node rollback` make before their first change, in their order —
 * the lock, an open journal, node.json, the release verifying under this
 * node's trust (every file hashed here, where the run hashes it as it
 * copies), its version, the other slot free, the space, the state
 * directories — and nothing else: no lock taken, no journal, no copy.
 */
async function planSlotChange(
  command: "upgrade" | "rollback",
  o: SlotChangePlanOptions,
  target: (
    current: isolation.NodeConfig,
  ) => Promise<{ modeDir: string; verified: bundle.Verified }>,
): Promise<ChangePlan> {
  const { paths } = o;
  await lockFree(paths, o.lock);
  const downtime = {
    startsAt: migrate.StepStoppingSource,
    healthWaitMs: o.waitReadyMs,
    lastMs: await lastMs(paths, command),
  };
  let from: Release | null = null;
  let to: Release | null = null;
  try {
    await requireNoJournal(paths);
    const current = await appliedNode(paths);
    from = await running(paths, current);
    const { modeDir, verified } = await target(current);
    const version = verified.identity?.version;
    to = {
      mode: current.mode,
      slot: isolation.otherSlot(current.slot),
      ...(version !== undefined ? { version } : {}),
      digest: verified.manifestDigest,
    };
    const base = {
      command,
      from,
      to,
      downtime,
      ...(verified.keyId ? { keyId: verified.keyId } : {}),
      warnings: verified.warnings,
    };
    if (command === "upgrade" && verified.manifestDigest === from.digest) {
      // `node upgrade` of the bundle that runs: already-installed, nothing changes.
      return {
        ...base,
        outcome: "nothing-to-do",
        to: { ...to, slot: current.slot },
        steps: [],
        downtime: { ...downtime, startsAt: null },
      };
    }
    const steps = plan({
      paths,
      from: current.mode,
      to: current.mode,
      sourceSlot: current.slot,
      waitReadyMs: o.waitReadyMs,
      release: { modeDir, downgrade: command === "rollback" },
    });
    const checked = await preflight({
      paths,
      from: current.mode,
      to: current.mode,
      sourceSlot: current.slot,
      bundleModeDir: modeDir,
      upgrade: true,
      verified,
      ...(command === "rollback" || o.allowDowngrade ? { allowDowngrade: true } : {}),
      ...(o.requireSignature ? { requireSignature: true } : {}),
    });
    return { ...base, outcome: "planned", steps, freeBytes: checked.freeBytes };
  } catch (err) {
    if (!isRefusal(err)) throw err;
    return {
      command,
      outcome: "refused",
      from,
      to,
      steps: [],
      downtime: { ...downtime, startsAt: null },
      refused: err.message,
      warnings: [],
    };
  }
}

/**
 * `stratum node upgrade --plan`: what `node upgrade --bundle DIR` would do
 * on this node, with every refusal it would make, changing nothing. The
 * lock held is host.ErrBusy and an unreadable journal or node.json rejects
 * as for the run; every other refusal is the plan's `refused`.
 */
export function planUpgrade(
  o: SlotChangePlanOptions & { readonly bundle: string },
): Promise<ChangePlan> {
  return planSlotChange("upgrade", o, async (current) => {
    const modeDir = join(o.bundle, current.mode);
    if (!(await Deno.stat(modeDir).then((s) => s.isDirectory, () => false))) {
      throw new ErrBadRequest(
        `--bundle ${o.bundle} has no ${current.mode} directory (the node runs in ${current.mode} mode)`,
      );
    }
    const policy = await bundlePolicy(o.paths, o.requireSignature === true, current.mode);
    return { modeDir, verified: await bundle.verifyBundle(modeDir, policy) };
  });
}

/** `stratum node rollback --plan`: what `node rollback` would do, changing nothing (as planUpgrade). */
export function planRollback(o: SlotChangePlanOptions): Promise<ChangePlan> {
  return planSlotChange("rollback", o, async (current) => {
    const kept = await bundle.previousDir(o.paths.bundle(current.mode));
    if (!kept) {
      throw new ErrBadRequest(
        `No earlier release is kept for ${current.mode} mode (one is kept when stratum node upgrade completes): nothing to roll back to`,
      );
    }
    const verified = await bundle.verifyBundle(kept, {
      ...await bundlePolicy(o.paths, o.requireSignature === true, current.mode),
      installed: true,
    }).catch((err) => {
      if (!(err instanceof bundle.BundleError)) throw err;
      throw new ErrBadRequest(
        `The kept release does not verify under this node's trust now: ${err.message}; nothing changed`,
        { cause: err },
      );
    });
    return { modeDir: kept, verified };
  });
}

/** The steps of a first install, as the plan shows them. */
function installPlanSteps(
  paths: host.HostPaths,
  mode: isolation.Mode,
  src: string,
  waitReadyMs: number,
): PlannedStep[] {
  const unit = isolation.targetUnit("a");
  return [
    {
      step: "(preflight)",
      does:
        "check: no migration journal, the bundle verifies, its stack and kernel files, the state directories are new, empty, adopted or this node's",
      changes: "nothing",
      undo: "-",
    },
    {
      step: "cleared",
      does: "remove what an earlier, unfinished install left; snapshot the host config files",
      changes: `${paths.slot("a")}, ${paths.snapshotDir}`,
      undo: "the snapshot puts the host files back",
    },
    {
      step: "bundle-installed",
      does: `copy ${src} to ${paths.bundle(mode)}, verifying every file`,
      changes: paths.bundle(mode),
      undo: "-",
    },
    {
      step: "prepared",
      does: `build slot a (${mode} mode), make and mark the state directories, load its units`,
      changes: `${paths.slot("a")}, ${unit} and its services, the stack's host files`,
      undo: "slot a and its units removed, the host files restored",
    },
    {
      step: "started",
      does: `start ${unit}`,
      changes: "the node stack runs",
      undo: "stopped and removed",
    },
    {
      step: "ready",
      does: `wait up to ${Math.round(waitReadyMs / 1000)} s for ${unit} healthy`,
      changes: "nothing",
      undo: "on timeout: everything above is removed (exit 1, retry)",
    },
    {
      step: "committed",
      does: `write ${paths.nodeConfig}: the install is committed`,
      changes: paths.nodeConfig,
      undo: "not undone: the node is installed",
    },
    {
      step: "host-prepared",
      does: `${mode} mode's host preparation (firewall flush unit, apt pins) and the boot unit`,
      changes: `${paths.aptPreferencesDir}, ${isolation.firewallUnit}, stratum-boot.service`,
      undo: "-",
    },
  ];
}

/**
 * `stratum node install --plan`: what `node install` would do, with the
 * refusals it would make (checkInstall's, after the lock and the journal),
 * changing nothing. On a node installed as asked it is `nothing-to-do`
 * (the run would only make sure the stack runs).
 */
export async function planInstall(o: {
  readonly paths: host.HostPaths;
  readonly mode: isolation.Mode;
  readonly node: string;
  readonly nodeAsked?: boolean;
  readonly bundle: string;
  readonly requireSignature?: boolean;
  readonly adoptState?: readonly string[];
  readonly waitReadyMs: number;
  readonly lock: LockOptions;
}): Promise<ChangePlan> {
  const { paths } = o;
  await lockFree(paths, o.lock);
  const downtime = { startsAt: null, healthWaitMs: o.waitReadyMs, lastMs: null };
  try {
    await requireNoJournal(paths);
    const c = await checkInstall(o, true);
    const version = c.verified.identity?.version;
    const to: Release = {
      mode: o.mode,
      slot: c.applied?.slot ?? "a",
      ...(version !== undefined ? { version } : {}),
      digest: c.verified.manifestDigest,
    };
    const base = {
      command: "install" as const,
      to,
      downtime,
      ...(c.verified.keyId ? { keyId: c.verified.keyId } : {}),
      warnings: c.verified.warnings,
    };
    if (c.applied) {
      return {
        ...base,
        outcome: "nothing-to-do",
        from: await running(paths, c.applied),
        steps: [],
      };
    }
    return {
      ...base,
      outcome: "planned",
      from: null,
      steps: installPlanSteps(paths, o.mode, c.src, o.waitReadyMs),
      freeBytes: await freeSpace(paths.slotsDir),
    };
  } catch (err) {
    if (!isRefusal(err)) throw err;
    return {
      command: "install",
      outcome: "refused",
      from: null,
      to: null,
      steps: [],
      downtime,
      refused: err.message,
      warnings: [],
    };
  }
}
