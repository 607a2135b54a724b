// The in-place step table of docs/migration.md, read as data: the tests take
// the expected order of calls and the write-ahead rule from the
// specification, never from a recording of the code's own run.

import type * as migrate from "../../lib/migrate/mod.ts";
import type { Call } from "./fake_node.ts";

export interface StepRow {
  /** The journal step recorded before the row's calls; undefined for preflight and download. */
  readonly step: migrate.Step | undefined;
  readonly calls: readonly Call[];
}

/** Parses the table under "## The steps, in order". */
export async function readStepTable(): Promise<StepRow[]> {
  const doc = await Deno.readTextFile(new URL("../../docs/migration.md", import.meta.url));
  const section = doc.split("## The steps, in order")[1]?.split("\n## ")[0] ?? "";
  const rows: StepRow[] = [];
  for (const line of section.split("\n")) {
    const cells = line.split("|").map((c) => c.trim());
    if (!/^\d+$/.test(cells[1] ?? "")) continue;
    const names = (cell: string | undefined) =>
      [...(cell ?? "").matchAll(/`([a-z-]+)`/g)].map((m) => m[1]!);
    const step = names(cells[4])[0] as migrate.Step | undefined;
    rows.push({ step, calls: names(cells[3]) as Call[] });
  }
  if (rows.length < 8) throw new Error("docs/migration.md: the step table is missing");
  return rows;
}

/** The calls of a clean run as the table orders them: each new step's record, then its calls. */
export function expectedCalls(rows: readonly StepRow[]): Call[] {
  const out: Call[] = [];
  let last: migrate.Step | undefined;
  for (const r of rows) {
    if (r.step !== undefined && r.step !== last) out.push(`save:${r.step}`);
    last = r.step ?? last;
    out.push(...r.calls);
  }
  return out;
}

/** Each forward call and the step that must be recorded before it. */
export function writeAheadRule(rows: readonly StepRow[]): Map<Call, migrate.Step> {
  const m = new Map<Call, migrate.Step>();
  for (const r of rows) {
    // discard-config also runs in a rollback, at any step: it is not a forward-only call.
    for (const c of r.calls) if (r.step && c !== "discard-config") m.set(c, r.step);
  }
  return m;
}

/** The journal steps of an in-place migration, in the order the table records them. */
export function journalSteps(rows: readonly StepRow[]): migrate.Step[] {
  return [...new Set(rows.flatMap((r) => (r.step ? [r.step] : [])))];
}

/** A node's isolation mode, as the crash chains below move it. */
type ChainMode = "host" | "nspawn";

/**
 * docs/migration.md's resume rule: from `awaiting-ready` on, a crashed run
 * finishes; before it, it rolls back.
 */
export function finishesAfter(steps: readonly string[]): (step: string) => boolean {
  return (step) => steps.indexOf(step) >= steps.indexOf("awaiting-ready");
}

/**
 * A crash after every journal step in both directions, chained on one node
 * from `start`: each starts in the mode the last left. Steps that roll back
 * keep the mode, so they come first; then one that finishes moves it.
 */
export function crashChain(
  steps: readonly string[],
  start: ChainMode,
): { from: ChainMode; step: string }[] {
  const finishes = finishesAfter(steps);
  const other = (m: ChainMode): ChainMode => m === "host" ? "nspawn" : "host";
  const out: { from: ChainMode; step: string }[] = [];
  let mode = start;
  const pending = new Map<ChainMode, string[]>([["host", [...steps]], ["nspawn", [...steps]]]);
  while (pending.get("host")!.length + pending.get("nspawn")!.length > 0) {
    const left = pending.get(mode)!;
    const next = left.find((s) => !finishes(s)) ?? left[0];
    if (next === undefined) {
      mode = other(mode);
      continue;
    }
    left.splice(left.indexOf(next), 1);
    out.push({ from: mode, step: next });
    if (finishes(next)) mode = other(mode);
  }
  return out;
}
