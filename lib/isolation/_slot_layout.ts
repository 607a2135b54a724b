// A slot's files: the bundle copied in, and the host config files it
// brings. Both backends build their slots this way.

import { dirname, join } from "node:path";
import {
  ensureDir,
  type HostPaths,
  removeTreeDurable,
  syncDir,
  syncTree,
  writeFileDurable,
} from "../host/mod.ts";
import { linkOrCopyTree, manifestName, normalizeModes, parseManifest } from "../bundle/mod.ts";
import { readSmallFile } from "../host/small_file.ts";
import { applyKernelConfig, kernelFileProblem } from "./host_kernel.ts";
import { ErrBadStack, type Stack } from "./stack.ts";

/**
 * Lays a slot out from a verified bundle directory (hard links to the copy
 * this process just staged and hashed, else a copy: linkOrCopyTree),
 * replacing a half-built one, and fsyncs all of it: the source stops only after the target is
 * recorded, and a power cut after that must find every byte the target runs
 * from on disk, not in the page cache.
 */
export async function layOut(bundleDir: string, slotDir: string): Promise<void> {
  await removeTreeDurable(slotDir);
  await closeSlots(dirname(slotDir));
  // The installed bundle is a symlink to its current version: copy what it points at.
  const from = await Deno.realPath(bundleDir);
  await linkOrCopyTree(from, slotDir);
  await normalizeModes(slotDir);
  await syncTree(slotDir);
  await syncDir(dirname(slotDir));
}

/**
 * Makes the slots' parent (/var/lib/stratum/slots) root's alone, 0700: made
 * so, and closed if an older stratum made it 0755. No other user reaches a
 * slot, whatever its tree holds: a node image's own modes and links matter
 * only inside its machine, and a slot being built is never seen half-done.
 */
async function closeSlots(slotsDir: string): Promise<void> {
  await ensureDir(dirname(slotsDir));
  await ensureDir(slotsDir, 0o700);
  if (((await Deno.lstat(slotsDir)).mode ?? 0) & 0o077) await Deno.chmod(slotsDir, 0o700);
}

/**
 * Refuses (ErrBadStack) when a component of `rel` in the slot is a link:
 * stratum is about to write or read there for the host, and a node image's
 * link (`etc -> /etc`) would take it out of the slot, onto the host's own
 * files. Components that do not exist yet are fine (stratum makes them, in
 * real directories). Checking, then writing, is safe: only root reaches a
 * slot (its parent is 0700), and the machine is not running.
 */
export async function refuseLinks(slotDir: string, rel: string): Promise<void> {
  let at = slotDir;
  for (const c of rel.split("/")) {
    at = join(at, c);
    const st = await Deno.lstat(at).catch(() => undefined);
    if (!st) return;
    if (st.isSymlink) {
      throw new ErrBadStack(
        `Slot ${slotDir}: ${at.slice(slotDir.length + 1)} is a link (to ${await Deno.readLink(at)
          .catch(() =>
            "?"
          )}), and stratum writes ${rel} in the slot: refused, nothing is written through a link of the node image`,
      );
    }
  }
}

/**
 * Writes the stack's host config files (see Stack.hostFiles), mode 0644,
 * and applies the kernel settings among them (host_kernel.ts). Each comes
 * from a file of the bundle: listed in the slot's manifest, a regular file
 * reached through real directories of the slot, never through a link (a
 * node image's `lnk -> /etc` would make root copy a root-only host file
 * into one every user can read). A kernel file whose lines are not module
 * names or sysctl settings is refused before anything is written (also
 * refused earlier, at `bundle verify` and preflight: node/preflight.ts).
 */
export async function writeHostFiles(
  paths: HostPaths,
  slotDir: string,
  stack: Stack,
): Promise<void> {
  const manifest = await readSmallFile(join(slotDir, manifestName), 16 << 20);
  const listed = manifest
    ? parseManifest(new TextDecoder().decode(manifest), slotDir)
    : new Map<string, string>();
  const files: [string, Uint8Array][] = [];
  for (const [hostPath, inSlot] of Object.entries(stack.hostFiles ?? {})) {
    if (!listed.has(inSlot)) {
      throw new ErrBadStack(
        `hostFiles ${hostPath}: ${inSlot} is not a file of the bundle (its manifest does not list it)`,
      );
    }
    await refuseLinks(slotDir, inSlot);
    const from = join(slotDir, inSlot);
    const st = await Deno.lstat(from);
    if (!st.isFile) {
      throw new ErrBadStack(`hostFiles ${hostPath}: ${inSlot} in the slot is not a regular file`);
    }
    const bytes = await Deno.readFile(from);
    const problem = kernelFileProblem(hostPath, new TextDecoder().decode(bytes));
    if (problem) throw new ErrBadStack(`hostFiles ${hostPath} (${inSlot}): ${problem}`);
    files.push([hostPath, bytes]);
  }
  for (const [hostPath, bytes] of files) {
    const dest = paths.at(hostPath);
    await ensureDir(dirname(dest));
    await writeFileDurable(dest, bytes, { mode: 0o644 });
  }
  // The runtime needs them before it starts, not at the next boot.
  await applyKernelConfig(paths);
}
