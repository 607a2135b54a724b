import * as bundle from "../bundle/mod.ts";
import { messageOf } from "../errors/mod.ts";
import type * as host from "../host/mod.ts";
import * as isolation from "../isolation/mod.ts";
import * as migrate from "../migrate/mod.ts";
import { appliedNode, requireNoJournal } from "./applied.ts";
import { installBootUnit, type SelfCommand } from "./boot_unit.ts";
import { ErrBadRequest } from "./errors.ts";
import { type LockOptions, withLock } from "./lock.ts";
import { bundlePolicy, preflight, stackOf } from "./preflight.ts";
import { dropWipeRequest, requestWipe } from "./wipe_state.ts";
import { appendHistory, placeOf } from "./history.ts";
import { ErrUnitNotStarted, startTransient } from "./transient_unit.ts";

/** The handoff's transient unit: one fixed name, so systemd itself refuses a second. */
export const handoffUnit = "stratum-reprovision.service";

/** What `stratum migrate run --strategy reprovision` needs. */
export interface ReprovisionStartOptions {
  readonly paths: host.HostPaths;
  readonly systemctl: host.Systemctl;
  readonly to: isolation.Mode;
  readonly bundle?: string | undefined;
  readonly requireSignature: boolean;
  /** Accept a bundle older than the one the node runs. */
  readonly allowDowngrade?: boolean;
  /** Wipe the node's state directories in the reset (`--wipe-state`). */
  readonly wipeState: boolean;
  readonly waitReadyMs: number;
  readonly lock: LockOptions;
  readonly self: SelfCommand;
  /** STRATUM_FAILPOINT, passed on to the handoff (a test aid). */
  readonly failpoint: string | undefined;
  readonly signal: AbortSignal;
  readonly log: (line: string) => void;
}

/**
 * A reprovision that did not start: the message says why; nothing was
 * changed on the node.
 */
export class ErrReprovisionRefused extends ErrBadRequest {
  override name = "ErrReprovisionRefused";
}

/**
 * `stratum migrate run --strategy reprovision`, up to the handoff: under the
 * migration lock, checks (preflight) and downloads the target's bundle,
 * records a `--wipe-state` request if asked, writes the `reprovisioning`
 * journal, installs the boot unit (a power cut from here on is finished by
 * the boot path), and starts the handoff unit running `stratum migrate
 * resume`, because this process may run inside the stack the reset stops.
 * Returns the journal written; ErrReprovisionRefused when nothing started.
 */
export async function startReprovision(o: ReprovisionStartOptions): Promise<migrate.Journal> {
  const { paths } = o;
  return await withLock(paths, o.lock, async () => {
    await requireNoJournal(paths);
    const current = await appliedNode(paths);
    if (current.mode === o.to) throw new ErrBadRequest(`This node already runs in ${o.to} mode`);
    let wipe: string[] | undefined;
    try {
      const checked = await preflight({
        paths,
        from: current.mode,
        to: o.to,
        sourceSlot: current.slot,
        bundleModeDir: o.bundle ? `${o.bundle}/${o.to}` : paths.bundle(o.to),
        requireSignature: o.requireSignature,
        ...(o.allowDowngrade ? { allowDowngrade: true } : {}),
      });
      for (const w of checked.warnings) o.log(`warning: ${w}`);
      if (o.wipeState) {
        // What the source and the target keep: the reset empties it, before
        // the bootstrap claims it. A wipe that could not finish (a mount
        // below it, a read-only disk) is refused now, before anything is
        // destroyed.
        const source = await isolation.readStack(paths.slot(current.slot)).then(
          (s) => s.state,
          () => [] as readonly string[],
        );
        const target = stackOf(
          checked.verified,
          o.bundle ? `${o.bundle}/${o.to}` : paths.bundle(o.to),
        ).state;
        wipe = [...new Set([...source, ...target])];
        await isolation.checkWipe(paths, wipe);
      }
      if (o.bundle) {
        o.log(`download: copying ${o.bundle}/${o.to} to ${paths.bundle(o.to)} and verifying it`);
        await bundle.installBundle(
          `${o.bundle}/${o.to}`,
          paths.bundle(o.to),
          await bundlePolicy(paths, o.requireSignature, o.to),
          checked.verified,
        );
      }
    } catch (err) {
      throw new ErrReprovisionRefused(messageOf(err), { cause: err });
    }
    const startedAt = new Date();
    if (wipe) {
      o.log(`wipe-state: the reset will empty ${wipe.join(", ") || "nothing (no state declared)"}`);
      await requestWipe(paths, startedAt.toISOString(), wipe);
    }
    const store = new migrate.JournalStore(paths.journal);
    const journal = await store.save({
      version: migrate.JournalVersion,
      strategy: migrate.StrategyReprovision,
      from: current.mode,
      to: o.to,
      step: migrate.StepReprovisioning,
      startedAt,
      updatedAt: startedAt,
    }).catch(async (err) => {
      await dropWipeRequest(paths).catch(() => {});
      throw err;
    });
    // A power cut from here on is finished by the boot path.
    if (await installBootUnit(paths, o.self) && paths.root === "/") {
      await o.systemctl.daemonReload();
    }
    try {
      await startTransient({
        unit: handoffUnit,
        description: "Stratum reprovision handoff",
        self: o.self,
        args: [
          "migrate",
          "resume",
          "--root",
          paths.root,
          "--wait-lock",
          "10m",
          "--wait-ready",
          `${Math.ceil(o.waitReadyMs / 1000)}s`,
        ],
        failpoint: o.failpoint,
        signal: o.signal,
      });
    } catch (err) {
      // Nothing was reset: the journal must not make the next boot do it.
      await store.remove();
      await dropWipeRequest(paths);
      const why = err instanceof ErrUnitNotStarted ? err.reason : messageOf(err);
      throw new ErrReprovisionRefused(`cannot start the handoff unit ${handoffUnit}: ${why}`, {
        cause: err,
      });
    }
    await appendHistory(paths, {
      event: "reprovision",
      asked: `migrate run --strategy reprovision --to ${o.to}${o.wipeState ? " --wipe-state" : ""}`,
      from: await placeOf(paths, current.mode, current.slot),
      to: { mode: o.to },
      outcome: "handed-off",
      startedAt: startedAt.toISOString(),
      endedAt: new Date().toISOString(),
    }, o.log);
    return journal;
  });
}
