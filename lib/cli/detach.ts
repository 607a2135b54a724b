// `--detach` on `migrate run`, `node upgrade` and `node rollback`: once the
// command's own checks passed in the foreground (bad input, a refusal, the
// lock held: exit 2 or 75 there, nothing started), the same command line,
// without --detach, runs as a transient systemd unit, and the command
// returns with the unit's name and how to follow it. The change then
// outlives the operator's session, and its output is the unit's journal.
// Not the default: cloud-init and the playbooks act on the foreground exit
// code of the change itself (docs/cli.md).

import { Option } from "commander";
import { ErrBusy, lockHeld, readHolder } from "../host/lock.ts";
import type * as host from "../host/mod.ts";
import * as node from "../node/mod.ts";
import type { Deps } from "./deps.ts";
import { ErrUsage, ExitFailed, ExitOK } from "./exit.ts";
import { changeUnitPrefix, followUnit } from "./holder.ts";
import type { Output } from "./output.ts";

/** The --detach flag. */
export function detachOption(): Option {
  return new Option(
    "--detach",
    "check as the command does, then run it as a transient systemd unit (stratum-change-…) and " +
      "return at once with the unit's name; follow it with journalctl -u UNIT -f and stratum migrate status",
  );
}

/** --detach with a flag it cannot go with: bad input (exit 2), nothing started. */
export function refuseDetachWith(opts: { root: string; plan?: boolean }): void {
  if (opts.plan) throw new ErrUsage("--plan changes nothing: it does not go with --detach");
  if (opts.root !== "/") {
    throw new ErrUsage("--detach runs the change under this node's systemd: it takes no --root");
  }
}

/**
 * The unit a detached change runs in: what it does and when it started
 * (UTC, to the second), e.g. `stratum-change-upgrade-20261130T224054Z.service`.
 * Two in the same second: systemd refuses the second name (exit 1).
 */
export function changeUnit(what: string, now = new Date()): string {
  const at = now.toISOString().replace(/[-:]/g, "").replace(/\.\d+Z$/, "Z");
  return `${changeUnitPrefix}${what}-${at}.service`;
}

/** A change whose checks passed, to run detached. */
export interface Detached {
  /** "run", "upgrade", "rollback": the report's `command`. */
  readonly command: string;
  /** In the unit's name: "migrate-to-nspawn", "upgrade". */
  readonly what: string;
  /** stratum's arguments in the unit: the command line, without --detach and --json. */
  readonly args: readonly string[];
  readonly paths: host.HostPaths;
}

/**
 * Starts `d` as a transient unit and reports it: exit 0 once systemd
 * started it. A unit that does not start is exit 1 with systemd-run's
 * reason, or host.ErrBusy (75) when another change took the lock meanwhile.
 */
export async function detach(out: Output, deps: Deps, d: Detached): Promise<number> {
  const unit = changeUnit(d.what);
  const runs = ["stratum", ...d.args].join(" ");
  try {
    await node.startTransient({
      unit,
      description: `Stratum: ${runs}`,
      self: deps.selfCommand,
      args: d.args,
      properties: [
        // Started means exec'd: a self path that cannot run fails here.
        "Type=exec",
        // A stop (systemctl stop) is SIGTERM to stratum alone, which rolls
        // back with the systemctl calls it runs; main.ts exits at the latest
        // 60 s after it, before the rest of the unit is killed.
        "KillMode=mixed",
        "TimeoutStopSec=2min",
      ],
      failpoint: deps.failpoint,
      signal: deps.interrupted,
    });
  } catch (err) {
    if (!(err instanceof node.ErrUnitNotStarted)) throw err;
    if (await lockHeld(d.paths.lock)) {
      throw new ErrBusy(d.paths.lock, await readHolder(d.paths.lock));
    }
    out.error(`${d.command}: not detached: ${err.message}; nothing was changed`);
    out.result(
      {
        command: d.command,
        outcome: "not-started",
        exitCode: ExitFailed,
        unit,
        message: err.message,
        nextAction: "nothing was changed: see the message, then run it again",
        journal: null,
      },
      () => [`${d.command}: not started`, `message: ${err.message}`],
    );
    return ExitFailed;
  }
  const follow = [followUnit(unit), "stratum migrate status"];
  out.result(
    {
      command: d.command,
      outcome: "detached",
      exitCode: ExitOK,
      unit,
      runs,
      follow,
      message: null,
      nextAction: `${unit} carries it out; follow it with: ${follow.join(" ; ")}`,
      journal: null,
    },
    () => [`${d.command}: detached as ${unit}: ${runs}`, ...follow.map((f) => `follow: ${f}`)],
  );
  return ExitOK;
}
