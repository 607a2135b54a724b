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
  // and a rollout's kubectl calls, which then reports what it knows.
  // A step that does not end (a call stuck in the kernel) must not make
  // the signal a no-op: a second signal, or 60 s after the first, exits at
  // once. The kernel frees the migration lock, and the write-ahead journal
  // says where it stopped, for resume and the boot path.
  const interrupt = new AbortController();
  const giveUp = (sig: string, code: number) => {
    const e = new TextEncoder().encode(
      `stratum: stopped by ${sig} before the command finished (a migration: stratum migrate status says where it stopped)\n`,
    );
    Deno.stderr.writeSync(e);
    Deno.exit(code);
  };
  let signalled = false;
  for (const sig of ["SIGINT", "SIGTERM"] as const) {
    Deno.addSignalListener(sig, async () => {
      const code = sig === "SIGINT" ? 130 : 143;
      if (signalled) giveUp(sig, code);
      signalled = true;
      Deno.unrefTimer(setTimeout(() => giveUp(sig, code), 60_000));
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
