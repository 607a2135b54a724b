// How the end-to-end tests run stratum: the one-file artifact when
// STRATUM_BIN names it (CI builds dist/stratum-linux-x86_64 and sets it), so
// they test what operators copy onto nodes; else the checkout through
// `deno run main.ts`. The artifact unpacks into a cache under the
// checkout's .test-tmp, which every sandbox sees: one for the whole run when
// the test task gives it (STRATUM_TEST_CACHE, removed by scripts/test.ts
// after the run), else one per test file, removed when the file ends.

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

/** The unpack cache of this test file's runs, when the test task gives none. */
let ownCache: string | undefined;

/** The artifact's unpack cache in tests (a path the launcher makes on first use). */
export function stratumCache(): string {
  const shared = Deno.env.get("STRATUM_TEST_CACHE");
  if (shared) return shared;
  if (!ownCache) {
    Deno.mkdirSync(join(repoRoot, ".test-tmp"), { recursive: true });
    const dir = Deno.makeTempDirSync({
      dir: join(repoRoot, ".test-tmp"),
      prefix: "stratum-cache-",
    });
    globalThis.addEventListener("unload", () => {
      try {
        Deno.removeSync(dir, { recursive: true });
      } catch { /* already gone */ }
    });
    ownCache = join(dir, "cache");
  }
  return ownCache;
}

/** Environment the artifact needs in tests: its unpack cache. */
export function stratumEnv(): Record<string, string> {
  return stratumBin ? { STRATUM_CACHE: stratumCache() } : {};
}
