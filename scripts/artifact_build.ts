// What the test tasks share: the artifact built as operators get it
// (scripts/compile) and the permissions `deno test` runs the suites with.

import { join } from "node:path";

/** The checkout's root. */
export const root = new URL("..", import.meta.url).pathname.replace(/\/$/, "");

/** The permissions every test file runs under: what the suites need, not --allow-all. */
export const testPermissions: readonly string[] = [
  "--allow-read",
  "--allow-write",
  "--allow-run",
  "--allow-env",
  "--allow-net=127.0.0.1",
  "--allow-sys",
];

/**
 * Builds dist/stratum-linux-ARCH with scripts/compile (the Deno that runs
 * this first on PATH) and returns its path, or undefined when the build
 * failed (its output already said why).
 */
export async function buildArtifact(arch: "x86_64" | "aarch64"): Promise<string | undefined> {
  const o = await new Deno.Command("bash", {
    args: [join(root, "scripts/compile"), arch],
    cwd: root,
    stdin: "null",
    stdout: "inherit",
    stderr: "inherit",
    env: { PATH: `${join(Deno.execPath(), "..")}:${Deno.env.get("PATH") ?? ""}` },
  }).output();
  return o.success ? join(root, `dist/stratum-linux-${arch}`) : undefined;
}
