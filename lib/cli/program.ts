import config from "../../deno.json" with { type: "json" };
import { Command, CommanderError, Option } from "commander";
import { messageOf } from "../errors/mod.ts";
import * as host from "../host/mod.ts";
import * as isolation from "../isolation/mod.ts";
import * as migrate from "../migrate/mod.ts";
import * as node from "../node/mod.ts";
import { ExitAttention, ExitBusy, ExitUsage, UsageError } from "./exit.ts";
import { Output } from "./output.ts";

/** The version, from deno.json: the one place it is set. */
export const version: string = config.version;

/**
 * What `stratum --version` prints: the version and the git commit it was
 * built from (the launcher sets STRATUM_COMMIT; a checkout says so).
 */
export function versionLine(): string {
  const commit = Deno.env.get("STRATUM_COMMIT");
  return `stratum ${version} (${commit ? `commit ${commit}` : "source checkout"})`;
}

/** A command group: adds its subcommands to the program. */
export type Group = (program: Command, ctx: Context) => void;

/** What every command action gets. */
export interface Context {
  /** Set by an action: the process's exit code. */
  exitCode: number;
  /** The output for the --json flag the action was called with. */
  output(opts: { json?: boolean }): Output;
}

/** The --json flag every command takes. */
export function jsonOption(): Option {
  return new Option("--json", "print one JSON document on stdout; logs go to stderr");
}

/**
 * Parses argv and runs the command. Resolves with the exit code; never
 * exits. Flag and argument errors are exit 2 with commander's one-line
 * message; a UsageError or a node.ErrBadRequest from an action is exit 2
 * too, and host.ErrBusy (another command holds the migration lock) exit 75.
 */
export async function run(argv: string[], groups: Group[]): Promise<number> {
  const ctx: Context = { exitCode: 0, output: (o) => new Output(o.json === true) };
  const out = new Output(false);
  // Flag errors happen before an action sees --json: look for it ourselves.
  const json = new Output(argv.includes("--json"));
  const program = new Command("stratum")
    .description(
      "The Stratum node tool: restart Stratum's in-cluster workloads after a restore or CA " +
        "rotation (rollout), and move a live node between isolation modes (migrate).",
    )
    .version(versionLine(), "--version", "print the version and the commit it was built from")
    .exitOverride()
    .showSuggestionAfterError(true)
    .configureOutput({
      writeOut: (s) => out.text(s),
      writeErr: (s) => out.log(s.trimEnd()),
      outputError: (s) => out.log(s.trimEnd().replace(/^error: /, "stratum: ")),
    })
    .addHelpText(
      "after",
      "\nExit codes: 0 done or nothing to do, 1 failed and safe, 2 bad input (nothing\n" +
        "changed), 3 needs attention, 75 busy (another migration holds the lock).",
    );
  for (const g of groups) g(program, ctx);
  for (const c of allCommands(program)) {
    c.exitOverride().configureOutput(program.configureOutput());
  }
  try {
    await program.parseAsync(argv, { from: "user" });
  } catch (err) {
    if (err instanceof CommanderError) {
      // --help and --version "fail" with exit code 0.
      if (err.exitCode === 0) return 0;
      failure(
        json,
        "bad-input",
        err.message.replace(/^error: /, ""),
        "fix the command line; nothing was changed",
      );
      return ExitUsage;
    }
    if (err instanceof host.ErrBusy) {
      // Another command holds the migration lock: nothing changed.
      json.result(
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
    if (
      err instanceof UsageError || err instanceof node.ErrBadRequest ||
      err instanceof isolation.ErrBadNodeConfig
    ) {
      out.error(err.message);
      failure(json, "bad-input", err.message, "fix the input; nothing was changed");
      return ExitUsage;
    }
    if (migrate.is(err, migrate.ErrCorruptJournal)) {
      out.error(messageOf(err));
      failure(
        json,
        "journal-unreadable",
        messageOf(err),
        "needs attention: a migration may be under way; inspect the journal and the node (systemctl status 'stratum-*.target') before repairing or removing it by hand",
      );
      return ExitAttention;
    }
    out.error(`unexpected error: ${messageOf(err)}`);
    failure(json, "error", messageOf(err), "needs attention: report this error");
    return ExitAttention;
  }
  return ctx.exitCode;
}

function allCommands(c: Command): Command[] {
  return c.commands.flatMap((sub) => [sub, ...allCommands(sub)]);
}

/** With --json, the document for a command that failed before producing one. */
function failure(out: Output, outcome: string, message: string, nextAction: string): void {
  if (out.json) out.result({ outcome, message, nextAction }, () => []);
}
