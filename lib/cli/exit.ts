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
 * The reason main.ts aborts its signal with on SIGINT or SIGTERM. A command
 * that stops for it exits 128+N, as a shell reports a process the signal
 * killed: 130 for SIGINT, 143 for SIGTERM.
 */
export class Interrupted extends Error {
  override name = "Interrupted";
  readonly signal: "SIGINT" | "SIGTERM";
  constructor(signal: "SIGINT" | "SIGTERM") {
    super(`interrupted by ${signal}`);
    this.signal = signal;
  }

  get exitCode(): number {
    return this.signal === "SIGINT" ? 130 : 143;
  }
}
