import type { Command } from "commander";
import * as node from "../../node/mod.ts";
import type { Deps } from "../deps.ts";
import type { Context } from "../program.ts";
import { ranOf } from "../verdict.ts";
import { detach, detachOption, refuseDetachWith } from "../detach.ts";
import { outcomeOf, report, reportRefused } from "../report.ts";
import { reportPlan } from "./plan.ts";
import {
  slotChangeArgs,
  type SlotChangeFlags,
  slotChangeFlags,
  slotChangeOptions,
} from "./slot_change.ts";

/** `stratum node rollback`: parses flags, calls node.rollback, reports; --detach: detach.ts. */
export function rollbackCommand(group: Command, ctx: Context, deps: Deps): void {
  slotChangeOptions(group.command("rollback"), {
    requireSignature: "refuse the kept release unsigned even when no key is trusted",
    waitReady: "how long the kept release may take to become healthy",
  })
    .addOption(detachOption())
    .description(
      "go back to the release the last upgrade replaced (kept on the node), A/B through the " +
        "other slot with the same journal, rollback, resume and boot path as an upgrade",
    )
    .addHelpText(
      "after",
      "\nWhen stratum node upgrade completes, the release it replaced is kept (one, per mode).\n" +
        "This command upgrades to it: it is verified again, built in the other slot, started\n" +
        "once the running one stopped, and kept only when healthy within --wait-ready; otherwise\n" +
        "the running release is started again (exit 1, rolled-back). It is a downgrade on purpose,\n" +
        "so no --allow-downgrade. Once it completes, the release it left is the kept one: a\n" +
        "second rollback goes forward again. Nothing kept: exit 2, nothing changed. stratum node\n" +
        "status names the kept release.\n" +
        "\nExit codes: 0 rolled back to the kept release, 1 it did not become healthy (the\n" +
        "running release runs again), 2 nothing kept or refused, 3 needs attention, 75 busy.\n" +
        "With --plan: the checks only, the versions from → to, the steps and the downtime,\n" +
        "nothing changed; 0 it would proceed, else the code the rollback would refuse with.\n" +
        "With --detach: the same checks here (2, 75, 3 as --plan), then the rollback runs as a\n" +
        "transient unit, stratum-change-rollback-….service: exit 0 once it started (1 it could\n" +
        "not start); follow it with journalctl -u UNIT -f.\n" +
        "\nExamples:\n  stratum node rollback --plan --json\n  stratum node rollback --json",
    )
    .action(async (opts: SlotChangeFlags & { detach?: boolean }) => {
      const out = ctx.output(opts);
      const args = await slotChangeArgs(opts, out, deps, "stratum node rollback");
      if (opts.detach) {
        refuseDetachWith(opts);
        const p = await node.planRollback(args);
        if (p.outcome === "refused") {
          ctx.exitCode = reportRefused(
            out,
            "rollback",
            p.refused ?? "",
            "nothing was changed; see the message",
            "node",
          );
          return;
        }
        ctx.exitCode = await detach(out, deps, {
          command: "rollback",
          what: "rollback",
          paths: args.paths,
          args: ["node", "rollback", ...slotChangeFlags(opts)],
        });
        return;
      }
      if (opts.plan) {
        ctx.exitCode = reportPlan(out, await node.planRollback(args), "stratum node rollback");
        return;
      }
      const r = await node.rollback(args);
      ctx.exitCode = report(
        out,
        "rollback",
        outcomeOf(r.journal, r.result),
        r.journal,
        "node",
        ranOf("rollback", r, r.from.mode),
      );
    });
}
