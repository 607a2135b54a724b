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
 * - only an uncompressed tar (ustar, POSIX or GNU) is taken, refused
 *   otherwise before anything is read further: what is unpacked is bounded
 *   by what was listed, and no decompressor runs as root on it;
 * - its listed size (each entry rounded up to a block) must fit in the
 *   free space of the slot's file system, checked before the unpack: a
 *   full disk would also starve the running source's state;
 * - the slot is 0700 from before tar runs until the tree is checked (and
 *   the slots' parent is 0700 always, _slot_layout.ts): no other user
 *   reaches an entry while its mode is still the archive's;
 * - every entry is root's (root:root, `--no-same-owner`): the image's uids
 *   and gids would be host users' and groups' on the host, where the slot
 *   lives; no extended attributes (file capabilities), ACLs or SELinux
 *   labels; the slot's own directory is given back its mode (tar sets the
 *   archive's `./` on it);
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
 * Fails with ErrBadStack when the image is not an uncompressed tar, does
 * not fit, or lacks what a booted machine needs.
 */
export async function unpackNodeImage(slotDir: string, archive: string): Promise<void> {
  const path = join(slotDir, archive);
  await checkFormat(path, archive);
  await checkFits(path, archive, slotDir);
  await Deno.chmod(slotDir, 0o700);
  const r = await exec.run([
    "tar",
    "--extract",
    "--keep-old-files",
    "--no-same-owner",
    "--no-xattrs",
    "--no-acls",
    "--no-selinux",
    "--exclude=./dev/*",
    "--exclude=dev/*",
    "-f",
    path,
    "-C",
    slotDir,
  ], { timeoutMs: extractTimeoutMs });
  if (r.code !== 0) {
    const said = r.stderr.trim().split("\n").slice(-3).join("; ");
    throw new ErrBadStack(`Node image ${archive}: tar exited ${r.code}: ${said}`);
  }
  await Deno.chmod(slotDir, 0o700);
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
  // Checked: the machine's root may be walked by the machine's own users.
  await Deno.chmod(slotDir, 0o755);
}

/** The leading bytes of the compressed formats a carrier might send, for the refusal's words. */
const compressed: readonly [string, number[]][] = [
  ["gzip", [0x1f, 0x8b]],
  ["bzip2", [0x42, 0x5a, 0x68]],
  ["xz", [0xfd, 0x37, 0x7a, 0x58, 0x5a, 0x00]],
  ["zstd", [0x28, 0xb5, 0x2f, 0xfd]],
  ["lz4", [0x04, 0x22, 0x4d, 0x18]],
  ["compress", [0x1f, 0x9d]],
  ["lzip", [0x4c, 0x5a, 0x49, 0x50]],
];

/**
 * Refuses anything but an uncompressed tar with a ustar header (ustar,
 * POSIX pax and GNU tar all have `ustar` at byte 257 of the first header;
 * the pre-POSIX v7 format has no magic and is refused too).
 */
async function checkFormat(path: string, archive: string): Promise<void> {
  const head = new Uint8Array(263);
  const f = await Deno.open(path, { read: true });
  let got = 0;
  try {
    for (let n: number | null = 0; n !== null && got < head.length;) {
      n = await f.read(head.subarray(got));
      if (n !== null) got += n;
    }
  } finally {
    f.close();
  }
  if (new TextDecoder().decode(head.subarray(257, 262)) === "ustar") return;
  const kind = compressed.find(([, magic]) => magic.every((b, i) => head[i] === b))?.[0];
  throw new ErrBadStack(
    `Node image ${archive} is not an uncompressed tar archive${
      kind ? ` (it is ${kind}-compressed)` : ""
    }: a node image must be a plain tar (ustar, POSIX or GNU format)`,
  );
}

/** The space one entry may take beyond its data: its last block, its inode. */
const entryOverhead = 4096;

/**
 * Refuses an image whose listed size (sum of its entries' sizes, each with
 * {@linkcode entryOverhead}) is more than the free space where the slot is.
 */
async function checkFits(path: string, archive: string, slotDir: string): Promise<void> {
  const listed = await exec.run(["tar", "--list", "--verbose", "--numeric-owner", "-f", path], {
    timeoutMs: extractTimeoutMs,
  });
  if (listed.code !== 0) {
    const said = listed.stderr.trim().split("\n").slice(-3).join("; ");
    throw new ErrBadStack(`Node image ${archive}: tar exited ${listed.code}: ${said}`);
  }
  let need = 0;
  for (const line of listed.stdout.split("\n")) {
    if (!line) continue;
    // mode owner/group size date time name; a device's size is "major,minor".
    const size = line.trim().split(/\s+/)[2] ?? "";
    need += (/^\d+$/.test(size) ? Number(size) : 0) + entryOverhead;
  }
  const free = await freeBytes(slotDir);
  if (need > free) {
    throw new ErrBadStack(
      `Node image ${archive} needs ${need} bytes unpacked, ${free} bytes free under ${slotDir}`,
    );
  }
}

/** Bytes available to root on the file system of `dir` (df: Deno has no statfs). */
async function freeBytes(dir: string): Promise<number> {
  const out = await exec.output(["df", "--output=avail", "-B1", "--", dir], { timeoutMs: 10_000 });
  const n = Number(out.trim().split("\n").pop()?.trim());
  if (!Number.isFinite(n)) throw new Error(`df ${dir}: no free space in ${JSON.stringify(out)}`);
  return n;
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
