import { resolve } from "node:path";
import type { Command } from "commander";
import type * as host from "../../host/mod.ts";
import * as migrate from "../../migrate/mod.ts";
import * as node from "../../node/mod.ts";
import type { Deps } from "../deps.ts";
import { parseDuration } from "../duration.ts";
import { ErrUsage, ExitOK } from "../exit.ts";
import { isDir, lockOptions, rootPaths, waitLockOption } from "../flags.ts";
import type { Output } from "../output.ts";
import type { Context } from "../program.ts";
import { journalDoc, outcomeOf, report, reportRefused } from "../report.ts";
import { ranOf } from "../verdict.ts";
import { detach, detachOption, refuseDetachWith } from "../detach.ts";
import { checkTarget, type Target, targetCommand, type TargetFlags } from "./target.ts";

/**
 * `stratum migrate run`: parses flags, calls node.migrateInPlace or
 * node.startReprovision, reports; with --detach, starts it as a unit (detach.ts).
 */
export function runCommand(group: Command, ctx: Context, deps: Deps): void {
  targetCommand(group.command("run"))
    .description("migrate this node to another isolation mode")
    .addOption(waitLockOption())
    .addOption(detachOption())
    .action(async (opts: TargetFlags & { waitLock: string; detach?: boolean }) => {
      const out = ctx.output(opts);
      const waitLockMs = parseDuration("--wait-lock", opts.waitLock, true);
      const t = checkTarget(opts);
      const { to, strategy } = t;
      if (t.bundle !== undefined && !(await isDir(t.bundle))) {
        throw new ErrUsage(`--bundle ${t.bundle} is not a directory`);
      }
      const paths = await rootPaths(opts.root);
      const common = {
        paths,
        systemctl: deps.systemctl(),
        to,
        bundle: t.bundle,
        requireSignature: t.requireSignature,
        allowDowngrade: t.allowDowngrade,
        waitReadyMs: t.waitReadyMs,
        lock: lockOptions(out, `stratum migrate run --to ${to}`, waitLockMs),
        self: deps.selfCommand,
        failpoint: deps.failpoint,
        signal: deps.interrupted,
        log: (l: string) => out.log(l),
      };
      if (opts.detach) {
        ctx.exitCode = await detachRun(out, deps, opts, t, common);
        return;
      }
      if (strategy === migrate.StrategyReprovision) {
        ctx.exitCode = await reprovision(
          out,
          to,
          () => node.startReprovision({ ...common, wipeState: t.wipeState }),
        );
        return;
      }
      const r = await node.migrateInPlace({ ...common, killSelf: deps.killSelf });
      ctx.exitCode = report(
        out,
        "run",
        outcomeOf(r.journal, r.result),
        r.journal,
        "migrate",
        ranOf("migrate", r, to),
      );
    });
}

/**
 * `migrate run --detach`: the run's checks before its first change, here
 * (a refusal is exit 2, the lock held 75, nothing started), then the run
 * itself as a transient unit.
 */
async function detachRun(
  out: Output,
  deps: Deps,
  opts: TargetFlags & { waitLock: string },
  t: Target,
  common: { paths: host.HostPaths; lock: node.LockOptions },
): Promise<number> {
  if (t.strategy === migrate.StrategyReprovision) {
    throw new ErrUsage(
      `--detach goes with --strategy in-place: a reprovision hands off to ${node.handoffUnit} itself`,
    );
  }
  refuseDetachWith(opts);
  const refused = await node.migrationRefusal({ ...t, ...common });
  if (refused) {
    return reportRefused(out, "run", refused, "fix what the message names; nothing was changed");
  }
  return await detach(out, deps, {
    command: "run",
    what: `migrate-to-${t.to}`,
    paths: common.paths,
    args: [
      "migrate",
      "run",
      "--to",
      t.to,
      // Absolute: the unit's working directory is /, not ours.
      ...(t.bundle !== undefined ? ["--bundle", resolve(t.bundle)] : []),
      ...(t.requireSignature ? ["--require-signature"] : []),
      ...(t.allowDowngrade ? ["--allow-downgrade"] : []),
      "--wait-ready",
      opts.waitReady,
      "--wait-lock",
      opts.waitLock,
    ],
  });
}

/** Reports a reprovision's start: handed off (exit 0), or refused with nothing changed (exit 2). */
async function reprovision(
  out: Output,
  to: string,
  start: () => Promise<migrate.Journal>,
): Promise<number> {
  let journal: migrate.Journal;
  try {
    journal = await start();
  } catch (err) {
    if (!(err instanceof node.ErrReprovisionRefused)) throw err;
    return reportRefused(
      out,
      "run",
      err.message,
      "fix what the message names and run again; nothing was changed",
    );
  }
  const follow = [`journalctl -u ${node.handoffUnit} -f`, "stratum migrate status"];
  out.result(
    {
      command: "run",
      outcome: "handed-off",
      exitCode: ExitOK,
      unit: node.handoffUnit,
      follow,
      message: null,
      nextAction:
        `the node is being reset and bootstrapped in ${to} mode by ${node.handoffUnit}; follow it with: ${
          follow.join(" ; ")
        }`,
      journal: journalDoc(journal),
    },
    () => [
      `run: handed off to ${node.handoffUnit} (reset, then bootstrap in ${to} mode)`,
      ...follow.map((f) => `follow: ${f}`),
    ],
  );
  return ExitOK;
}
