import type { Command } from "commander";
import type { Context } from "../program.ts";
import { bootCommand } from "./boot.ts";
import type { Deps } from "../deps.ts";
import { historyCommand } from "./history.ts";
import { installCommand } from "./install.ts";
import { repairCommand } from "./repair.ts";
import { rollbackCommand } from "./rollback.ts";
import { statusCommand } from "./status.ts";
import { upgradeCommand } from "./upgrade.ts";

/** `stratum node install|status|boot|upgrade|rollback|repair|history`: this node's own stack. */
export function nodeGroup(deps: Deps) {
  return (program: Command, ctx: Context): void => {
    const group = program
      .command("node")
      .description(
        "this node's own stack: first install, upgrade, status, and what runs at every boot",
      );
    installCommand(group, ctx, deps);
    statusCommand(group, ctx, deps);
    bootCommand(group, ctx, deps);
    upgradeCommand(group, ctx, deps);
    rollbackCommand(group, ctx, deps);
    repairCommand(group, ctx, deps);
    historyCommand(group, ctx);
  };
}
