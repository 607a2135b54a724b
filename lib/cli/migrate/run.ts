import type { Command } from "commander";
import { Option } from "commander";
import * as migrate from "../../migrate/mod.ts";
import * as node from "../../node/mod.ts";
import type { Deps } from "../deps.ts";
import { parseDuration } from "../duration.ts";
import { ErrUsage, ExitOK, ExitUsage } from "../exit.ts";
import {
  checkMode,
  checkStrategy,
  type Common,
  common,
  isDir,
  lockOptions,
  rootPaths,
  strategyOption,
  toOption,
  waitLockOption,
} from "../flags.ts";
import type { Output } from "../output.ts";
import type { Context } from "../program.ts";
import { journalDoc, outcomeOf, report } from "../report.ts";

/** `stratum migrate run`: parses flags, calls node.migrateInPlace or node.startReprovision, reports. */
export function runCommand(group: Command, ctx: Context, deps: Deps): void {
  common(group.command("run"))
    .description("migrate this node to another isolation mode")
    .addOption(toOption())
    .addOption(strategyOption())
    .option(
      "--bundle <dir>",
      "bundle directory with one subdirectory per mode (default: the installed copy)",
    )
    .option(
      "--require-signature",
      "refuse an unsigned bundle even when no key is trusted (/etc/stratum/trust/*.pem)",
    )
    .option(
      "--allow-downgrade",
      "accept a bundle older (BUNDLE.json's version) than the one this node runs",
    )
    .option(
      "--wipe-state",
      "reprovision only: remove the node's state directories (etcd, kubelet, ...) in the reset, " +
        "so the node starts with empty data; without it a reprovision keeps them",
    )
    .addOption(waitLockOption())
    .addOption(
      new Option("--wait-ready <duration>", "how long the target may take to become healthy")
        .default("2m"),
    )
    .action(async (
      opts: Common & {
        to: string;
        strategy: string;
        bundle?: string;
        requireSignature?: boolean;
        allowDowngrade?: boolean;
        wipeState?: boolean;
        waitLock: string;
        waitReady: string;
      },
    ) => {
      const out = ctx.output(opts);
      const to = checkMode(opts.to);
      const strategy = checkStrategy(opts.strategy);
      const waitLockMs = parseDuration("--wait-lock", opts.waitLock, true);
      const waitReadyMs = parseDuration("--wait-ready", opts.waitReady);
      if (opts.wipeState && strategy !== migrate.StrategyReprovision) {
        throw new ErrUsage(
          "--wipe-state goes with --strategy reprovision: an in-place migration never removes the node's data",
        );
      }
      if (opts.bundle !== undefined && !(await isDir(opts.bundle))) {
        throw new ErrUsage(`--bundle ${opts.bundle} is not a directory`);
      }
      const paths = await rootPaths(opts.root);
      const common = {
        paths,
        systemctl: deps.systemctl(),
        to,
        bundle: opts.bundle,
        requireSignature: opts.requireSignature === true,
        allowDowngrade: opts.allowDowngrade === true,
        waitReadyMs,
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
          () => node.startReprovision({ ...common, wipeState: opts.wipeState === true }),
        );
        return;
      }
      const r = await node.migrateInPlace({ ...common, killSelf: deps.killSelf });
      ctx.exitCode = report(out, "run", outcomeOf(r.journal, r.result), r.journal);
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
    out.error(`migrate run: refused: ${err.message}`);
    out.result(
      {
        command: "run",
        outcome: "refused",
        exitCode: ExitUsage,
        message: err.message,
        nextAction: "fix what the message names and run again; nothing was changed",
        journal: null,
      },
      () => [`run: refused`, `message: ${err.message}`],
    );
    return ExitUsage;
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
