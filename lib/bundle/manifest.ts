import type { promises as fsp } from "node:fs";
import { join } from "node:path";
import { sha256Hex, sha256Stream } from "../host/sha256.ts";
import { writeFileDurable } from "../host/durable_file.ts";
import { BundleError } from "./errors.ts";

/** node:fs, loaded at the first hash: most commands never need it. */
let nodeFs: Promise<typeof import("node:fs")> | undefined;

/** The manifest in each mode directory of a bundle, in `sha256sum` format. */
export const manifestName = "SHA256SUMS";
/** The detached Ed25519 signature of the manifest, beside it. */
export const signatureName = "SHA256SUMS.sig";
/**
 * What stratum records of an installed copy when it stages one: each listed
 * file's size and mode, for the cheap check of `node status`
 * (installed_check.ts). Not part of the signed bundle, so only in stratum's
 * own copies.
 */
export const recordName = ".stratum-record.json";

/** One regular file of a bundle tree. */
export interface TreeFile {
  /** Relative to the mode directory, `/`-separated. */
  readonly path: string;
  readonly size: number;
}

/**
 * Parses a manifest: path → sha256 hex. A line that is not `HEX  PATH`, an
 * absolute path, a path with `..` or an empty component, or a path listed
 * twice is refused: a manifest names files inside the bundle, once.
 */
export function parseManifest(text: string, where: string): Map<string, string> {
  const out = new Map<string, string>();
  for (const [i, line] of text.split("\n").entries()) {
    if (line.trim() === "") continue;
    const m = /^([0-9a-f]{64}) [ *](.+)$/.exec(line);
    const path = m?.[2]?.replace(/^\.\//, "");
    const parts = path?.split("/") ?? [];
    if (
      !m || !path || path.startsWith("/") || parts.some((p) => p === ".." || p === "" || p === ".")
    ) {
      throw new BundleError(
        "manifest",
        `Bundle ${where}: ${manifestName} line ${i + 1} is malformed or leaves the bundle`,
        path,
      );
    }
    if (out.has(path)) {
      throw new BundleError("manifest", `Bundle ${where}: ${path} is listed twice`, path);
    }
    out.set(path, m[1]!);
  }
  return out;
}

/** The manifest text for `sums` (path → hex), sorted by path, as `sha256sum` writes it. */
export function formatManifest(sums: ReadonlyMap<string, string>): string {
  return [...sums].sort(([a], [b]) => (a < b ? -1 : a > b ? 1 : 0))
    .map(([p, h]) => `${h}  ${p}\n`).join("");
}

/**
 * Every regular file under `dir`, with its size, sorted. A symlink, device,
 * FIFO or socket anywhere in the tree is refused, naming it: a bundle is
 * plain files, and a link could make a verified path read something else.
 */
export async function listTree(dir: string): Promise<TreeFile[]> {
  const out: TreeFile[] = [];
  const walk = async (rel: string) => {
    for await (const e of Deno.readDir(rel ? join(dir, rel) : dir)) {
      const path = rel ? `${rel}/${e.name}` : e.name;
      if (e.isSymlink) {
        throw new BundleError(
          "unsafe",
          `Bundle ${dir}: ${path} is a symlink; bundles hold plain files only`,
          path,
        );
      }
      if (e.isDirectory) await walk(path);
      else if (e.isFile) out.push({ path, size: (await Deno.lstat(join(dir, path))).size });
      else {
        throw new BundleError(
          "unsafe",
          `Bundle ${dir}: ${path} is a device, FIFO or socket; bundles hold plain files only`,
          path,
        );
      }
    }
  };
  await walk("");
  return out.sort((a, b) => (a.path < b.path ? -1 : a.path > b.path ? 1 : 0));
}

/** Read size of the streaming hash: memory per file hashed, whatever its size. */
const chunkBytes = 1 << 20;

/**
 * The sha256 of a file, read as a stream in fixed-size chunks (see
 * hashHandle). Opened without following a link or blocking: anything but a
 * regular file is a BundleError.
 */
export async function hashFile(path: string): Promise<string> {
  const { constants, promises } = await (nodeFs ??= import("node:fs"));
  const fh = await promises.open(
    path,
    constants.O_RDONLY | constants.O_NOFOLLOW | constants.O_NONBLOCK,
  ).catch((err) => {
    if ((err as { code?: string }).code === "ELOOP") {
      throw new BundleError("unsafe", `${path} is a symlink: refused`);
    }
    throw err;
  });
  try {
    if (!(await fh.stat()).isFile()) {
      throw new BundleError("unsafe", `${path} is not a regular file: refused`);
    }
    return await hashHandle(fh);
  } finally {
    await fh.close();
  }
}

/**
 * The sha256 of what an open file holds from its start, read in
 * fixed-size chunks. A file that fits in the first chunk is hashed whole by
 * WebCrypto: most of a bundle's files, by count, and the status commands
 * then never load Node's crypto. With `sink`, every chunk is also handed
 * to it as it is hashed (a copy that is checked as it is made).
 */
export async function hashHandle(
  fh: fsp.FileHandle,
  sink?: (chunk: Uint8Array) => Promise<void>,
): Promise<string> {
  const buf = new Uint8Array(chunkBytes);
  let at = 0;
  let pos = 0;
  // A short read is not the end: only a read of nothing is.
  for (;;) {
    const { bytesRead } = await fh.read(buf, at, buf.length - at, pos);
    if (bytesRead === 0) break;
    at += bytesRead;
    pos += bytesRead;
    if (at === buf.length) break;
  }
  if (at < buf.length) {
    await sink?.(buf.subarray(0, at));
    return await sha256Hex(buf.slice(0, at));
  }
  const h = await sha256Stream();
  for (;;) {
    h.update(buf.subarray(0, at));
    await sink?.(buf.subarray(0, at));
    const { bytesRead } = await fh.read(buf, 0, buf.length, pos);
    if (bytesRead === 0) break;
    at = bytesRead;
    pos += bytesRead;
  }
  return h.digest("hex");
}

/**
 * Reads an open file whole when it holds at most `max` bytes; undefined
 * when it holds more (it is read no further than that).
 */
export async function readHandle(
  fh: fsp.FileHandle,
  max: number,
): Promise<Uint8Array<ArrayBuffer> | undefined> {
  const buf = new Uint8Array(max + 1);
  let at = 0;
  while (at < buf.length) {
    const { bytesRead } = await fh.read(buf, at, buf.length - at, at);
    if (bytesRead === 0) break;
    at += bytesRead;
  }
  return at > max ? undefined : buf.slice(0, at);
}

/** Runs `fn` over `items`, at most `limit` at a time; rejects with the first failure. */
export async function eachLimited<T>(
  items: readonly T[],
  limit: number,
  fn: (item: T) => Promise<void>,
): Promise<void> {
  let next = 0;
  let failed = false;
  const worker = async () => {
    while (!failed && next < items.length) {
      const item = items[next++]!;
      try {
        await fn(item);
      } catch (err) {
        failed = true;
        throw err;
      }
    }
  };
  await Promise.all(Array.from({ length: Math.max(1, Math.min(limit, items.length)) }, worker));
}

/** How many files are hashed at once: a disk serves a few streams well, a CPU hashes one each. */
export function hashConcurrency(): number {
  return Math.max(2, Math.min(4, navigator.hardwareConcurrency || 2));
}

/**
 * The files a manifest of `dir` would list (all but the manifest and its
 * signature), or a BundleError for what no manifest can carry: a link or
 * special file, a name with a line break or backslash. Changes nothing, so
 * `bundle make` can refuse before it writes a byte.
 */
export async function manifestable(dir: string): Promise<TreeFile[]> {
  const files = (await listTree(dir)).filter((f) =>
    f.path !== manifestName && f.path !== signatureName
  );
  for (const f of files) {
    // sha256sum would escape such a name; a node reads the manifest plainly.
    if (/[\n\r\\]/.test(f.path)) {
      throw new BundleError(
        "manifest",
        `Bundle ${dir}: the name ${
          JSON.stringify(f.path)
        } cannot be listed in ${manifestName} (a line break or backslash): rename it`,
        f.path,
      );
    }
  }
  return files;
}

/**
 * Writes `dir`'s SHA256SUMS from the files in it (all but the manifest and
 * its signature) and removes a signature that no longer matches. Returns the
 * number of files and bytes listed.
 */
export async function makeManifest(dir: string): Promise<{ files: number; bytes: number }> {
  const files = await manifestable(dir);
  const sums = new Map<string, string>();
  await eachLimited(files, hashConcurrency(), async (f) => {
    sums.set(f.path, await hashFile(join(dir, f.path)));
  });
  // Atomic: a full disk or a crash leaves the old manifest or the new one, never a torn one.
  await writeFileDurable(join(dir, manifestName), formatManifest(sums), { mode: 0o644 });
  await Deno.remove(join(dir, signatureName)).catch((err) => {
    if (!(err instanceof Deno.errors.NotFound)) throw err;
  });
  return { files: files.length, bytes: files.reduce((n, f) => n + f.size, 0) };
}
