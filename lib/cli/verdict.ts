// The last line of a migration, upgrade, rollback or repair (issue 38 item
// 7): what the node runs now, from what, and how long it was down, so that
// an operator reads the result without reading the journal.

import type * as isolation from "../isolation/mod.ts";
import * as node from "../node/mod.ts";
import type { Outcome } from "./report.ts";

/** What a run measured, for its verdict and its JSON document. */
export interface Ran {
  readonly event: "migrate" | "upgrade" | "rollback" | "repair";
  readonly from: isolation.Mode;
  readonly to: isolation.Mode;
  /** See node.Migrated.downtimeMs. */
  readonly downtimeMs: number | null;
  readonly versions: { readonly from: string | null; readonly to: string | null };
}

/** The run as node.Migrated reports it. */
export function ranOf(event: Ran["event"], m: node.Migrated, to: isolation.Mode): Ran {
  return { event, from: m.from.mode, to, downtimeMs: m.downtimeMs, versions: m.versions };
}

/**
 * One line: `upgrade complete: 1.0.0 → 2.0.0, down 1.2 s`,
 * `migrate complete: host → nspawn (1.0.0), down 3.4 s`,
 * `upgrade rolled back: still 1.0.0 (2.0.0 failed at wait-ready), down 2.1 s`.
 */
export function verdict(r: Ran, o: Outcome): string {
  const from = r.versions.from ?? "?";
  const to = r.versions.to ?? "?";
  const down = r.downtimeMs === null ? "" : `, down ${node.seconds(r.downtimeMs)}`;
  const modeChange = r.from !== r.to;
  const change = modeChange
    ? `${r.from} → ${r.to} (${r.versions.to === null || from === to ? from : `${from} → ${to}`})`
    : r.event === "repair"
    ? `${from} rebuilt`
    : `${from} → ${to}`;
  const still = modeChange ? `${r.from} (${from})` : from;
  switch (o.outcome) {
    case "complete":
      return `${r.event} complete: ${change}${down}`;
    case "rolled-back": {
      const why = o.failedStep
        ? ` (${modeChange ? r.to : to} failed at ${o.failedStep.action})`
        : "";
      return `${r.event} rolled back: still ${still}${why}${down}`;
    }
    case "refused":
      return `${r.event} refused: still ${still}, nothing changed`;
    case "failed":
      return `${r.event} failed: ${change}, neither stack is known to run${down}`;
    default:
      return `${r.event} ${o.outcome}: ${change}${down}`;
  }
}
