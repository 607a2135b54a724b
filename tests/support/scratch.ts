// Scratch directories under the checkout's .test-tmp (the sandbox sees the
// checkout, not the host's /tmp), removed when the test module ends: tests
// remove what they make, even the ones that fail half-way.

import { join } from "node:path";
import { repoRoot } from "./sandbox.ts";

const made: string[] = [];
globalThis.addEventListener("unload", () => {
  for (const d of made) {
    try {
      Deno.removeSync(d, { recursive: true });
    } catch { /* already gone */ }
  }
});

/** A new directory under .test-tmp named `prefix…`, removed when the module ends. */
export async function scratchDir(prefix: string): Promise<string> {
  await Deno.mkdir(join(repoRoot, ".test-tmp"), { recursive: true });
  const dir = await Deno.makeTempDir({ dir: join(repoRoot, ".test-tmp"), prefix });
  made.push(dir);
  return dir;
}
