// The version line, without commander: `stratum --version` is answered by
// the fast path (fast.ts) as well as by the full program.

import config from "../../deno.json" with { type: "json" };

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
