import type { Command } from "commander";
import type { Context } from "../program.ts";
import { ackCommand } from "./ack.ts";
import { planCommand } from "./plan.ts";
import { resumeCommand } from "./resume.ts";
import { runCommand } from "./run.ts";
import type { Deps } from "../deps.ts";
import { statusCommand } from "./status.ts";

/** `stratum migrate plan|run|resume|status|ack`, one module per command. */
export function migrateGroup(deps: Deps) {
  return (program: Command, ctx: Context): void => {
    const group = program.command("migrate").description(
      "move this node between isolation modes (host, nspawn) through blue/green slots, with a write-ahead journal and automatic rollback",
    ).addHelpText(
      "after",
      "\nA typical migration:\n" +
        "  stratum migrate plan --to nspawn --bundle /srv/stratum-bundle   # changes nothing\n" +
        "  stratum migrate run  --to nspawn --bundle /srv/stratum-bundle\n" +
        "  stratum migrate status\n" +
        "  stratum migrate ack                                             # once reported\n" +
        "After a crash or power loss, `stratum migrate resume` finishes or rolls back;\n" +
        "at every boot stratum-boot.service does it before starting the node stack\n" +
        "(`stratum node boot`). See docs/migration.md.",
    );

    planCommand(group, ctx, deps);
    runCommand(group, ctx, deps);
    resumeCommand(group, ctx, deps);
    statusCommand(group, ctx, deps);
    ackCommand(group, ctx, deps);
  };
}
