import type { promises as fsp } from "node:fs";
import { join } from "node:path";
import { BundleError } from "./errors.ts";

/** node:fs, loaded when a bundle is first read. */
let nodeFs: Promise<typeof import("node:fs")> | undefined;

/** Where a file of a bundle lives on disk, as its listing saw it. */
export interface Inode {
  readonly dev: number;
  readonly ino: number;
}

/**
 * A bundle directory read as root without trusting whoever can write it
 * (its carrier). Every file is opened without following a link at its last
 * component and without blocking (a FIFO would hang root), and must then be
 * a regular file; a file the listing saw must be that very inode (overlayfs
 * gives a directory and its files different devices, so the device alone
 * says nothing), so a directory swapped for a link to another
 * tree between the listing and the open (or between verification and the
 * copy) is refused before a byte is read.
 *
 * (Deno gives no openat: a path through /proc/self/fd would be, but Deno
 * asks for every permission to open one, and stratum runs with fewer.)
 */
export class BundleReader {
  readonly dir: string;
  #fs: typeof import("node:fs");
  /** What the listing saw, by path: what a later open must find. */
  readonly inodes = new Map<string, Inode>();

  private constructor(dir: string, fs: typeof import("node:fs")) {
    this.dir = dir;
    this.#fs = fs;
  }

  /** Opens the bundle directory `dir` itself: a real directory, not a link. */
  static async open(dir: string): Promise<BundleReader> {
    const fs = await (nodeFs ??= import("node:fs"));
    const st = await Deno.lstat(dir).catch(() => undefined);
    if (st?.isSymlink) {
      throw new BundleError("unsafe", `Bundle ${dir} is a symlink; bundles are plain directories`);
    }
    if (!st?.isDirectory) throw new BundleError("file", `Bundle ${dir} is not a directory`);
    return new BundleReader(dir, fs);
  }

  /**
   * Opens the regular file `rel` (`/`-separated, inside the bundle) for
   * reading. `expect`, or what this reader's listing saw, is the inode it
   * must be. Anything else — a link, a FIFO, a device, another file system,
   * another inode — is a BundleError naming it.
   */
  async file(
    rel: string,
    expect: Inode | undefined = this.inodes.get(rel),
  ): Promise<fsp.FileHandle> {
    const { O_RDONLY, O_NOFOLLOW, O_NONBLOCK } = this.#fs.constants;
    const fh = await this.#fs.promises.open(join(this.dir, rel), O_RDONLY | O_NOFOLLOW | O_NONBLOCK)
      .catch((err) => {
        const code = (err as { code?: string }).code;
        if (code === "ELOOP" || code === "ENOTDIR") {
          throw new BundleError(
            "unsafe",
            `Bundle ${this.dir}: ${rel} is a symlink or is reached through one: refused`,
            rel,
          );
        }
        if (code === "ENOENT") {
          throw new BundleError("file", `Bundle ${this.dir}: ${rel} is missing`, rel);
        }
        throw err;
      });
    const st = await fh.stat();
    const problem = !st.isFile()
      ? "is not a regular file (a FIFO, device or directory)"
      : expect && (st.dev !== expect.dev || st.ino !== expect.ino)
      ? "is not the file that was listed (reached through a link, or replaced)"
      : undefined;
    if (problem) {
      await fh.close();
      throw new BundleError("unsafe", `Bundle ${this.dir}: ${rel} ${problem}: refused`, rel);
    }
    return fh;
  }

  /** Whether `rel` exists (as anything), without following a link at its last component. */
  async exists(rel: string): Promise<boolean> {
    return await Deno.lstat(join(this.dir, rel)).then(() => true, (err) => {
      if (err instanceof Deno.errors.NotFound) return false;
      throw err;
    });
  }

  /**
   * Every regular file under the bundle with its size, sorted by path, each
   * file's inode recorded. A link, device, FIFO or socket anywhere is
   * refused, naming it.
   */
  async list(): Promise<{ path: string; size: number }[]> {
    const out: { path: string; size: number }[] = [];
    const walk = async (rel: string) => {
      for await (const e of Deno.readDir(rel ? join(this.dir, rel) : this.dir)) {
        const path = rel ? `${rel}/${e.name}` : e.name;
        if (e.isSymlink) {
          throw new BundleError(
            "unsafe",
            `Bundle ${this.dir}: ${path} is a symlink; bundles hold plain files only`,
            path,
          );
        }
        if (e.isDirectory) await walk(path);
        else if (e.isFile) {
          const st = await Deno.lstat(join(this.dir, path));
          if (!st.isFile) {
            throw new BundleError(
              "unsafe",
              `Bundle ${this.dir}: ${path} changed while listed`,
              path,
            );
          }
          this.inodes.set(path, { dev: st.dev, ino: st.ino! });
          out.push({ path, size: st.size });
        } else {
          throw new BundleError(
            "unsafe",
            `Bundle ${this.dir}: ${path} is a device, FIFO or socket; bundles hold plain files only`,
            path,
          );
        }
      }
    };
    await walk("");
    return out.sort((a, b) => (a.path < b.path ? -1 : a.path > b.path ? 1 : 0));
  }
}
