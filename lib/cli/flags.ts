// The flags and checks the node and migrate commands share, and how they
// take the migration lock.

import { type Command, Option } from "commander";
import * as host from "../host/mod.ts";
import * as isolation from "../isolation/mod.ts";
import * as migrate from "../migrate/mod.ts";
import type * as node from "../node/mod.ts";
import { UsageError } from "./exit.ts";
import type { Output } from "./output.ts";
import { jsonOption } from "./program.ts";

export interface Common {
  root: string;
  json?: boolean;
}

export function common(c: Command): Command {
  return c.option("--root <dir>", "prefix for every host path (tests use a scratch tree)", "/")
    .addOption(jsonOption());
}

export function toOption(): Option {
  return new Option("--to <mode>", `target isolation mode (${isolation.modes.join(", ")})`)
    .makeOptionMandatory();
}

export function strategyOption(): Option {
  return new Option("--strategy <strategy>", "in-place (blue/green slots) or reprovision").default(
    "in-place",
  );
}

export function waitLockOption(): Option {
  return new Option(
    "--wait-lock <duration>",
    "wait this long for another migration's lock (default: fail at once, exit 75)",
  )
    .default("0s");
}

export function checkMode(s: string): isolation.Mode {
  if (!isolation.isMode(s)) {
    throw new UsageError(`unknown mode ${JSON.stringify(s)}: want ${isolation.modes.join(" or ")}`);
  }
  return s;
}

export function checkStrategy(s: string): migrate.Strategy {
  if (!migrate.isStrategy(s)) {
    throw new UsageError(
      `unknown strategy ${JSON.stringify(s)}: want ${migrate.strategies.join(" or ")}`,
    );
  }
  return s;
}

export async function isDir(p: string): Promise<boolean> {
  return await Deno.stat(p).then((s) => s.isDirectory, () => false);
}

export async function rootPaths(root: string): Promise<host.HostPaths> {
  if (!(await isDir(root))) throw new UsageError(`--root ${root} is not a directory`);
  return host.hostPaths(root);
}

/** The lock options of a use case: its command line, the wait, and a line while it waits. */
export function lockOptions(out: Output, command: string, waitMs: number): node.LockOptions {
  return {
    command,
    waitMs,
    onWait: (h) =>
      out.log(
        `waiting up to ${waitMs / 1000} s for the migration lock${
          h ? ` held by pid ${h.pid} (${h.command})` : ""
        }`,
      ),
  };
}
