// The test node image (tests/support/node_image/build.sh): a Debian minbase
// root tree with systemd and python3, as a tar, for a bundle's nspawn mode
// (stack.json "root").

import { join } from "node:path";
import { repoRoot } from "./sandbox.ts";

/** Builds the test node image once (cached beside the VM image) and returns the tar's path. */
export async function nodeImage(): Promise<string> {
  const o = await new Deno.Command("bash", {
    args: [join(repoRoot, "tests/support/node_image/build.sh")],
    stdout: "piped",
    stderr: "inherit",
  }).output();
  if (!o.success) throw new Error(`node_image/build.sh exited ${o.code}`);
  return new TextDecoder().decode(o.stdout).trim().split("\n").pop()!;
}
