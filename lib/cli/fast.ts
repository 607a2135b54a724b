// The commands Ansible, cloud-init and operators call on every node again
// and again (`--version`, `migrate status`, `node status`), run without
// loading commander or any other command: each loads only its own modules,
// so its start-up is close to the runtime's own (docs/performance.md).
//
// Only exact, plain command lines take this path: the command, then at most
// one --json and one --root DIR (or --root=DIR), and node status's --verify. Anything else, --help, a
// typo, an option twice, goes to the full program (program.ts), which alone
// explains and refuses bad input. Both paths run the same command body and
// map errors the same way (failure.ts).

import type { Deps } from "./deps.ts";
import { Output } from "./output.ts";
import type { Context } from "./program.ts";
import type { Common } from "./root_flags.ts";
import { versionLine } from "./version.ts";

/**
 * A command the fast path runs: resolves with its exit code. It builds its
 * dependencies only if it needs them (`--version` does not).
 */
export type FastCommand = (deps: () => Promise<Deps>) => Promise<number>;

/** The command `argv` asks for when the fast path can run it, else undefined. */
export function fastCommand(argv: readonly string[]): FastCommand | undefined {
  if (argv.length === 1 && argv[0] === "--version") {
    return () => {
      new Output(false).text(versionLine());
      return Promise.resolve(0);
    };
  }
  const [group, name, ...rest] = argv;
  if (name !== "status" || (group !== "migrate" && group !== "node")) return undefined;
  const opts = statusFlags(rest, group === "node");
  if (!opts) return undefined;
  return async (deps) => {
    const ctx: Context = { exitCode: 0, output: (o) => new Output(o.json === true) };
    try {
      if (group === "migrate") {
        await (await import("./migrate/status.ts")).migrateStatus(opts, ctx, await deps());
      } else {
        await (await import("./node/status.ts")).nodeStatus(opts, ctx, await deps());
      }
    } catch (err) {
      const { exitForError } = await import("./failure.ts");
      return exitForError(err, new Output(false), new Output(opts.json === true));
    }
    return ctx.exitCode;
  };
}

/** --json and --root (and node status's --verify) as commander would read them, or undefined for anything else. */
function statusFlags(
  args: readonly string[],
  verify: boolean,
): (Common & { verify?: boolean }) | undefined {
  // rootFlag.default, which this module does not import (it loads the host paths).
  const opts: Common & { verify?: boolean } = { root: "/" };
  let root = false;
  for (let i = 0; i < args.length; i++) {
    const a = args[i]!;
    if (a === "--json" && !opts.json) {
      opts.json = true;
    } else if (a === "--verify" && verify && !opts.verify) {
      opts.verify = true;
    } else if (a === "--root" && !root && i + 1 < args.length && plain(args[i + 1]!)) {
      opts.root = args[++i]!;
      root = true;
    } else if (a.startsWith("--root=") && !root && plain(a.slice("--root=".length))) {
      opts.root = a.slice("--root=".length);
      root = true;
    } else {
      return undefined;
    }
  }
  return opts;
}

/** A value commander takes as it is: not empty and not option-like. */
function plain(v: string): boolean {
  return v !== "" && !v.startsWith("-");
}
