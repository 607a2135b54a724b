/**
 * `stratum`: parses argv once, builds the real dependencies, dispatches to a
 * command group in lib/cli, and exits with the code the command chose. The
 * only place that exits.
 *
 * @module
 */
import * as cli from "./lib/cli/mod.ts";
import * as kube from "./lib/kube/mod.ts";

if (import.meta.main) {
  const groups = [
    cli.rolloutGroup({ kubectl: kube.kubectl, hint: kube.hint }),
  ];
  Deno.exit(await cli.run(Deno.args, groups));
}
