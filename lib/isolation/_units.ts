// Unit files and slot directories shared by both backends. Every unit of
// slot X is named stratum-X.target or stratum-X-*.service, so a backend can
// find and remove all of a slot's units without a list.

import { dirname, join } from "node:path";
import {
  ensureDir,
  type HostPaths,
  removeFileDurable,
  removeTreeDurable,
  syncDir,
  syncTree,
  type Systemctl,
  UnitError,
  writeFileDurable,
} from "../host/mod.ts";
import { normalizeModes } from "../bundle/mod.ts";
import type { CallOptions } from "./backend.ts";
import type { Mode } from "./mode.ts";
import type { Slot } from "./slot.ts";
import type { Stack } from "./stack.ts";

export function targetUnit(slot: Slot): string {
  return `stratum-${slot}.target`;
}

export function serviceUnit(slot: Slot, name: string): string {
  return `stratum-${slot}-${name}.service`;
}

/** The slot target: BindsTo its services, so one crashing takes the target down and start fails. */
export function targetText(slot: Slot, mode: Mode, services: string[]): string {
  return `# Written by stratum: slot ${slot}, ${mode} mode.
[Unit]
Description=Stratum node stack, slot ${slot} (${mode} mode)
${services.map((s) => `BindsTo=${s}\nAfter=${s}`).join("\n")}
`;
}

/** The units of `slot` present in the unit directory. */
export async function unitsOf(paths: HostPaths, slot: Slot): Promise<string[]> {
  const out: string[] = [];
  try {
    for await (const e of Deno.readDir(paths.unitDir)) {
      if (e.name === targetUnit(slot) || e.name.startsWith(`stratum-${slot}-`)) out.push(e.name);
    }
  } catch (err) {
    if (!(err instanceof Deno.errors.NotFound)) throw err;
  }
  return out.sort();
}

/** Writes a slot's units (replacing any it had) and reloads systemd. */
export async function writeUnits(
  paths: HostPaths,
  systemctl: Systemctl,
  slot: Slot,
  units: Record<string, string>,
  opts: CallOptions,
): Promise<void> {
  await ensureDir(paths.unitDir);
  for (const old of await unitsOf(paths, slot)) {
    if (!(old in units)) await removeFileDurable(join(paths.unitDir, old));
  }
  for (const [name, text] of Object.entries(units)) {
    await writeFileDurable(join(paths.unitDir, name), text, { mode: 0o644 });
  }
  await systemctl.daemonReload(opts);
}

/**
 * Starts the slot's target. When it fails, the error names each service that
 * failed with systemd's Result and exit status: the target's own error only
 * says that a dependency failed.
 */
export async function startSlot(
  paths: HostPaths,
  systemctl: Systemctl,
  slot: Slot,
  opts: CallOptions,
): Promise<void> {
  try {
    await systemctl.start(targetUnit(slot), opts);
  } catch (err) {
    if (!(err instanceof UnitError)) throw err;
    const why: string[] = [];
    for (const u of (await unitsOf(paths, slot)).filter((u) => u.endsWith(".service"))) {
      const p = await systemctl.show(u, ["ActiveState", "Result", "ExecMainCode", "ExecMainStatus"])
        .catch(() => undefined);
      if (p && p.Result && p.Result !== "success") {
        why.push(`${u}: ${p.ActiveState} (Result=${p.Result}, exit status ${p.ExecMainStatus})`);
      }
    }
    throw why.length
      ? new UnitError("start", targetUnit(slot), `${err.detail}: ${why.join("; ")}`)
      : err;
  }
}

/** Stops the slot's target and each of its services in one call, so none outlives the stop. */
export async function stopSlot(
  paths: HostPaths,
  systemctl: Systemctl,
  slot: Slot,
  opts: CallOptions,
): Promise<void> {
  const units = await unitsOf(paths, slot);
  if (units.length === 0) return;
  await systemctl.stop([targetUnit(slot), ...units.filter((u) => u.endsWith(".service"))], opts);
}

/** Stops a slot, removes its units and its directory. A missing slot is fine. */
export async function destroySlot(
  paths: HostPaths,
  systemctl: Systemctl,
  slot: Slot,
  opts: CallOptions,
): Promise<void> {
  const units = await unitsOf(paths, slot);
  await stopSlot(paths, systemctl, slot, opts);
  for (const u of units) await removeFileDurable(join(paths.unitDir, u));
  if (units.length > 0) {
    await systemctl.daemonReload(opts);
    for (const u of units) await systemctl.resetFailed(u, opts);
  }
  await removeTreeDurable(paths.slot(slot));
}

/**
 * Lays a slot out from a verified bundle directory, replacing a half-built
 * one, and fsyncs all of it: the source stops only after the target is
 * recorded, and a power cut after that must find every byte the target runs
 * from on disk, not in the page cache.
 */
export async function layOut(bundleDir: string, slotDir: string): Promise<void> {
  await removeTreeDurable(slotDir);
  await ensureDir(dirname(slotDir));
  // The installed bundle is a symlink to its current version: copy what it points at.
  const from = await Deno.realPath(bundleDir);
  const { cp } = await import("node:fs/promises");
  await cp(from, slotDir, { recursive: true, preserveTimestamps: true });
  await normalizeModes(slotDir);
  await syncTree(slotDir);
  await syncDir(dirname(slotDir));
}

/**
 * Writes the stack's host config files (see Stack.hostFiles), each from a
 * regular file in the slot (a link there is refused, so a slot cannot make
 * root copy another host file out), mode 0644.
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
}
