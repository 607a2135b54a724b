// Runs one call through lib/exec and waits for it: the process a test kills
// to see what its calls leave behind. Usage: exec_child.ts PROGRAM ARGS...
import * as exec from "../../lib/exec/mod.ts";

await exec.run(Deno.args, { timeoutMs: 60_000 });
