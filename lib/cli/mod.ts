/**
 * The `stratum` command line: one module per command group, human and
 * `--json` output, and the exit codes of the CLI contract.
 *
 * @example Run the CLI from an entry point
 * ```ts
 * import * as cli from "./mod.ts";
 * declare const deps: cli.RolloutDeps;
 * Deno.exit(await cli.run(Deno.args, [cli.rolloutGroup(deps)]));
 * ```
 *
 * @module
 */

export {
  ErrUsage,
  ExitAttention,
  ExitBusy,
  ExitFailed,
  ExitOK,
  ExitUsage,
  Interrupted,
} from "./exit.ts";
export { commandTree, type Context, type Group, jsonOption, run, version } from "./program.ts";
export { Output } from "./output.ts";
export { type RolloutDeps, rolloutGroup } from "./rollout.ts";
export { parseDuration } from "./duration.ts";
export type { Deps } from "./deps.ts";
export { migrateGroup } from "./migrate/mod.ts";
export { nodeGroup } from "./node/mod.ts";
export { bundleGroup } from "./bundle.ts";
