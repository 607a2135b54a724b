// How the end-to-end tests run stratum: the one-file artifact when
// STRATUM_BIN names it (CI builds dist/stratum-linux-x86_64 and sets it), so
// they test what operators copy onto nodes; else the checkout through
// `deno run main.ts`. The artifact unpacks once into a cache under the
// checkout, which every sandbox sees.

import { join } from "node:path";

const repoRoot = new URL("../../", import.meta.url).pathname.replace(/\/$/, "");

/** The artifact under test, or undefined to run the checkout. */
export const stratumBin: string | undefined = (() => {
  const bin = Deno.env.get("STRATUM_BIN");
  if (!bin) return undefined;
  return bin.startsWith("/") ? bin : join(repoRoot, bin);
})();

/** The argv that runs `stratum ARGS`. */
export function stratumArgv(args: string[]): string[] {
  return stratumBin
    ? [stratumBin, ...args]
    : [Deno.execPath(), "run", "-A", join(repoRoot, "main.ts"), ...args];
}

/** Environment the artifact needs in tests: its unpack cache, shared by every run. */
export function stratumEnv(): Record<string, string> {
  return stratumBin ? { STRATUM_CACHE: join(repoRoot, ".test-tmp/stratum-cache") } : {};
}
