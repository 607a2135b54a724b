import type { Command } from "commander";
import * as isolation from "../../isolation/mod.ts";
import * as migrate from "../../migrate/mod.ts";
import { ExitAttention, ExitOK } from "../exit.ts";
import { currentHolder, unitLine, waitFor } from "../holder.ts";
import * as node from "../../node/mod.ts";
import type { Deps } from "../deps.ts";
import { type Common, common, rootPaths } from "../root_flags.ts";
import type { Context } from "../program.ts";
import { journalDoc, outcomeOf } from "../report.ts";

/** `stratum migrate status`. */
export function statusCommand(group: Command, ctx: Context, deps: Deps): void {
  common(group.command("status"))
    .description("show the migration journal and the node's applied mode")
    .action((opts: Common) => migrateStatus(opts, ctx, deps));
}

/** The body of `stratum migrate status`, for commander and for the fast path. */
export async function migrateStatus(opts: Common, ctx: Context, deps: Deps): Promise<void> {
  const out = ctx.output(opts);
  const paths = await rootPaths(opts.root);
  const store = new migrate.JournalStore(paths.journal);
  const j = await node.loadJournal(store);
  // A run, resume, upgrade... under way holds the lock: the journal is its
  // to finish, and resume would only find the lock busy (75). A change run
  // with --detach is named by its unit, whose journal shows its progress.
  const holder = await currentHolder(paths.lock);
  const applied = await isolation.readNodeConfig(paths.nodeConfig);
  const o = j ? outcomeOf(j) : undefined;
  const state = !j ? "none" : migrate.isTerminal(j.step) ? (o!.outcome) : "in-progress";
  const handoff = j?.strategy === migrate.StrategyReprovision && !migrate.isTerminal(j.step)
    ? {
      unit: node.handoffUnit,
      running: await deps.systemctl().isActive(node.handoffUnit).catch(() => false),
    }
    : null;
  // An upgrade keeps the mode: each slot's manifest names its version.
  const upgrade = j && j.from === j.to && j.sourceSlot && j.targetSlot
    ? {
      from: {
        slot: j.sourceSlot,
        digest: (await node.bundleDigest(paths.slot(j.sourceSlot))) ?? null,
      },
      to: {
        slot: j.targetSlot,
        digest: (await node.bundleDigest(paths.slot(j.targetSlot))) ?? null,
      },
    }
    : null;
  const next = holder
    ? waitFor(holder, "stratum migrate status")
    : !j
    ? "none"
    : migrate.isTerminal(j.step)
    ? o!.nextAction
    : handoff?.running
    ? `wait: ${node.handoffUnit} is carrying it out (journalctl -u ${node.handoffUnit} -f)`
    : "run `stratum migrate resume`";
  out.result(
    {
      outcome: state,
      applied: applied ?? null,
      journal: journalDoc(j),
      message: j?.message ?? null,
      handoff,
      upgrade,
      holder: holder ?? null,
      nextAction: next,
    },
    () => [
      `applied: ${
        applied
          ? `${applied.mode} mode, slot ${applied.slot}, node ${applied.node}`
          : "none (no node.json)"
      }`,
      j
        ? `migration: ${j.from} → ${j.to}, step ${j.step} (${state}), started ${j.startedAt.toISOString()}, updated ${j.updatedAt.toISOString()}${
          j.attempts ? `, ${j.attempts} attempts` : ""
        }`
        : "migration: none recorded",
      ...(upgrade
        ? [
          `upgrade: slot ${upgrade.from.slot} (${
            upgrade.from.digest ?? "gone"
          }) → slot ${upgrade.to.slot} (${upgrade.to.digest ?? "not built"})`,
        ]
        : []),
      ...(j?.message ? [`message: ${j.message}`] : []),
      ...(handoff
        ? [`handoff: ${handoff.unit} ${handoff.running ? "running" : "not running"}`]
        : []),
      ...(holder
        ? [`lock: held by pid ${holder.pid} since ${holder.startedAt}: ${holder.command}`]
        : []),
      ...(holder?.unit ? [`change: ${unitLine({ ...holder, unit: holder.unit })}`] : []),
      `next: ${next}`,
    ],
  );
  // A failed journal needs a person (docs/cli.md: 3), whoever asks.
  ctx.exitCode = j?.step === migrate.StepFailed ? ExitAttention : ExitOK;
}
