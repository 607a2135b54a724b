// The systemd units of a slot. Every unit of slot X is named
// stratum-X.target or stratum-X-*.service, so a backend can find and remove
// all of a slot's units without a list.

import { join } from "node:path";
import {
  ensureDir,
  type HostPaths,
  removeFileDurable,
  type Systemctl,
  writeFileDurable,
} from "../host/mod.ts";
import type { CallOptions } from "./backend.ts";
import type { Mode } from "./mode.ts";
import type { Slot } from "./slot.ts";
import type { Service } from "./stack.ts";

/** The slot's target: starting it starts the slot's stack. */
export function targetUnit(slot: Slot): string {
  return `stratum-${slot}.target`;
}

/** The unit of one of the slot's services. */
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

/** The Requires= and After= lines (with a line break each) of a service's `after`. */
export function orderLines(s: Service, unitOf: (name: string) => string): string {
  return (s.after ?? []).map((a) => `Requires=${unitOf(a)}\nAfter=${unitOf(a)}\n`).join("");
}

/**
 * The unit files of `slot` in the unit directory: `stratum-X.target` and
 * `stratum-X-NAME.service` files. An operator's drop-in directory
 * (`stratum-X-NAME.service.d`, what `systemctl edit` makes) is not one of
 * them: it is left where it is, through every rebuild of the slot.
 */
export async function unitsOf(paths: HostPaths, slot: Slot): Promise<string[]> {
  const out: string[] = [];
  const ours = new RegExp(`^stratum-${slot}(\\.target|-[a-z0-9-]+\\.service)$`);
  try {
    for await (const e of Deno.readDir(paths.unitDir)) {
      if (!e.isDirectory && ours.test(e.name)) out.push(e.name);
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
