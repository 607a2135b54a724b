// Runs the real entry point, `deno run main.ts`, as an operator's shell would.
import $ from "dax";

const main = new URL("../../main.ts", import.meta.url).pathname;

export interface CliResult {
  code: number;
  stdout: string;
  stderr: string;
}

/** Runs `stratum ARGS` with `env` added; never throws on a non-zero exit. */
export async function stratum(
  args: string[],
  env: Record<string, string> = {},
): Promise<CliResult> {
  const r = await $`${Deno.execPath()} run -A ${main} ${args}`
    .env({ NO_COLOR: "1", ...env })
    .noThrow()
    .stdin("null")
    .stdout("piped")
    .stderr("piped");
  return { code: r.code, stdout: r.stdout, stderr: r.stderr };
}
