/** Exit codes of the CLI contract (docs/migration.md lists them). */
export const ExitOK = 0;
/** Failed and the node is safe: rolled back, or a restart failed. */
export const ExitFailed = 1;
/** Bad input: nothing changed. */
export const ExitUsage = 2;
/** Needs attention: rollback failed, journal unreadable, journal says failed. */
export const ExitAttention = 3;
/** Another migration holds the lock: nothing changed, try again. */
export const ExitBusy = 75;

/**
 * Bad input found before anything changed: a flag value, an unknown mode, a
 * missing bundle. Exits 2 with its one-line message.
 */
export class ErrUsage extends Error {
  override name = "ErrUsage";
}

/**
 * A command refused where or as whom it runs (not root, a scratch --root
 * for a command that drives systemd): exit 2 with its one line, outcome
 * `refused`, nothing changed; `nextAction` says how to run it instead.
 */
export class ErrRefused extends ErrUsage {
  override name = "ErrRefused";
  constructor(message: string, readonly nextAction: string) {
    super(message);
  }
}

/**
 * The signals main.ts stops a command for, each with its number: a command
 * that stops for one exits 128+N, as a shell reports a process the signal
 * killed. SIGHUP is a terminal or SSH session that went away, SIGQUIT
 * Ctrl-\, SIGPIPE output whose reader is gone: each is handled as SIGTERM.
 */
export const stopSignals = {
  SIGHUP: 1,
  SIGINT: 2,
  SIGQUIT: 3,
  SIGPIPE: 13,
  SIGTERM: 15,
} as const;

/** A signal that stops a command (see {@linkcode stopSignals}). */
export type StopSignal = keyof typeof stopSignals;

/**
 * The reason main.ts aborts its signal with on one of the
 * {@linkcode stopSignals}. A command that stops for it exits 128+N: 130 for
 * SIGINT, 143 for SIGTERM, 129 for SIGHUP, 131 for SIGQUIT, 141 for SIGPIPE.
 */
export class Interrupted extends Error {
  override name = "Interrupted";
  readonly signal: StopSignal;
  constructor(signal: StopSignal) {
    super(`interrupted by ${signal}`);
    this.signal = signal;
  }

  get exitCode(): number {
    return 128 + stopSignals[this.signal];
  }
}
