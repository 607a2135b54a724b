import * as migrate from "../migrate/mod.ts";

/**
 * A test aid, like etcd's gofail: `STRATUM_FAILPOINT` makes the Record hook
 * misbehave at a named step, so end-to-end tests can crash the real process
 * at every step. Read by the Record hook alone; unset in production.
 *
 * - `kill-after-record:STEP` — the process SIGKILLs itself right after STEP
 *   is durably written to the journal;
 * - `fail-record:STEP` — writing STEP fails, as a full disk would;
 * - `hang-after-record:STEP` — right after STEP is written the process
 *   never goes on and ignores its abort signal, as a call stuck in the
 *   kernel would (for the SIGTERM backstop in main.ts);
 * - `kill-after-install:STEP` — `node install` SIGKILLs itself right after
 *   its step STEP (see InstallStep), for `installFailpoint`.
 */
export function withFailpoint(
  record: NonNullable<migrate.InPlaceSpec["record"]>,
  failpoint: string | undefined,
  kill: () => void,
): NonNullable<migrate.InPlaceSpec["record"]> {
  if (!failpoint || failpoint.startsWith("kill-after-install:")) return record;
  const m = /^(kill-after-record|fail-record|hang-after-record):([a-z-]+)$/.exec(failpoint);
  if (!m) {
    throw new Error(
      `STRATUM_FAILPOINT ${
        JSON.stringify(failpoint)
      } is not kill-after-record:STEP, fail-record:STEP or hang-after-record:STEP`,
    );
  }
  const [, kind, at] = m;
  return async (step, opts) => {
    if (kind === "fail-record" && step === at) throw new Error(`failpoint: writing ${step} fails`);
    await record(step, opts);
    if (kind === "kill-after-record" && step === at) {
      kill();
      await new Promise(() => {}); // the kill is asynchronous; never go on
    }
    // A timer keeps the event loop alive, as a pending call in the kernel would.
    if (kind === "hang-after-record" && step === at) {
      await new Promise(() => setInterval(() => {}, 1 << 30));
    }
  };
}

/**
 * The `kill-after-install:STEP` failpoint as `node install`'s step hook:
 * SIGKILLs the process right after STEP. Anything else: no hook.
 */
export function installFailpoint(
  failpoint: string | undefined,
  kill: () => void,
): ((step: string) => Promise<void>) | undefined {
  const at = /^kill-after-install:([a-z-]+)$/.exec(failpoint ?? "")?.[1];
  if (!at) return undefined;
  return async (step) => {
    if (step !== at) return;
    kill();
    await new Promise(() => {}); // the kill is asynchronous; never go on
  };
}

/**
 * The journal store a reprovision handoff writes through: with the
 * `kill-after-record:STEP` failpoint it SIGKILLs the process right after it
 * durably writes STEP (the handoff records through the store, not a Record
 * hook); otherwise the plain store.
 */
export function handoffStore(
  path: string,
  failpoint: string | undefined,
  kill: (() => void) | undefined,
): migrate.JournalStore {
  const at = /^kill-after-record:([a-z-]+)$/.exec(failpoint ?? "")?.[1];
  if (!at || !kill) return new migrate.JournalStore(path);
  return new (class extends migrate.JournalStore {
    override async save(j: migrate.Journal): Promise<migrate.Journal> {
      const saved = await super.save(j);
      if (j.step === at) {
        kill();
        await new Promise(() => {}); // the kill is asynchronous; never go on
      }
      return saved;
    }
  })(path);
}
