// The flags and checks the node and migrate commands share, and how they
// take the migration lock.

import { Option } from "commander";
import * as isolation from "../isolation/mod.ts";
import * as migrate from "../migrate/mod.ts";
import type * as node from "../node/mod.ts";
import { ErrUsage } from "./exit.ts";
import type { Output } from "./output.ts";
export { type Common, common, isDir, rootPaths } from "./root_flags.ts";

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
    throw new ErrUsage(`unknown mode ${JSON.stringify(s)}: want ${isolation.modes.join(" or ")}`);
  }
  return s;
}

export function checkStrategy(s: string): migrate.Strategy {
  if (!migrate.isStrategy(s)) {
    throw new ErrUsage(
      `unknown strategy ${JSON.stringify(s)}: want ${migrate.strategies.join(" or ")}`,
    );
  }
  return s;
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
