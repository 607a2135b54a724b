import type { Command } from "commander";
import * as node from "../../node/mod.ts";
import type { Deps } from "../deps.ts";
import { parseDuration } from "../duration.ts";
import { ExitOK } from "../exit.ts";
import { type Common, common, lockOptions, rootPaths, waitLockOption } from "../flags.ts";
import type { Context } from "../program.ts";
import { journalDoc } from "../report.ts";

/** `stratum migrate ack`: parses flags, calls node.ack, reports. */
export function ackCommand(group: Command, ctx: Context, _deps: Deps): void {
  common(group.command("ack"))
    .description(
      "remove a finished journal (complete, rolled-back, failed, bootstrapped) once its outcome was reported",
    )
    .addOption(waitLockOption())
    .action(async (opts: Common & { waitLock: string }) => {
      const out = ctx.output(opts);
      const waitLockMs = parseDuration("--wait-lock", opts.waitLock, true);
      const paths = await rootPaths(opts.root);
      const j = await node.ack({
        paths,
        lock: lockOptions(out, "stratum migrate ack", waitLockMs),
      });
      if (!j) {
        out.result(
          { outcome: "nothing-to-do", nextAction: "none" },
          () => ["No migration journal: nothing to acknowledge"],
        );
      } else {
        out.result(
          { outcome: "acknowledged", journal: journalDoc(j), nextAction: "none" },
          () => [
            `Acknowledged the ${j.from} → ${j.to} migration that ended ${j.step}; journal removed`,
          ],
        );
      }
      ctx.exitCode = ExitOK;
    });
}
