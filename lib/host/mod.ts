/**
 * Side effects on the host a migration needs: durable file writes, and (in
 * later modules) systemctl, the config snapshot and network cleanup.
 *
 * @example Replace a state file so a crash leaves the old or the new one
 * ```ts
 * import * as host from "./mod.ts";
 * await host.writeFileDurable("/tmp/state.json", "{}\n", { mode: 0o644 });
 * ```
 *
 * @module
 */

export {
  removeFileDurable,
  removeStaleTemps,
  syncDir,
  writeFileDurable,
  type WriteOptions,
} from "./durable_file.ts";
