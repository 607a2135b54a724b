// A node image: the root tree an nspawn-mode slot may bring (stack.json
// `root`), so the machine runs its own userland (systemd, a shell, what the
// stack's services need) and not the host's /usr, as kind's node image does.

import { join } from "node:path";
import * as exec from "../exec/mod.ts";
import { ErrBadStack } from "./stack.ts";

/** How long extracting a node image may take (a few hundred MB on a slow disk). */
const extractTimeoutMs = 600_000;

/**
 * What a booted machine needs of its root tree: systemd to be its PID 1,
 * and the shell and `timeout` that stratum's readiness check and command
 * probe run inside it. Each path may be reached through the image's own
 * merged-/usr links (bin → usr/bin), so each is also tried under usr/.
 */
const needed: readonly [string, string][] = [
  ["lib/systemd/systemd", "systemd (its PID 1)"],
  ["bin/sh", "a shell (/bin/sh, for the readiness check)"],
  ["bin/timeout", "coreutils' timeout (the readiness check's bound)"],
];

/**
 * Unpacks the node image `archive` (a tar in the slot, verified with the
 * rest of the bundle) into `slotDir`, the machine's root, then makes the
 * tree what a slot may hold:
 *
 * - nothing of the bundle is replaced (`--keep-old-files`): a slot's files
 *   are hard links to the installed copy, and writing over one would change
 *   the copy that was verified; a collision fails the prepare;
 * - `dev/` is not unpacked (nspawn mounts its own) and any other device,
 *   FIFO or socket is removed: a slot holds files, directories and links;
 * - no setuid, setgid or sticky bit, no group or world write (the slot is
 *   root's, and a slot check refuses them);
 * - the whole file system is synced once (syncfs): the target must be on
 *   disk before the source stops, and one syncfs beats an fsync per file
 *   of a tree of thousands.
 *
 * Fails with ErrBadStack when the image lacks what a booted machine needs.
 */
export async function unpackNodeImage(slotDir: string, archive: string): Promise<void> {
  const r = await exec.run([
    "tar",
    "--extract",
    "--keep-old-files",
    "--numeric-owner",
    "--exclude=./dev/*",
    "--exclude=dev/*",
    "-f",
    join(slotDir, archive),
    "-C",
    slotDir,
  ], { timeoutMs: extractTimeoutMs });
  if (r.code !== 0) {
    const said = r.stderr.trim().split("\n").slice(-3).join("; ");
    throw new ErrBadStack(`Node image ${archive}: tar exited ${r.code}: ${said}`);
  }
  await sanitizeTree(slotDir);
  for (const [path, what] of needed) {
    if (!(await inTree(slotDir, path)) && !(await inTree(slotDir, `usr/${path}`))) {
      throw new ErrBadStack(
        `Node image ${archive} has no /${path}: a booted machine needs ${what}`,
      );
    }
  }
  const synced = await exec.run(["sync", "-f", slotDir], { timeoutMs: extractTimeoutMs });
  if (synced.code !== 0) throw new Error(`sync -f ${slotDir}: ${synced.stderr.trim()}`);
}

/**
 * Walks `dir` without following a link: removes devices, FIFOs and sockets,
 * and clears the mode bits a slot may not have (07022). Each path is reached
 * through real directories only, so chmod (which follows a link at its last
 * component) is never given a link.
 */
async function sanitizeTree(dir: string): Promise<void> {
  for await (const e of Deno.readDir(dir)) {
    const p = join(dir, e.name);
    if (e.isSymlink) continue;
    if (!e.isFile && !e.isDirectory) {
      await Deno.remove(p);
      continue;
    }
    const mode = (await Deno.lstat(p)).mode ?? 0;
    if (mode & 0o7022) await Deno.chmod(p, mode & 0o755);
    if (e.isDirectory) await sanitizeTree(p);
  }
}

/** Whether `rel` names a regular file in the tree at `root`, its links resolved inside the tree. */
async function inTree(root: string, rel: string, hops = 0): Promise<boolean> {
  let at = root;
  const parts = rel.split("/");
  for (let i = 0; i < parts.length; i++) {
    const p = join(at, parts[i]!);
    const st = await Deno.lstat(p).catch(() => undefined);
    if (!st) return false;
    if (st.isSymlink) {
      if (hops > 40) return false;
      const to = await Deno.readLink(p);
      // A link is the machine's: an absolute one starts at its root.
      const rest = parts.slice(i + 1);
      const next = to.startsWith("/")
        ? to.slice(1).split("/").filter(Boolean)
        : [...at.slice(root.length).split("/").filter(Boolean), ...to.split("/")];
      const resolved: string[] = [];
      for (const c of [...next, ...rest]) {
        if (c === "..") resolved.pop();
        else if (c !== "." && c !== "") resolved.push(c);
      }
      return await inTree(root, resolved.join("/"), hops + 1);
    }
    if (i === parts.length - 1) return st.isFile;
    if (!st.isDirectory) return false;
    at = p;
  }
  return false;
}
