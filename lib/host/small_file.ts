import { constants, promises as fsp } from "node:fs";

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
  let fh: fsp.FileHandle;
  try {
    fh = await fsp.open(path, constants.O_RDONLY | constants.O_NOFOLLOW | constants.O_NONBLOCK);
  } catch (err) {
    const code = (err as { code?: string }).code;
    if (code === "ENOENT") return undefined;
    if (code === "ELOOP") throw new ErrUnsafeFile(path, `${path} is a symlink: refused`);
    throw err;
  }
  try {
    const st = await fh.stat();
    if (!st.isFile()) {
      throw new ErrUnsafeFile(
        path,
        `${path} is not a regular file (a FIFO, device or directory): refused`,
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
