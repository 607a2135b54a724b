import type { Command } from "commander";
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
import { checkTarget, targetCommand, type TargetFlags } from "./target.ts";

/** `stratum migrate run`: parses flags, calls node.migrateInPlace or node.startReprovision, reports. */
export function runCommand(group: Command, ctx: Context, deps: Deps): void {
  targetCommand(group.command("run"))
    .description("migrate this node to another isolation mode")
    .addOption(waitLockOption())
    .action(async (opts: TargetFlags & { waitLock: string }) => {
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
