// Who carries out the change under way, as `migrate status` and `node
// status` say it: the migration lock's running holder and, when it runs in
// a systemd service (a `--detach`ed change, the boot unit), that service,
// whose journal is where its progress is followed. No commander: the fast
// path (fast.ts) runs both statuses.

import { type LockHolder, runningHolder } from "../host/lock.ts";
import { serviceOf } from "../host/process_unit.ts";

/** Every `--detach`ed change runs in a unit named so (detach.ts). */
export const changeUnitPrefix = "stratum-change-";

/** The lock's running holder, with the service it runs in (null: a terminal's session, a scope). */
export interface Holder extends LockHolder {
  readonly unit: string | null;
  /** Whether it is a `--detach`ed change (its unit is a `stratum-change-…` one). */
  readonly detached: boolean;
}

/** The process holding the migration lock at `lockPath` now, or undefined. */
export async function currentHolder(lockPath: string): Promise<Holder | undefined> {
  const h = await runningHolder(lockPath);
  if (!h) return undefined;
  const unit = (await serviceOf(h.pid)) ?? null;
  return { ...h, unit, detached: unit?.startsWith(changeUnitPrefix) === true };
}

/** How to follow it: its unit's journal. */
export function followUnit(unit: string): string {
  return `journalctl -u ${unit} -f`;
}

/** One line for a holder that runs in a unit, e.g. "running detached as U (pid N, since T): follow with …". */
export function unitLine(h: Holder & { unit: string }): string {
  return `running ${
    h.detached ? "detached " : ""
  }as ${h.unit} (pid ${h.pid}, since ${h.startedAt}): follow with ${followUnit(h.unit)}`;
}

/** The next action while `h` carries the change out: wait, and how to follow it. */
export function waitFor(h: Holder, again: string): string {
  return h.unit
    ? `wait: "${h.command}" is ${
      unitLine({ ...h, unit: h.unit })
    }; run ${again} again when it has finished`
    : `wait: pid ${h.pid} ("${h.command}", since ${h.startedAt}) holds the migration lock and is carrying it out; run ${again} again when it has finished`;
}
