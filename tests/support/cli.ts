// Runs stratum as an operator's shell would: the artifact under test
// (STRATUM_BIN), or the checkout's `deno run main.ts`.
import $ from "dax";

import { stratumArgv, stratumEnv } from "./stratum_bin.ts";

export interface CliResult {
  code: number;
  stdout: string;
  stderr: string;
}

/**
 * Runs `stratum ARGS` with `env` added; never throws on a non-zero exit.
 * These runs use scratch --root trees, so the test switch that lets the
 * commands which drive systemd accept one is set (lib/cli/guard.ts); pass
 * `STRATUM_TEST_ROOT_OK: ""` to see what an operator would.
 */
export async function stratum(
  args: string[],
  env: Record<string, string> = {},
): Promise<CliResult> {
  const r = await $`${stratumArgv(args)}`
    .env({ NO_COLOR: "1", STRATUM_TEST_ROOT_OK: "1", ...stratumEnv(), ...env })
    .noThrow()
    .stdin("null")
    .stdout("piped")
    .stderr("piped");
  return { code: r.code, stdout: r.stdout, stderr: r.stderr };
}
