import { Command, CommanderError, Option } from "commander";
import { ExitUsage } from "./exit.ts";
import { exitForError, failure } from "./failure.ts";
import { Output } from "./output.ts";
import { jsonFlag } from "./root_flags.ts";
import { versionLine } from "./version.ts";
import { examples } from "./examples.ts";
import { guard } from "./guard.ts";

export { version, versionLine } from "./version.ts";

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
  return new Option(jsonFlag.flags, jsonFlag.description);
}

/**
 * Parses argv and runs the command. Resolves with the exit code; never
 * exits. Flag and argument errors are exit 2 with commander's one-line
 * message; a ErrUsage or a node.ErrBadRequest from an action is exit 2
 * too, and host.ErrBusy (another command holds the migration lock) exit 75.
 */
export async function run(argv: string[], groups: Group[]): Promise<number> {
  const ctx: Context = { exitCode: 0, output: (o) => new Output(o.json === true) };
  const out = new Output(false);
  // Flag errors happen before an action sees --json: look for it ourselves.
  const json = new Output(argv.includes("--json"));
  const program = commandTree(groups, ctx, out);
  // `stratum help migrate run` is `stratum migrate run --help` (commander's
  // own help command reads one level only).
  if (argv[0] === "help" && argv.length > 1) argv = [...argv.slice(1), "--help"];
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
    return exitForError(err, out, json);
  }
  return ctx.exitCode;
}

/**
 * The program's commands, options and help, as `run` parses them; exported
 * so the docs test can check every documented command line against it.
 */
export function commandTree(
  groups: Group[],
  ctx: Context = { exitCode: 0, output: (o) => new Output(o.json === true) },
  out: Output = new Output(false),
): Command {
  const program = new Command("stratum")
    .description(
      "The Stratum node tool: restart Stratum's in-cluster workloads after a restore or CA " +
        "rotation (rollout), and move a live node between isolation modes (migrate).",
    )
    .version(versionLine(), "--version", "print the version and the commit it was built from")
    // The program's options only before a command: `bundle make DIR --version V`
    // is the subcommand's --version, never the program's.
    .enablePositionalOptions()
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
  // Not root, or a scratch --root where systemd is driven: refused before
  // the action reads a flag's value or touches anything (guard.ts).
  program.hook("preAction", (_program, action) => {
    guard(pathOf(action), (action.opts() as { root?: string }).root);
  });
  for (const c of allCommands(program)) {
    c.exitOverride().configureOutput(program.configureOutput());
    const ex = examples[pathOf(c)];
    if (ex) c.addHelpText("after", `\nExample${ex.length > 1 ? "s" : ""}:\n  ${ex.join("\n  ")}`);
  }
  return program;
}

/** "migrate run" for the command `stratum migrate run`. */
export function pathOf(c: Command): string {
  const names: string[] = [];
  for (let at: Command | null = c; at?.parent; at = at.parent) names.unshift(at.name());
  return names.join(" ");
}

function allCommands(c: Command): Command[] {
  return c.commands.flatMap((sub) => [sub, ...allCommands(sub)]);
}
