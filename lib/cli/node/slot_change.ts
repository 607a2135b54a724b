// The flags `node upgrade` and `node rollback` share — both build a release
// in the other slot through the same journal — declared and read in one
// place, with the options both hand to lib/node.

import type { Command } from "commander";
import type * as node from "../../node/mod.ts";
import type { Deps } from "../deps.ts";
import { parseDuration } from "../duration.ts";
import { lockOptions, rootPaths } from "../flags.ts";
import type { Output } from "../output.ts";
import { jsonOption } from "../program.ts";
import { planHelp } from "./plan.ts";

/** The shared flags, as commander gives them. */
export interface SlotChangeFlags {
  root: string;
  requireSignature?: boolean;
  waitReady: string;
  waitLock: string;
  json?: boolean;
  plan?: boolean;
}

/** What each command says its --require-signature and --wait-ready are about. */
export interface SlotChangeHelp {
  readonly requireSignature: string;
  readonly waitReady: string;
}

/** Adds --root, --require-signature, --wait-ready, --wait-lock and --json to `cmd`. */
export function slotChangeOptions(cmd: Command, help: SlotChangeHelp): Command {
  return cmd
    .option("--root <dir>", "prefix for every host path (tests use a scratch tree)", "/")
    .option("--require-signature", help.requireSignature)
    .option("--wait-ready <duration>", help.waitReady, "2m")
    .option("--wait-lock <duration>", "wait this long for a migration's lock", "0s")
    .option("--plan", planHelp)
    .addOption(jsonOption());
}

/** The shared flags as a detached change's unit gets them (detach.ts): no --json, --plan, --root. */
export function slotChangeFlags(opts: SlotChangeFlags): string[] {
  return [
    ...(opts.requireSignature ? ["--require-signature"] : []),
    "--wait-ready",
    opts.waitReady,
    "--wait-lock",
    opts.waitLock,
  ];
}

/** Checks the shared flags: the options node.upgrade and node.rollback both take. */
export async function slotChangeArgs(
  opts: SlotChangeFlags,
  out: Output,
  deps: Deps,
  command: string,
): Promise<node.RollbackOptions> {
  const waitReadyMs = parseDuration("--wait-ready", opts.waitReady);
  const waitLockMs = parseDuration("--wait-lock", opts.waitLock, true);
  const paths = await rootPaths(opts.root);
  return {
    paths,
    systemctl: deps.systemctl(),
    requireSignature: opts.requireSignature === true,
    waitReadyMs,
    lock: lockOptions(out, command, waitLockMs),
    self: deps.selfCommand,
    signal: deps.interrupted,
    log: (l) => out.log(l),
    failpoint: deps.failpoint,
    killSelf: deps.killSelf,
  };
}
