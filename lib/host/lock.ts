import * as exec from "../exec/mod.ts";
import { dirname } from "node:path";
import { ensureDir } from "./durable_file.ts";
import { ErrUnsafeFile } from "./small_file.ts";

/** Who holds the migration lock, as written in the lock file. */
export interface LockHolder {
  readonly pid: number;
  readonly bootId: string;
  readonly command: string;
  readonly startedAt: string;
}

/** Another process holds the lock. Nothing was changed. */
export class ErrBusy extends Error {
  override name = "ErrBusy";
  readonly holder: LockHolder | undefined;
  constructor(path: string, holder: LockHolder | undefined) {
    super(
      holder
        ? `Another migration holds ${path}: pid ${holder.pid} (boot ${
          holder.bootId.slice(0, 8)
        }, since ${holder.startedAt}) running "${holder.command}"`
        : `Another process holds ${path}`,
    );
    this.holder = holder;
  }
}

/** Options for {@linkcode MigrationLock.acquire}. */
export interface AcquireOptions {
  /** Recorded for whoever finds the lock taken. */
  readonly command: string;
  /** How long to wait for a busy lock, in ms. 0: fail at once. */
  readonly waitMs?: number;
  /** Called once when the lock is busy and we start waiting. */
  readonly onWait?: (holder: LockHolder | undefined) => void;
  /** Called when the lock file names a holder that is gone (dead, or an earlier boot). */
  readonly onTakeover?: (previous: LockHolder) => void;
}

/**
 * The migration lock: an flock(2) on a file that also records its holder
 * (pid, boot id, command, start time). The kernel drops an flock when its
 * holder dies, so a lock left by a dead process or an earlier boot is free
 * and is simply taken; its stale record is replaced. The file is never
 * unlinked, since unlinking a locked file lets a waiter lock an orphaned
 * inode while a newcomer locks a new one.
 */
export class MigrationLock {
  readonly #file: Deno.FsFile;
  readonly path: string;

  private constructor(file: Deno.FsFile, path: string) {
    this.#file = file;
    this.path = path;
  }

  static async acquire(path: string, opts: AcquireOptions): Promise<MigrationLock> {
    // The lock lives in a directory only this user (root) can write, so no
    // other user can plant a link there, hold the lock, or replace it.
    await ensureDir(dirname(path), 0o700);
    const dir = await Deno.lstat(dirname(path));
    if (
      !dir.isDirectory || (dir.uid !== null && dir.uid !== Deno.uid()) || (dir.mode ?? 0) & 0o022
    ) {
      throw new ErrUnsafeFile(
        dirname(path),
        `Lock directory ${
          dirname(path)
        } is not a directory owned by uid ${Deno.uid()} and closed to others: refused`,
      );
    }
    const st = await Deno.lstat(path).catch(() => undefined);
    if (st && !st.isFile) {
      throw new ErrUnsafeFile(path, `Lock file ${path} is not a regular file (a link?): refused`);
    }
    const file = await Deno.open(path, { read: true, write: true, create: true, mode: 0o600 });
    const deadline = performance.now() + (opts.waitMs ?? 0);
    let waiting = false;
    try {
      for (;;) {
        if (await file.tryLock(true)) break;
        const holder = await readHolder(path);
        if (performance.now() >= deadline) throw new ErrBusy(path, holder);
        if (!waiting) opts.onWait?.(holder);
        waiting = true;
        await new Promise((r) => setTimeout(r, 200));
      }
      const previous = await readHolder(path);
      if (previous && opts.onTakeover) opts.onTakeover(previous);
      const me: LockHolder = {
        pid: Deno.pid,
        bootId: await bootId(),
        command: opts.command,
        startedAt: new Date().toISOString(),
      };
      await file.truncate(0);
      await file.seek(0, Deno.SeekMode.Start);
      await file.write(new TextEncoder().encode(JSON.stringify(me) + "\n"));
      await file.sync();
      return new MigrationLock(file, path);
    } catch (err) {
      file.close();
      throw err;
    }
  }

  /** Clears the holder record and releases the lock. */
  async release(): Promise<void> {
    try {
      await this.#file.truncate(0);
      await this.#file.unlock();
    } finally {
      this.#file.close();
    }
  }
}

/** The holder the lock file records, if it parses. */
export async function readHolder(path: string): Promise<LockHolder | undefined> {
  try {
    const o = JSON.parse(await Deno.readTextFile(path));
    return typeof o.pid === "number" ? o : undefined;
  } catch {
    return undefined;
  }
}

/** This boot's id, which tells a lock record from an earlier boot. */
export async function bootId(): Promise<string> {
  // The real cat, by path: dax's built-in cat reads through Deno, which wants
  // --allow-all for /proc.
  const r = await exec.run(["/bin/cat", "/proc/sys/kernel/random/boot_id"], { timeoutMs: 5_000 })
    .catch(() => undefined);
  return (r?.code === 0 ? r.stdout.trim() : "") || "unknown";
}

/**
 * Who holds the lock right now: the lock file's record, confirmed by the
 * kernel's lock table (an flock on the file's inode in /proc/locks), so a
 * record a killed holder left is never taken for a running one. It never
 * takes the lock itself: a status must not make a run find it busy.
 * Undefined when the lock is free, or when it cannot be told (the lock
 * file is root's).
 */
export async function runningHolder(path: string): Promise<LockHolder | undefined> {
  const holder = await readHolder(path);
  if (!holder) return undefined;
  return await lockHeld(path) ? holder : undefined;
}

/**
 * Whether a process holds an flock on `path` now (the kernel's lock table,
 * /proc/locks), whatever the file records; never takes it. False when it
 * cannot be told.
 */
export async function lockHeld(path: string): Promise<boolean> {
  const st = await Deno.stat(path).catch(() => undefined);
  if (!st?.ino || st.dev === null) return false;
  // The real cat, by path, as bootId reads /proc.
  const r = await exec.run(["/bin/cat", "/proc/locks"], { timeoutMs: 5_000 })
    .catch(() => undefined);
  if (r?.code !== 0) return false;
  // "1: FLOCK  ADVISORY  WRITE 1234 00:1a:5678 0 EOF": the device's major
  // and minor in hex, then the inode (glibc's encoding of st_dev).
  const dev = BigInt(st.dev);
  const major = ((dev >> 8n) & 0xfffn) | ((dev >> 32n) & ~0xfffn);
  const minor = (dev & 0xffn) | ((dev >> 12n) & ~0xffn);
  const want = `${major.toString(16).padStart(2, "0")}:${
    minor.toString(16).padStart(2, "0")
  }:${st.ino}`;
  const held = r.stdout.split("\n").some((l) =>
    !l.includes("->") && / FLOCK /.test(l) && l.split(/\s+/).includes(want)
  );
  return held;
}
