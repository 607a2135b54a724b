/**
 * `stratum`: parses argv once, builds the real dependencies, dispatches to a
 * command group in lib/cli, and exits with the code the command chose. The
 * only place that exits.
 *
 * @module
 */
import * as cli from "./lib/cli/mod.ts";
import * as host from "./lib/host/mod.ts";
import * as kube from "./lib/kube/mod.ts";
import * as node from "./lib/node/mod.ts";

if (import.meta.main) {
  // SIGINT/SIGTERM stop a migration's forward path, which then rolls back,
  // and a rollout's kubectl calls, which then reports what it knows.
  const interrupt = new AbortController();
  for (const sig of ["SIGINT", "SIGTERM"] as const) {
    Deno.addSignalListener(sig, () => interrupt.abort(new cli.Interrupted(sig)));
  }
  const deps: cli.Deps = {
    systemctl: () => new host.Systemctl(),
    interrupted: interrupt.signal,
    selfCommand: node.selfCommand(import.meta.url),
    failpoint: Deno.env.get("STRATUM_FAILPOINT"),
    killSelf: () => Deno.kill(Deno.pid, "SIGKILL"),
  };
  const code = await cli.run(Deno.args, [
    cli.rolloutGroup({ kubectl: kube.kubectl, hint: kube.hint, interrupted: interrupt.signal }),
    cli.migrateGroup(deps),
    cli.bundleGroup(),
    cli.nodeGroup(deps),
  ]);
  Deno.exit(code);
}
