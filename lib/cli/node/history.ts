import type { Command } from "commander";
import * as node from "../../node/mod.ts";
import { ErrUsage, ExitOK } from "../exit.ts";
import { type Common, common, rootPaths } from "../root_flags.ts";
import type { Context } from "../program.ts";

/** `stratum node history`: the node's durable record, newest last. */
export function historyCommand(group: Command, ctx: Context): void {
  common(group.command("history"))
    .description(
      "what happened to this node: every install, migration, upgrade, rollback, resume and " +
        "boot resolution, with its outcome (kept after migrate ack)",
    )
    .option("--limit <n>", "show only the newest N events", "20")
    .addHelpText(
      "after",
      "\nRead from /var/lib/stratum/history.jsonl (one JSON document a line, bounded in size;\n" +
        "a line torn by a power cut is skipped). Exit code 0; 2 on a bad --limit.\n" +
        "\nExamples:\n  stratum node history\n  stratum node history --limit 100 --json",
    )
    .action(async (opts: Common & { limit: string }) => {
      const out = ctx.output(opts);
      if (!/^[1-9][0-9]{0,6}$/.test(opts.limit)) {
        throw new ErrUsage(`--limit ${opts.limit}: want a whole number from 1 to 9999999`);
      }
      const paths = await rootPaths(opts.root);
      const events = await node.readHistory(paths, Number(opts.limit));
      const place = (p: node.Place | undefined) =>
        p
          ? `${p.mode}${p.slot ? `/${p.slot}` : ""}${p.version ? ` ${p.version}` : ""}${
            p.digest ? ` (${p.digest.slice(0, 12)})` : ""
          }`
          : "-";
      out.result(
        { outcome: "listed", events, nextAction: "none" },
        () =>
          events.length === 0
            ? ["no history recorded on this node"]
            : events.map((e) =>
              `${e.endedAt}  ${e.event.padEnd(11)} ${e.from ? `${place(e.from)} → ` : ""}${
                place(e.to)
              }  ${e.outcome}${e.failedStep ? ` at ${e.failedStep}` : ""}${
                e.message ? `: ${e.message}` : ""
              }`
            ),
      );
      ctx.exitCode = ExitOK;
    });
}
