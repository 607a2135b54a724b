import * as bundle from "../bundle/mod.ts";
import type * as host from "../host/mod.ts";
import * as isolation from "../isolation/mod.ts";
import * as migrate from "../migrate/mod.ts";
import type { SelfCommand } from "./boot_unit.ts";
import { ErrDamagedRelease } from "./errors.ts";
import { type LockOptions, withLock } from "./lock.ts";
import { resumeRecorded } from "./recorded.ts";

/** What {@linkcode boot} needs; `stratum node boot` wires the real ones. */
export interface BootDeps {
  /**
   * Resolves a recorded migration (finish or roll back) and returns what it
   * did, or undefined when no journal exists. Rejects on an unreadable
   * journal.
   */
  readonly resume: () => Promise<migrate.ResumeOutcome | undefined>;
  /** The slot the node's applied config names; undefined on a node never installed. */
  readonly applied: () => Promise<isolation.SlotRef | undefined>;
  /**
   * Starts a slot's stack; idempotent (a running stack stays as it is).
   * Rejects with ErrDamagedRelease when the slot's files do not match its
   * signed manifest.
   */
  readonly start: (ref: isolation.SlotRef) => Promise<void>;
}

/** What a boot did. */
export interface BootResult {
  /** The resume's outcome; undefined when there was no journal. */
  readonly resumed: migrate.ResumeOutcome | undefined;
  /** The slot started; undefined when nothing was started. */
  readonly started: isolation.SlotRef | undefined;
  /** Why nothing was started although a stack should run. */
  readonly error?: Error;
  /**
   * True when the node needs a person: the migration failed, or the
   * applied release is damaged (error: ErrDamagedRelease), so nothing was
   * started.
   */
  readonly attention: boolean;
}

/**
 * Brings the node stack up at boot: first resolves a journal, so that a
 * migration a power cut interrupted finishes or rolls back before anything
 * starts, then starts the slot the applied config names. A migration
 * switches that slot durably (persistTarget/restoreSource write node.json),
 * so the slot started here is the one the journal's outcome left applied.
 *
 * A journal at failed starts nothing: which stack may safely run is a
 * person's decision. An unreadable journal rejects and starts nothing, for
 * the same reason. A slot whose release is damaged (`start` rejects with
 * ErrDamagedRelease) is not started and needs attention too: no retry can
 * make its files match again.
 */
export async function boot(deps: BootDeps): Promise<BootResult> {
  const resumed = await deps.resume();
  if (resumed && (resumed.journal.step === migrate.StepFailed || failedHard(resumed.error))) {
    return { resumed, started: undefined, attention: true };
  }
  const ref = await deps.applied();
  if (!ref) return { resumed, started: undefined, attention: false };
  try {
    await deps.start(ref);
  } catch (err) {
    // A damaged release can never start: a person's (`node repair`), exit
    // 3, which the boot unit does not restart (RestartPreventExitStatus).
    if (err instanceof ErrDamagedRelease) {
      return { resumed, started: undefined, error: err, attention: true };
    }
    // Exit 1: the boot unit tries again (Restart=on-failure), bounded by its start limit.
    return { resumed, started: undefined, error: err as Error, attention: false };
  }
  if (resumed && !migrate.isTerminal(resumed.journal.step)) {
    // The resume could not finish (say, its journal write failed). The stack
    // node.json names runs, which is the one the journal's step allows; the
    // error makes the unit run the boot again to finish the migration.
    return {
      resumed,
      started: ref,
      error: resumed.error ?? new Error(`the migration is still at ${resumed.journal.step}`),
      attention: false,
    };
  }
  return { resumed, started: ref, attention: false };
}

function failedHard(err: Error | undefined): boolean {
  return migrate.is(err, migrate.ErrRollbackFailed) || migrate.is(err, migrate.ErrTargetLost) ||
    migrate.is(err, migrate.ErrTooManyAttempts);
}

/** What `stratum node boot` needs. */
export interface BootNodeOptions {
  readonly paths: host.HostPaths;
  readonly systemctl: host.Systemctl;
  readonly waitReadyMs: number;
  readonly lock: LockOptions;
  readonly self: SelfCommand;
  readonly signal: AbortSignal;
  readonly log: (line: string) => void;
}

/**
 * `stratum node boot`, what stratum-boot.service runs: under the migration
 * lock, {@linkcode boot} with the real resume (resumeRecorded), node.json,
 * and the backends' start (which checks the node's state before it starts
 * anything).
 */
export async function bootNode(o: BootNodeOptions): Promise<BootResult> {
  const { paths, systemctl } = o;
  return await withLock(paths, o.lock, () =>
    boot({
      resume: () => resumeRecorded({ ...o, cause: "boot" }),
      applied: async () => {
        const cfg = await isolation.readNodeConfig(paths.nodeConfig);
        return cfg && { mode: cfg.mode, slot: cfg.slot };
      },
      start: async (ref) => {
        try {
          await isolation.backendFor(ref.mode, { paths, systemctl }).start(ref, {
            signal: o.signal,
          });
        } catch (err) {
          // The start's only bundle check is the slot's files against its
          // signed manifest (bundle.checkSlot): they do not match.
          if (!(err instanceof bundle.BundleError)) throw err;
          throw new ErrDamagedRelease(
            `The release in slot ${ref.slot} does not match what was signed: ${err.message}`,
            { cause: err },
          );
        }
      },
    }));
}
