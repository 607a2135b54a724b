import { basename, dirname, join } from "node:path";

/** Options for {@linkcode writeFileDurable}. */
export interface WriteOptions {
  /** Permission bits of the written file, exactly (umask does not apply). Default 0600. */
  readonly mode?: number;
}

const tempMarker = ".tmp-";

/**
 * A write that found no space left on its file system (ENOSPC), naming the
 * file. From {@linkcode writeFileDurable}, the file is as it was (the old
 * one whole, or none): nothing of the new one was kept.
 */
export class ErrNoSpace extends Error {
  override name = "ErrNoSpace";
  readonly path: string;
  constructor(path: string, options?: ErrorOptions) {
    super(
      `no space left on the file system of ${path}: it was not written (any earlier copy is unchanged); free some space there and run the command again`,
      options,
    );
    this.path = path;
  }
}

/** Whether `err` is the kernel's ENOSPC (Deno's errors carry the errno's name as `code`). */
export function isNoSpace(err: unknown): boolean {
  return (err as { code?: unknown } | null)?.code === "ENOSPC";
}

/**
 * Replaces `path` with `data` atomically and durably: a crash or power loss
 * leaves the old file or the new one, never a partial one.
 *
 * The protocol is the one RocksDB and etcd use (docs/durability.md): a
 * fresh temp file in the same directory, fsync it, rename it over the target,
 * fsync the directory so the rename itself survives power loss.
 * `Deno.writeTextFile` truncates in place without fsync and must not be used
 * for state that a crash must not tear.
 */
export async function writeFileDurable(
  path: string,
  data: string | Uint8Array,
  opts: WriteOptions = {},
): Promise<void> {
  const dir = dirname(path);
  const tmp = join(dir, `.${basename(path)}${tempMarker}${Deno.pid}-${randomSuffix()}`);
  const bytes = typeof data === "string" ? new TextEncoder().encode(data) : data;
  const file = await Deno.open(tmp, { write: true, createNew: true, mode: opts.mode ?? 0o600 });
  try {
    try {
      let written = 0;
      while (written < bytes.length) written += await file.write(bytes.subarray(written));
      await file.sync();
    } finally {
      file.close();
    }
    await Deno.chmod(tmp, opts.mode ?? 0o600);
    await Deno.rename(tmp, path);
  } catch (err) {
    await Deno.remove(tmp).catch(() => {});
    throw isNoSpace(err) ? new ErrNoSpace(path, { cause: err }) : err;
  }
  await syncDir(dir);
}

/**
 * Removes `path` and fsyncs its directory, so the removal survives a crash.
 * A missing file is not an error.
 */
export async function removeFileDurable(path: string): Promise<void> {
  try {
    await Deno.remove(path);
  } catch (err) {
    if (err instanceof Deno.errors.NotFound) return;
    throw err;
  }
  await syncDir(dirname(path));
}

/**
 * Removes the directory tree `dir` and fsyncs its parent, so the removal
 * survives a crash. A missing tree is not an error.
 */
export async function removeTreeDurable(dir: string): Promise<void> {
  try {
    await Deno.remove(dir, { recursive: true });
  } catch (err) {
    if (err instanceof Deno.errors.NotFound) return;
    throw err;
  }
  await syncDir(dirname(dir));
}

/**
 * Makes `path` a symlink to `target`, atomically (a temp link renamed over
 * it) and durably (its directory fsynced, also when the link was already
 * there: a link made by an earlier run may still be only in the page cache).
 * Returns whether the link changed. Used for systemd's `.wants/` links: a
 * unit enabled in memory but not on disk is disabled after a power cut.
 */
export async function symlinkDurable(target: string, path: string): Promise<boolean> {
  const had = await Deno.readLink(path).catch(() => undefined);
  if (had !== target) {
    const tmp = join(dirname(path), `.${basename(path)}${tempMarker}${Deno.pid}-${randomSuffix()}`);
    await Deno.symlink(target, tmp);
    try {
      await Deno.rename(tmp, path);
    } catch (err) {
      await Deno.remove(tmp).catch(() => {});
      throw err;
    }
  }
  await syncDir(dirname(path));
  return had !== target;
}

/** Fsyncs a directory, making renames and unlinks in it durable. */
export async function syncDir(dir: string): Promise<void> {
  const d = await Deno.open(dir, { read: true });
  try {
    await d.sync();
  } finally {
    d.close();
  }
}

/**
 * Removes temp files an interrupted {@linkcode writeFileDurable} of `path`
 * left behind. Call it only while no other writer of `path` runs (the
 * migration lock guarantees that for the journal).
 */
export async function removeStaleTemps(path: string): Promise<void> {
  const prefix = `.${basename(path)}${tempMarker}`;
  try {
    for await (const entry of Deno.readDir(dirname(path))) {
      if (entry.isFile && entry.name.startsWith(prefix)) {
        await Deno.remove(join(dirname(path), entry.name)).catch(() => {});
      }
    }
  } catch (err) {
    if (!(err instanceof Deno.errors.NotFound)) throw err;
  }
}

function randomSuffix(): string {
  const b = crypto.getRandomValues(new Uint8Array(6));
  return Array.from(b, (x) => x.toString(16).padStart(2, "0")).join("");
}

/**
 * Creates `dir` and its missing parents with exactly `mode` (0755 unless
 * told; the umask does not apply), fsyncing each parent a new entry was made
 * in, so the directory survives a crash along with what is written into it.
 */
export async function ensureDir(dir: string, mode = 0o755): Promise<void> {
  const missing: string[] = [];
  for (let d = dir;; d = dirname(d)) {
    try {
      await Deno.stat(d);
      break;
    } catch (err) {
      if (!(err instanceof Deno.errors.NotFound)) throw err;
      missing.push(d);
      if (dirname(d) === d) break;
    }
  }
  for (const d of missing.reverse()) {
    const made = await Deno.mkdir(d, { mode }).then(() => true, (err) => {
      if (!(err instanceof Deno.errors.AlreadyExists)) throw err;
      return false;
    });
    // Exactly `mode`, whatever the caller's umask (000 would make it world-writable).
    if (made) await Deno.chmod(d, mode);
    await syncDir(dirname(d));
  }
}

/**
 * Fsyncs every regular file and directory under `dir` (and `dir` itself), so
 * a tree written with ordinary writes (a copy) survives a power cut. A
 * symlink is a directory entry, made durable by its directory's fsync.
 * Files are synced a few at a time: each fsync waits on the disk. With
 * `dirsOnly`, only the directories (after adding entries to a synced tree).
 */
export async function syncTree(dir: string, opts: { dirsOnly?: boolean } = {}): Promise<void> {
  const files: string[] = [];
  const dirs: string[] = [];
  const walk = async (d: string) => {
    for await (const e of Deno.readDir(d)) {
      const p = join(d, e.name);
      if (e.isDirectory) await walk(p);
      else if (e.isFile && !opts.dirsOnly) files.push(p);
    }
    dirs.push(d);
  };
  await walk(dir);
  const syncFile = async (p: string) => {
    const f = await Deno.open(p, { read: true });
    try {
      await f.sync();
    } finally {
      f.close();
    }
  };
  for (let i = 0; i < files.length; i += 8) await Promise.all(files.slice(i, i + 8).map(syncFile));
  // Deepest first: a directory's entries are durable before its parent names it.
  for (const d of dirs) await syncDir(d);
}
