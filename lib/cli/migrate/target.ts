// The flags `migrate plan` and `migrate run` share — which mode, which
// strategy, which bundle and how it is checked, how long the target may take
// — declared and checked in one place, so a plan is made from the same
// command line, read the same way, as the run it shows.

import type { Command } from "commander";
import { Option } from "commander";
import type * as isolation from "../../isolation/mod.ts";
import * as migrate from "../../migrate/mod.ts";
import { parseDuration } from "../duration.ts";
import { ErrUsage } from "../exit.ts";
import {
  checkMode,
  checkStrategy,
  type Common,
  common,
  strategyOption,
  toOption,
} from "../flags.ts";

/** The flags of a migration's target, as commander gives them. */
export interface TargetFlags extends Common {
  to: string;
  strategy: string;
  bundle?: string;
  requireSignature?: boolean;
  allowDowngrade?: boolean;
  wipeState?: boolean;
  waitReady: string;
}

/** The target flags, checked. */
export interface Target {
  readonly to: isolation.Mode;
  readonly strategy: migrate.Strategy;
  readonly bundle: string | undefined;
  readonly requireSignature: boolean;
  readonly allowDowngrade: boolean;
  readonly wipeState: boolean;
  readonly waitReadyMs: number;
}

/** Adds --root, --json and the target flags to `cmd` (plan and run). */
export function targetCommand(cmd: Command): Command {
  return common(cmd)
    .addOption(toOption())
    .addOption(strategyOption())
    .option(
      "--bundle <dir>",
      "bundle directory with one subdirectory per mode (default: the installed copy)",
    )
    .option(
      "--require-signature",
      "refuse an unsigned bundle even when no key is trusted (/etc/stratum/trust/*.pem)",
    )
    .option(
      "--allow-downgrade",
      "accept a bundle older (BUNDLE.json's version) than the one this node runs",
    )
    .option(
      "--wipe-state",
      "reprovision only: remove the node's state directories (etcd, kubelet, ...) in the reset, " +
        "so the node starts with empty data; without it a reprovision keeps them",
    )
    .addOption(
      new Option("--wait-ready <duration>", "how long the target may take to become healthy")
        .default("2m"),
    );
}

/** Checks the target flags; bad input is an ErrUsage (exit 2). */
export function checkTarget(opts: TargetFlags): Target {
  const to = checkMode(opts.to);
  const strategy = checkStrategy(opts.strategy);
  const waitReadyMs = parseDuration("--wait-ready", opts.waitReady);
  if (opts.wipeState && strategy !== migrate.StrategyReprovision) {
    throw new ErrUsage(
      "--wipe-state goes with --strategy reprovision: an in-place migration never removes the node's data",
    );
  }
  return {
    to,
    strategy,
    bundle: opts.bundle,
    requireSignature: opts.requireSignature === true,
    allowDowngrade: opts.allowDowngrade === true,
    wipeState: opts.wipeState === true,
    waitReadyMs,
  };
}
