// What the migrate commands share: their dependencies, flags, checks, the
// lock, and the report every command ends with.

import { type Command, Option } from "commander";
import { messageOf } from "../../errors/mod.ts";
import * as host from "../../host/mod.ts";
import * as isolation from "../../isolation/mod.ts";
import * as migrate from "../../migrate/mod.ts";
import type * as node from "../../node/mod.ts";
import { ExitBusy, ExitOK, UsageError } from "../exit.ts";
import { journalDoc, type Outcome, outcomeOf } from "./report.ts";
import type { Output } from "../output.ts";
import { jsonOption } from "../program.ts";

/** What the migrate commands need from outside; main.ts builds the real ones. */
export interface MigrateDeps {
  readonly systemctl: () => host.Systemctl;
  /** STRATUM_FAILPOINT, a test aid (see lib/node/failpoint.ts). */
  readonly failpoint: string | undefined;
  /** Kills this process at once (the failpoint's crash). */
  readonly killSelf: () => void;
  /** How systemd runs this tool, for the boot unit's ExecStart. */
  readonly selfCommand: node.SelfCommand;
  /** Aborted on SIGINT/SIGTERM: the forward path stops and rolls back. */
  readonly interrupted: AbortSignal;
}

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

export async function appliedNode(paths: host.HostPaths): Promise<isolation.NodeConfig> {
  let cfg: isolation.NodeConfig | undefined;
  try {
    cfg = await isolation.readNodeConfig(paths.nodeConfig);
  } catch (err) {
    throw new UsageError(messageOf(err));
  }
  if (!cfg) {
    throw new UsageError(
      `${paths.nodeConfig} does not exist: this node runs no stratum stack to migrate`,
    );
  }
  return cfg;
}

export function nextFor(j: migrate.Journal): string {
  return migrate.isTerminal(j.step)
    ? "report it with `stratum migrate status`, then `stratum migrate ack`"
    : "run `stratum migrate resume`";
}

/** Runs `fn` under the migration lock; busy is exit 75 with the holder named. */
export async function locked(
  paths: host.HostPaths,
  out: Output,
  command: string,
  waitMs: number,
  fn: () => Promise<number>,
): Promise<number> {
  let lock: host.MigrationLock;
  try {
    lock = await host.MigrationLock.acquire(paths.lock, {
      command,
      waitMs,
      onWait: (h) =>
        out.log(
          `waiting up to ${waitMs / 1000} s for the migration lock${
            h ? ` held by pid ${h.pid} (${h.command})` : ""
          }`,
        ),
    });
  } catch (err) {
    if (err instanceof host.ErrBusy) {
      out.result(
        {
          outcome: "busy",
          holder: err.holder ?? null,
          message: err.message,
          nextAction: "try again when it has finished, or pass --wait-lock",
        },
        () => [],
      );
      out.error(err.message);
      return ExitBusy;
    }
    throw err;
  }
  try {
    return await fn();
  } finally {
    await lock.release();
  }
}

/**
 * The outcome of a resume: over a terminal journal it did nothing, which is
 * `nothing-to-do` (exit 0) except for a failed migration, which still needs
 * a person (exit 3). The journal is in the document either way.
 */
export function resumeOutcome(r: migrate.ResumeOutcome | undefined): Outcome {
  if (!r) return outcomeOf(undefined);
  if (r.acted) return outcomeOf(r.journal, r);
  const o = outcomeOf(r.journal);
  return o.outcome === "failed" ? o : {
    ...o,
    outcome: "nothing-to-do",
    exitCode: ExitOK,
    nextAction: `none: the migration already ended ${r.journal.step}; ${o.nextAction}`,
  };
}

export function report(
  out: Output,
  command: string,
  o: Outcome,
  journal?: migrate.Journal,
): number {
  if (o.exitCode !== ExitOK) {
    out.error(`migrate ${command}: ${o.outcome}${o.message ? `: ${o.message}` : ""}`);
  }
  out.result(
    { command, ...o, journal: journalDoc(journal) },
    () => [
      `${command}: ${o.outcome}`,
      ...(o.failedStep
        ? [
          `failed at: ${o.failedStep.action}${
            o.failedStep.step ? ` (journal step ${o.failedStep.step})` : ""
          }`,
        ]
        : []),
      ...(o.rollback !== "not-needed" ? [`rollback: ${o.rollback}`] : []),
      ...(o.message ? [`message: ${o.message}`] : []),
      `next: ${o.nextAction}`,
    ],
  );
  return o.exitCode;
}
