/**
 * `stratum`: builds the real dependencies, dispatches, and exits with the
 * code the command chose. The only place that exits.
 *
 * `--version` and the status commands run on the fast path
 * (lib/cli/fast.ts); everything else loads the full command line (lib/cli)
 * when it runs. Hence the dynamic imports: a static one would load its
 * modules, and what they import, before any command runs.
 *
 * @module
 */
import type * as cli from "./lib/cli/mod.ts";
import { fastCommand } from "./lib/cli/fast.ts";

if (import.meta.main) {
  // SIGINT/SIGTERM stop a migration's forward path, which then rolls back,
  // and a rollout's kubectl calls, which then reports what it knows. So do
  // SIGHUP (the terminal or SSH session went away), SIGQUIT (Ctrl-\) and
  // SIGPIPE (stdout or stderr a pipe nobody reads): an operator's session
  // that ends must not kill a run mid-migration. Output to a terminal or
  // pipe that is gone is dropped (lib/cli/output.ts), so the rollback runs
  // to its end and the journal says what happened.
  // A step that does not end (a call stuck in the kernel) must not make
  // the signal a no-op: a second SIGINT, SIGTERM or SIGQUIT (an operator
  // insisting), or 60 s after the first signal, exits at once. A second
  // SIGHUP or SIGPIPE does not: a dropped session sends SIGHUP twice (the
  // shell's, then the kernel's as the session leader exits), and every
  // write to a closed pipe raises SIGPIPE again. The kernel frees the
  // migration lock, and the write-ahead journal says where it stopped, for
  // resume and the boot path.
  const interrupt = new AbortController();
  const giveUp = (sig: string, code: number) => {
    const e = new TextEncoder().encode(
      `stratum: stopped by ${sig} before the command finished (a migration: stratum migrate status says where it stopped)\n`,
    );
    try {
      Deno.stderr.writeSync(e);
    } catch { /* stderr is gone with the session */ }
    Deno.exit(code);
  };
  let signalled = false;
  const signals = { SIGHUP: 1, SIGINT: 2, SIGQUIT: 3, SIGPIPE: 13, SIGTERM: 15 } as const;
  for (const [sig, n] of Object.entries(signals) as [keyof typeof signals, number][]) {
    const insists = sig !== "SIGHUP" && sig !== "SIGPIPE";
    Deno.addSignalListener(sig, async () => {
      if (signalled) {
        if (insists) giveUp(sig, 128 + n);
        return;
      }
      signalled = true;
      Deno.unrefTimer(setTimeout(() => giveUp(sig, 128 + n), 60_000));
      const { Interrupted } = await import("./lib/cli/exit.ts");
      interrupt.abort(new Interrupted(sig));
    });
  }
  const deps = async (): Promise<cli.Deps> => {
    const [{ Systemctl }, { selfCommand }] = await Promise.all([
      import("./lib/host/systemctl.ts"),
      import("./lib/node/boot_unit.ts"),
    ]);
    return {
      systemctl: () => new Systemctl(),
      interrupted: interrupt.signal,
      selfCommand: selfCommand(import.meta.url),
      failpoint: Deno.env.get("STRATUM_FAILPOINT"),
      killSelf: () => Deno.kill(Deno.pid, "SIGKILL"),
    };
  };
  const fast = fastCommand(Deno.args);
  let code: number;
  if (fast) {
    code = await fast(deps);
  } else {
    const [full, kube, real] = await Promise.all([
      import("./lib/cli/mod.ts"),
      import("./lib/kube/mod.ts"),
      deps(),
    ]);
    code = await full.run(Deno.args, [
      full.rolloutGroup({
        kubectl: kube.kubectl,
        commandLine: kube.commandLine,
        interrupted: interrupt.signal,
      }),
      full.migrateGroup(real),
      full.bundleGroup(),
      full.nodeGroup(real),
    ]);
  }
  Deno.exit(code);
}
