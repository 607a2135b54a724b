import type { Command } from "commander";
import * as bundle from "../../bundle/mod.ts";
import * as node from "../../node/mod.ts";
import type { Deps } from "../deps.ts";
import { ErrUsage, ExitOK } from "../exit.ts";
import { isDir } from "../flags.ts";
import type { Context } from "../program.ts";
import { ranOf } from "../verdict.ts";
import { outcomeOf, report, reportRefused } from "../report.ts";
import { slotChangeArgs, type SlotChangeFlags, slotChangeOptions } from "./slot_change.ts";

/** `stratum node repair`: parses flags, calls node.repair, reports. */
export function repairCommand(group: Command, ctx: Context, deps: Deps): void {
  slotChangeOptions(
    group.command("repair")
      .requiredOption(
        "--bundle <dir>",
        "the operator's copy of the release this node runs: a directory with one subdirectory per mode",
      ),
    {
      requireSignature: "refuse an unsigned bundle even when no key is trusted",
      waitReady: "how long the rebuilt stack may take to become healthy",
    },
  )
    .description(
      "rebuild the release this node runs from the operator's copy of it, when its files no " +
        "longer match what was signed, A/B through the other slot with an upgrade's journal, " +
        "rollback, resume and boot path",
    )
    .addHelpText(
      "after",
      "\nFor a damaged release: `stratum node status --verify` says NOT verified, and\n" +
        "`stratum node boot` says damaged (exit 3) and does not start it. The bundle must verify\n" +
        "(signature, every file's hash) and be the release that runs (the same manifest digest);\n" +
        "another release is an upgrade (exit 2, nothing changed: `stratum node upgrade`). It is\n" +
        "copied, built in the slot the node does not run, started once the running one stopped,\n" +
        "and kept only when healthy within --wait-ready (exit 1, rolled-back, otherwise). The\n" +
        "release kept for `stratum node rollback` stays kept. A release whose every file matches:\n" +
        "nothing to repair, exit 0, nothing changed. After a crash or power cut, `stratum migrate\n" +
        "resume` or the next boot finishes or rolls back, as for an upgrade.\n" +
        "\nExit codes: 0 repaired or nothing to repair, 1 rolled back, 2 bad input, another release\n" +
        "or refused, 3 needs attention, 75 a migration holds the lock.\n" +
        "\nExamples:\n  stratum node repair --bundle /srv/stratum-bundle-1.2\n" +
        "  stratum node repair --bundle /srv/stratum-bundle-1.2 --json",
    )
    .action(async (opts: SlotChangeFlags & { bundle: string }) => {
      const out = ctx.output(opts);
      if (!(await isDir(opts.bundle))) {
        throw new ErrUsage(`--bundle ${opts.bundle} is not a directory`);
      }
      const args = await slotChangeArgs(opts, out, deps, "stratum node repair");
      let r: node.Repaired;
      try {
        r = await node.repair({ ...args, bundle: opts.bundle });
      } catch (err) {
        if (!(err instanceof bundle.BundleError)) throw err;
        ctx.exitCode = reportRefused(
          out,
          "repair",
          err.message,
          "nothing was changed; see the message",
          "node",
        );
        return;
      }
      if (r.intact) {
        out.result(
          {
            command: "repair",
            outcome: "nothing-to-repair",
            exitCode: ExitOK,
            mode: r.mode,
            bundle: { digest: r.digest, version: r.version ?? null },
            nextAction: "none",
            journal: null,
          },
          () => [
            `repair: nothing-to-repair (release ${
              r.version ?? "?"
            }, bundle ${r.digest}, every file matches); nothing changed`,
          ],
        );
        ctx.exitCode = ExitOK;
        return;
      }
      ctx.exitCode = report(
        out,
        "repair",
        outcomeOf(r.journal, r.result),
        r.journal,
        "node",
        ranOf("repair", r, r.from.mode),
      );
    });
}
