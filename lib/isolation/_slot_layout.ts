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
import { linkOrCopyTree, normalizeModes } from "../bundle/mod.ts";
import { applyKernelConfig } from "./host_kernel.ts";
import type { Stack } from "./stack.ts";

/**
 * Lays a slot out from a verified bundle directory (hard links to the copy
 * this process just staged and hashed, else a copy: linkOrCopyTree),
 * replacing a half-built one, and fsyncs all of it: the source stops only after the target is
 * recorded, and a power cut after that must find every byte the target runs
 * from on disk, not in the page cache.
 */
export async function layOut(bundleDir: string, slotDir: string): Promise<void> {
  await removeTreeDurable(slotDir);
  await ensureDir(dirname(slotDir));
  // The installed bundle is a symlink to its current version: copy what it points at.
  const from = await Deno.realPath(bundleDir);
  await linkOrCopyTree(from, slotDir);
  await normalizeModes(slotDir);
  await syncTree(slotDir);
  await syncDir(dirname(slotDir));
}

/**
 * Writes the stack's host config files (see Stack.hostFiles), each from a
 * regular file in the slot (a link there is refused, so a slot cannot make
 * root copy another host file out), mode 0644, and applies the kernel
 * settings among them (host_kernel.ts).
 */
export async function writeHostFiles(
  paths: HostPaths,
  slotDir: string,
  stack: Stack,
): Promise<void> {
  for (const [hostPath, inSlot] of Object.entries(stack.hostFiles ?? {})) {
    const from = join(slotDir, inSlot);
    const st = await Deno.lstat(from);
    if (!st.isFile) {
      throw new Error(`hostFiles ${hostPath}: ${inSlot} in the slot is not a regular file`);
    }
    const dest = paths.at(hostPath);
    await ensureDir(dirname(dest));
    await writeFileDurable(dest, await Deno.readFile(from), { mode: 0o644 });
  }
  // The runtime needs them before it starts, not at the next boot.
  await applyKernelConfig(paths);
}
