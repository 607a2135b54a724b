import * as host from "../host/mod.ts";

/** How a use case takes the migration lock. */
export interface LockOptions {
  /** The command line, written into the lock for whoever finds it held. */
  readonly command: string;
  /** How long to wait for a held lock; 0 fails at once with host.ErrBusy. */
  readonly waitMs: number;
  /** Called once when the lock is held by another process and this one waits. */
  readonly onWait?: (holder: host.LockHolder | undefined) => void;
}

/**
 * Runs `fn` holding the node's migration lock, so that no two commands
 * change the node at once. Rejects with host.ErrBusy (naming the holder)
 * when the lock stays held past `waitMs`; nothing has changed then.
 */
export async function withLock<T>(
  paths: host.HostPaths,
  o: LockOptions,
  fn: () => Promise<T>,
): Promise<T> {
  const lock = await host.MigrationLock.acquire(paths.lock, {
    command: o.command,
    waitMs: o.waitMs,
    ...(o.onWait ? { onWait: o.onWait } : {}),
  });
  try {
    return await fn();
  } finally {
    await lock.release();
  }
}
