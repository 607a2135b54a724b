/**
 * `stratum`: parses argv once, builds the real dependencies, dispatches to a
 * command group in lib/cli, and exits with the code the command chose. The
 * only place that exits.
 *
 * @module
 */
import * as cli from "./lib/cli/mod.ts";

if (import.meta.main) {
  Deno.exit(await cli.run(Deno.args, []));
}
