import type { Command } from "commander";
import { Option } from "commander";
import * as node from "../../node/mod.ts";
import type { Deps } from "../deps.ts";
import { parseDuration } from "../duration.ts";
import { type Common, common, lockOptions, rootPaths, waitLockOption } from "../flags.ts";
import type { Context } from "../program.ts";
import { report, resumeOutcome } from "../report.ts";

/** `stratum migrate resume`: parses flags, calls node.resume, reports. */
export function resumeCommand(group: Command, ctx: Context, deps: Deps): void {
  common(group.command("resume"))
    .description(
      "finish or roll back a migration a crash interrupted; with no journal, do nothing (safe at every boot)",
    )
    .addOption(waitLockOption())
    .addOption(
      new Option("--wait-ready <duration>", "how long the target may take to become healthy")
        .default("2m"),
    )
    .action(async (opts: Common & { waitLock: string; waitReady: string }) => {
      const out = ctx.output(opts);
      const waitLockMs = parseDuration("--wait-lock", opts.waitLock, true);
      const waitReadyMs = parseDuration("--wait-ready", opts.waitReady);
      const paths = await rootPaths(opts.root);
      const r = await node.resume({
        paths,
        systemctl: deps.systemctl(),
        waitReadyMs,
        lock: lockOptions(out, "stratum migrate resume", waitLockMs),
        signal: deps.interrupted,
        log: (l) => out.log(l),
        self: deps.selfCommand,
        failpoint: deps.failpoint,
        killSelf: deps.killSelf,
      });
      ctx.exitCode = report(out, "resume", resumeOutcome(r), r?.journal);
    });
}
