// Starting, stopping and removing a slot through its units: what both
// backends do the same way (see _slot_backend.ts).

import { join } from "node:path";
import {
  type HostPaths,
  removeFileDurable,
  removeTreeDurable,
  type Systemctl,
  UnitError,
} from "../host/mod.ts";
import type { CallOptions } from "./backend.ts";
import type { Slot } from "./slot.ts";
import { targetUnit, unitsOf } from "./units.ts";

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
