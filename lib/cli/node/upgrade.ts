import { resolve } from "node:path";
import type { Command } from "commander";
import * as bundle from "../../bundle/mod.ts";
import * as node from "../../node/mod.ts";
import type { Deps } from "../deps.ts";
import { ErrUsage, ExitOK } from "../exit.ts";
import { isDir } from "../flags.ts";
import type { Context } from "../program.ts";
import { ranOf } from "../verdict.ts";
import { outcomeOf, report, reportRefused } from "../report.ts";
import { reportPlan } from "./plan.ts";
import {
  slotChangeArgs,
  type SlotChangeFlags,
  slotChangeFlags,
  slotChangeOptions,
} from "./slot_change.ts";
import { detach, detachOption, refuseDetachWith } from "../detach.ts";

/** `stratum node upgrade`: parses flags, calls node.upgrade, reports; --detach: detach.ts. */
export function upgradeCommand(group: Command, ctx: Context, deps: Deps): void {
  slotChangeOptions(
    group.command("upgrade")
      .requiredOption(
        "--bundle <dir>",
        "the new bundle: a directory with one subdirectory per mode",
      ),
    {
      requireSignature: "refuse an unsigned bundle even when no key is trusted",
      waitReady: "how long the new stack may take to become healthy",
    },
  )
    .option(
      "--allow-downgrade",
      "accept a bundle older (BUNDLE.json's version) than the one this node runs",
    )
    .addOption(detachOption())
    .description(
      "upgrade this node's stack to a new bundle in the mode it runs in, A/B through the other " +
        "slot, with the same write-ahead journal, rollback, resume and boot path as a mode change",
    )
    .addHelpText(
      "after",
      "\nThe new stack is built in the slot the node does not run, started once the running one\n" +
        "stopped, and kept only when it is healthy within --wait-ready; otherwise the running\n" +
        "version is started again (exit 1, rolled-back). The node's state directories are used\n" +
        "in place by both versions. The same bundle again: already-installed, exit 0. A bundle\n" +
        "that does not verify, or is not signed by a trusted key when keys are installed: exit 2,\n" +
        "nothing changed. After a crash or power cut, `stratum migrate resume` or the next boot\n" +
        "finishes or rolls back; `stratum migrate status` shows it, `stratum migrate ack` ends it.\n" +
        "\nExit codes: 0 upgraded or already installed, 1 rolled back, 2 bad input or refused,\n" +
        "3 needs attention, 75 a migration holds the lock. With --plan: the checks only, the\n" +
        "versions from → to, the steps and the downtime, nothing changed; 0 it would proceed\n" +
        "(or has nothing to do), else the code the upgrade would refuse with. With --detach:\n" +
        "the same checks here (2, 75, 3 as --plan; nothing to do runs here, exit 0), then the\n" +
        "upgrade runs as a transient unit, stratum-change-upgrade-….service: exit 0 once it\n" +
        "started (1 it could not start); follow it with journalctl -u UNIT -f.\n" +
        "\nExamples:\n  stratum node upgrade --bundle /srv/stratum-bundle-1.2 --plan\n" +
        "  stratum node upgrade --bundle /srv/stratum-bundle-1.2 --json",
    )
    .action(async (
      opts: SlotChangeFlags & { bundle: string; allowDowngrade?: boolean; detach?: boolean },
    ) => {
      const out = ctx.output(opts);
      if (!(await isDir(opts.bundle))) {
        throw new ErrUsage(`--bundle ${opts.bundle} is not a directory`);
      }
      const args = await slotChangeArgs(opts, out, deps, "stratum node upgrade");
      if (opts.detach) {
        refuseDetachWith(opts);
        const p = await node.planUpgrade({
          ...args,
          bundle: opts.bundle,
          allowDowngrade: opts.allowDowngrade === true,
        });
        if (p.outcome === "refused") {
          ctx.exitCode = reportRefused(
            out,
            "upgrade",
            p.refused ?? "",
            "nothing was changed; see the message",
            "node",
          );
          return;
        }
        // Nothing to do (the bundle runs): said here, as the upgrade would say it.
        if (p.outcome === "planned") {
          ctx.exitCode = await detach(out, deps, {
            command: "upgrade",
            what: "upgrade",
            paths: args.paths,
            args: [
              "node",
              "upgrade",
              "--bundle",
              // Absolute: the unit's working directory is /, not ours.
              resolve(opts.bundle),
              ...(opts.allowDowngrade ? ["--allow-downgrade"] : []),
              ...slotChangeFlags(opts),
            ],
          });
          return;
        }
      }
      if (opts.plan) {
        const p = await node.planUpgrade({
          ...args,
          bundle: opts.bundle,
          allowDowngrade: opts.allowDowngrade === true,
        });
        ctx.exitCode = reportPlan(out, p, "stratum node upgrade");
        return;
      }
      let r: node.Upgraded;
      try {
        r = await node.upgrade({
          ...args,
          bundle: opts.bundle,
          allowDowngrade: opts.allowDowngrade === true,
        });
      } catch (err) {
        if (!(err instanceof bundle.BundleError)) throw err;
        ctx.exitCode = reportRefused(
          out,
          "upgrade",
          err.message,
          "nothing was changed; see the message",
          "node",
        );
        return;
      }
      if (r.alreadyInstalled) {
        out.result(
          {
            command: "upgrade",
            outcome: "already-installed",
            exitCode: ExitOK,
            mode: r.mode,
            bundle: { digest: r.digest },
            nextAction: "none",
            journal: null,
          },
          () => [`upgrade: already-installed (bundle ${r.digest} runs); nothing changed`],
        );
        ctx.exitCode = ExitOK;
        return;
      }
      ctx.exitCode = report(
        out,
        "upgrade",
        outcomeOf(r.journal, r.result),
        r.journal,
        "node",
        ranOf("upgrade", r, r.from.mode),
      );
    });
}
