// How `node upgrade|rollback|install --plan` reports: one JSON document
// (versions from → to, the steps, the downtime, the exit code the run would
// give) or a few human lines. A held lock (75) and an unreadable journal or
// node.json (3) never get here: they reject as the run's would.

import * as node from "../../node/mod.ts";
import { formatDuration } from "../duration.ts";
import { ExitOK, ExitUsage } from "../exit.ts";
import type { Output } from "../output.ts";

/** The --plan flag's help. */
export const planHelp =
  "check everything the command would check before its first change, and print the versions " +
  "from → to, the steps and the downtime; changes nothing; exits as the command would refuse (2, 75, 3) or 0";

/** "1.0.0 (slot a)" or the digest's head when the bundle names no version. */
function named(r: node.Release | null): string {
  if (!r) return "nothing";
  const what = r.version ?? (r.digest ? `bundle ${r.digest.slice(0, 12)}` : "an unknown bundle");
  return `${what} (${r.mode} mode, slot ${r.slot})`;
}

/** Reports `p` and returns the exit code the run would give. */
export function reportPlan(out: Output, p: node.ChangePlan, run: string): number {
  const exitCode = p.outcome === "refused" ? ExitUsage : ExitOK;
  const { command } = p;
  const nextAction = p.outcome === "refused"
    ? "fix what the message names; nothing was changed"
    : p.outcome === "nothing-to-do"
    ? "none: the command would change nothing"
    : `${run} (the same flags, without --plan)`;
  const d = p.downtime;
  const downtime = d.startsAt === null
    ? command === "install" && p.outcome === "planned"
      ? "none: no stack runs on this node yet"
      : "none"
    : `from ${d.startsAt} until the new stack is healthy: at most ${
      formatDuration(d.healthWaitMs)
    } of health wait, then it rolls back to the running release${
      d.lastMs !== null ? `; the last ${command} here took ${node.seconds(d.lastMs)} in all` : ""
    }`;
  if (p.outcome === "refused") out.error(`node ${command} --plan: refused: ${p.refused}`);
  out.result(
    {
      command,
      plan: true,
      outcome: p.outcome,
      exitCode,
      from: p.from,
      to: p.to,
      steps: p.steps,
      downtime: d,
      ...(p.keyId ? { keyId: p.keyId } : {}),
      ...(p.freeBytes !== undefined ? { freeBytes: p.freeBytes } : {}),
      warnings: p.warnings,
      message: p.refused ?? null,
      nextAction,
    },
    () =>
      p.outcome === "refused"
        ? [`${command} plan: refused: ${p.refused}`, "nothing was changed"]
        : p.outcome === "nothing-to-do"
        ? [`${command} plan: nothing to do: ${named(p.to)} is what runs; nothing was changed`]
        : [
          `${command} plan: ${named(p.from)} → ${named(p.to)}`,
          `steps: ${p.steps.map((s) => s.step.replace(/[()]/g, "")).join(", ")}`,
          `downtime: ${downtime}`,
          ...p.warnings.map((w) => `warning: ${w}`),
          `preflight passed; nothing was changed (run it: ${run})`,
        ],
  );
  return exitCode;
}
