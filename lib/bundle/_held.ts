// Files the node already holds. A bundle file whose bytes one of stratum's
// installed copies beside the staging place has (another mode's copy, the
// same mode's current or kept release) is hard-linked from there instead of
// written again. A migration's target then runs the very inodes its source
// ran, already in the page cache (and under an emulator, already
// translated): measured in a VM, the first run of a fresh copy of
// containerd, its shim and runc added 0.7–1.1 s to the target's start while
// the node was down. An air-gapped node's disk also holds a release once.
//
// What root runs is still what was verified: the held file is opened without
// following a link, must be a regular file of this user's with the mode
// stratum would give the copy, is hashed through that descriptor and
// compared with the manifest, and the link made is checked to be the inode
// hashed. Only root can change these files (see _written.ts). The caller
// still hashes the operator's copy: a bundle is whole or refused.

import { dirname, join } from "node:path";
import { hashHandle, manifestName, parseManifest } from "./manifest.ts";
import { readSmallFile } from "../host/small_file.ts";

/** A release directory stratum names by a link beside it: `.NAME-VERSION`. */
const releaseDir = /^\.[a-z0-9]+-[^/]+$/;

/** The files of the installed copies beside a staging place, by sha256. */
export class Held {
  readonly #bySum: Map<string, string[]>;
  private constructor(bySum: Map<string, string[]>) {
    this.#bySum = bySum;
  }

  /** Nothing held: every file is written. */
  static readonly none = new Held(new Map());

  /**
   * What the releases stratum's links beside `staged` name hold, from their
   * manifests. A directory it cannot read, or whose manifest does not parse,
   * offers nothing: the file is then written, as without it.
   */
  static async beside(staged: string): Promise<Held> {
    const dir = dirname(staged);
    const bySum = new Map<string, string[]>();
    const releases = new Set<string>();
    try {
      for await (const e of Deno.readDir(dir)) {
        if (!e.isSymlink) continue;
        const target = await Deno.readLink(join(dir, e.name)).catch(() => "");
        if (releaseDir.test(target)) releases.add(join(dir, target));
      }
    } catch {
      return Held.none;
    }
    for (const rel of releases) {
      if (!(await Deno.lstat(rel).then((s) => s.isDirectory, () => false))) continue;
      const text = await readSmallFile(join(rel, manifestName), 16 << 20).catch(() => undefined);
      if (!text) continue;
      let listed: Map<string, string>;
      try {
        listed = parseManifest(new TextDecoder().decode(text), rel);
      } catch {
        continue;
      }
      for (const [f, sum] of listed) bySum.set(sum, [...(bySum.get(sum) ?? []), join(rel, f)]);
    }
    return new Held(bySum);
  }

  /**
   * Links a held file with sha256 `sum` and mode `mode` at `to` (which does
   * not exist) and returns its size, or undefined when no held file is one
   * (none listed, changed, another mode, another file system): then the
   * caller writes it.
   */
  async linkTo(sum: string, mode: number, to: string): Promise<number | undefined> {
    const { promises, constants } = await import("node:fs");
    const uid = Deno.uid();
    for (const path of this.#bySum.get(sum) ?? []) {
      const fh = await promises.open(
        path,
        constants.O_RDONLY | constants.O_NOFOLLOW | constants.O_NONBLOCK,
      ).catch(() => undefined);
      if (!fh) continue;
      try {
        const st = await fh.stat();
        if (!st.isFile() || (st.mode & 0o7777) !== mode || (uid !== null && st.uid !== uid)) {
          continue;
        }
        if ((await hashHandle(fh)) !== sum) continue;
        if (!(await Deno.link(path, to).then(() => true, () => false))) continue;
        const made = await Deno.lstat(to);
        if (made.dev === st.dev && made.ino === st.ino) return st.size;
        // Replaced between the hash and the link: not what was hashed.
        await Deno.remove(to);
      } finally {
        await fh.close();
      }
    }
    return undefined;
  }
}
