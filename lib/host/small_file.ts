import type { promises as fsp } from "node:fs";

/** node:fs, loaded at the first read: most commands never need it. */
let nodeFs: Promise<typeof import("node:fs")> | undefined;

/**
 * A small file stratum reads as root that is not what it must be: a link,
 * a FIFO, a device, a directory, or larger than its bound. Names the path.
 */
export class ErrUnsafeFile extends Error {
  override name = "ErrUnsafeFile";
  readonly path: string;
  constructor(path: string, message: string) {
    super(message);
    this.path = path;
  }
}

/**
 * Reads a small file that others may have placed (a bundle's manifest and
 * signature, a trust key) without trusting it to be one: opened without
 * following a link and without blocking (a FIFO would hang root forever),
 * checked to be a regular file of at most `max` bytes before a byte is
 * read, and read no further than that. Undefined when it does not exist.
 */
export async function readSmallFile(
  path: string,
  max: number,
): Promise<Uint8Array<ArrayBuffer> | undefined> {
  // lstat first: Deno resolves a path for its permission check, so with
  // scoped permissions O_NOFOLLOW alone does not stop a link (seen on 2.9.6).
  const before = await Deno.lstat(path).catch((err) => {
    if (err instanceof Deno.errors.NotFound) return undefined;
    throw err;
  });
  if (!before) return undefined;
  if (before.isSymlink) throw new ErrUnsafeFile(path, `${path} is a symlink: refused`);
  if (!before.isFile) {
    throw new ErrUnsafeFile(
      path,
      `${path} is not a regular file (a FIFO, device or directory): refused`,
    );
  }
  let fh: fsp.FileHandle;
  try {
    const { constants, promises } = await (nodeFs ??= import("node:fs"));
    fh = await promises.open(
      path,
      constants.O_RDONLY | constants.O_NOFOLLOW | constants.O_NONBLOCK,
    );
  } catch (err) {
    const code = (err as { code?: string }).code;
    if (code === "ENOENT") return undefined;
    if (code === "ELOOP") throw new ErrUnsafeFile(path, `${path} is a symlink: refused`);
    throw err;
  }
  try {
    const st = await fh.stat();
    // The file opened must be the one checked: a swap in between is refused.
    if (!st.isFile() || st.ino !== before.ino || st.dev !== before.dev) {
      throw new ErrUnsafeFile(
        path,
        `${path} changed while it was opened, or is not a regular file: refused`,
      );
    }
    if (st.size > max) {
      throw new ErrUnsafeFile(
        path,
        `${path} is ${st.size} bytes, more than the ${max} allowed: refused`,
      );
    }
    const buf = new Uint8Array(st.size);
    let at = 0;
    while (at < buf.length) {
      const { bytesRead } = await fh.read(buf, at, buf.length - at, at);
      if (bytesRead === 0) break;
      at += bytesRead;
    }
    return buf.subarray(0, at);
  } finally {
    await fh.close();
  }
}
