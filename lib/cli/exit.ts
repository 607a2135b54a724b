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
export class UsageError extends Error {
  override name = "UsageError";
}
