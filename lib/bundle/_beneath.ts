import type { promises as fsp } from "node:fs";
import { BundleError } from "./errors.ts";

/** node:fs, loaded when a bundle is first read. */
let nodeFs: Promise<typeof import("node:fs")> | undefined;

/**
 * A bundle directory read as root without trusting whoever can write it
 * (its carrier): every directory and file is opened relative to the
 * descriptor of the directory above it (through /proc/self/fd, Linux's
 * openat for a program that has only paths), never following a link, and
 * every file without blocking (a FIFO would hang root). What the carrier
 * swaps in after the root was opened — a link to another tree, a FIFO, a
 * device — is refused, never read through.
 */
export class Beneath implements AsyncDisposable {
  readonly dir: string;
  #dirs = new Map<string, fsp.FileHandle>();
  #fs: typeof import("node:fs");

  private constructor(dir: string, root: fsp.FileHandle, fs: typeof import("node:fs")) {
    this.dir = dir;
    this.#dirs.set("", root);
    this.#fs = fs;
  }

  /** Opens the bundle directory `dir` itself: a real directory, not a link. */
  static async open(dir: string): Promise<Beneath> {
    const fs = await (nodeFs ??= import("node:fs"));
    // lstat first: Deno resolves a path for its permission check, so under
    // scoped permissions O_NOFOLLOW alone does not stop a link.
    const st = await Deno.lstat(dir).catch(() => undefined);
    if (st?.isSymlink) {
      throw new BundleError("unsafe", `Bundle ${dir} is a symlink; bundles are plain directories`);
    }
    const root = await fs.promises.open(dir, dirFlags(fs)).catch((err) => {
      throw unsafe(dir, "", err);
    });
    return new Beneath(dir, root, fs);
  }

  /** The path through which the kernel resolves `name` inside the open directory `rel`. */
  async #at(rel: string, name: string): Promise<string> {
    const d = await this.#dir(rel);
    return `/proc/self/fd/${d.fd}/${name}`;
  }

  async #dir(rel: string): Promise<fsp.FileHandle> {
    const have = this.#dirs.get(rel);
    if (have) return have;
    const cut = rel.lastIndexOf("/");
    const [parent, name] = cut < 0 ? ["", rel] : [rel.slice(0, cut), rel.slice(cut + 1)];
    const path = await this.#at(parent, name);
    const fh = await this.#fs.promises.open(path, dirFlags(this.#fs)).catch((err) => {
      throw unsafe(this.dir, rel, err);
    });
    this.#dirs.set(rel, fh);
    return fh;
  }

  /**
   * Opens the regular file `rel` (`/`-separated, inside the bundle) for
   * reading; anything else — a link anywhere on the way, a FIFO, a device,
   * a directory — is a BundleError naming it.
   */
  async file(rel: string): Promise<fsp.FileHandle> {
    const cut = rel.lastIndexOf("/");
    const path = cut < 0
      ? await this.#at("", rel)
      : await this.#at(rel.slice(0, cut), rel.slice(cut + 1));
    const { O_RDONLY, O_NOFOLLOW, O_NONBLOCK } = this.#fs.constants;
    const fh = await this.#fs.promises.open(path, O_RDONLY | O_NOFOLLOW | O_NONBLOCK).catch(
      (err) => {
        throw unsafe(this.dir, rel, err);
      },
    );
    const st = await fh.stat();
    if (!st.isFile()) {
      await fh.close();
      throw new BundleError(
        "unsafe",
        `Bundle ${this.dir}: ${rel} is not a regular file (a FIFO, device or directory): refused`,
        rel,
      );
    }
    return fh;
  }

  /** Whether `rel` exists (as anything) inside the bundle, without following a link. */
  async exists(rel: string): Promise<boolean> {
    try {
      const cut = rel.lastIndexOf("/");
      const path = cut < 0
        ? await this.#at("", rel)
        : await this.#at(rel.slice(0, cut), rel.slice(cut + 1));
      await this.#fs.promises.lstat(path);
      return true;
    } catch (err) {
      if ((err as { code?: string }).code === "ENOENT") return false;
      throw err;
    }
  }

  /**
   * Every regular file under the bundle with its size, sorted by path. A
   * link, device, FIFO or socket anywhere is refused, naming it.
   */
  async list(): Promise<{ path: string; size: number }[]> {
    const out: { path: string; size: number }[] = [];
    const walk = async (rel: string) => {
      const d = await this.#dir(rel);
      for await (const e of Deno.readDir(`/proc/self/fd/${d.fd}`)) {
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
          const st = await this.#fs.promises.lstat(`/proc/self/fd/${d.fd}/${e.name}`);
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

  async [Symbol.asyncDispose](): Promise<void> {
    for (const fh of this.#dirs.values()) await fh.close().catch(() => {});
    this.#dirs.clear();
  }
}

function dirFlags(fs: typeof import("node:fs")): number {
  const { O_RDONLY, O_DIRECTORY, O_NOFOLLOW, O_NONBLOCK } = fs.constants;
  return O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_NONBLOCK;
}

/** An open that failed: a link or non-directory on the way is unsafe; missing is a missing file. */
function unsafe(dir: string, rel: string, err: unknown): Error {
  const code = (err as { code?: string }).code;
  const what = rel === "" ? `Bundle ${dir}` : `Bundle ${dir}: ${rel}`;
  if (code === "ELOOP" || code === "ENOTDIR") {
    return new BundleError(
      "unsafe",
      `${what} is reached through a symlink or is not what the manifest lists: refused`,
      rel || undefined,
    );
  }
  if (code === "ENOENT") return new BundleError("file", `${what} is missing`, rel || undefined);
  return err instanceof Error ? err : new Error(String(err));
}
