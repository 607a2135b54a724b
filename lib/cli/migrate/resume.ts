import type { Command } from "commander";
import { Option } from "commander";
import { parseDuration } from "../duration.ts";
import { resumeRecorded } from "./resume_recorded.ts";
import type { Context } from "../program.ts";
import {
  type Common,
  common,
  locked,
  type MigrateDeps,
  report,
  resumeOutcome,
  rootPaths,
  waitLockOption,
} from "./shared.ts";

/** `stratum migrate resume`. */
export function resumeCommand(group: Command, ctx: Context, deps: MigrateDeps): void {
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
      ctx.exitCode = await locked(paths, out, "stratum migrate resume", waitLockMs, async () => {
        const r = await resumeRecorded({
          paths,
          systemctl: deps.systemctl(),
          waitReadyMs,
          signal: deps.interrupted,
          log: (l) => out.log(l),
          self: deps.selfCommand,
          failpoint: deps.failpoint,
          killSelf: deps.killSelf,
        });
        return report(out, "resume", resumeOutcome(r), r?.journal);
      });
    });
}
