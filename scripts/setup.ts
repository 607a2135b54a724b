// deno-lint-ignore-file no-console
// `deno task setup [demo|test]`: installs the Debian packages the demo or the
// tests drive (scripts/packages.ts) when they are missing, as root with apt,
// saying what it installs. Without root or apt it names what is missing and
// the command that installs it, and fails: a run with most of its tests
// skipped is not a pass. The demo and the test task call it first.

import { missing, type Purpose } from "./packages.ts";

/** Thrown when packages are missing and cannot be installed here; the message is one line. */
export class SetupError extends Error {
  override name = "SetupError";
}

function canApt(): boolean {
  try {
    return Deno.statSync("/usr/bin/apt-get").isFile;
  } catch {
    return false;
  }
}

async function run(args: string[]): Promise<boolean> {
  const o = await new Deno.Command(args[0]!, {
    args: args.slice(1),
    env: { DEBIAN_FRONTEND: "noninteractive" },
    stdin: "null",
    stdout: "inherit",
    stderr: "inherit",
  }).output();
  return o.success;
}

/** Makes sure what `purpose` needs is installed; throws a SetupError when it cannot. */
export async function ensurePackages(purpose: Purpose): Promise<void> {
  const need = missing(purpose);
  if (need.length === 0) return;
  const names = need.map((p) => p.name);
  const cmd = `apt-get update && apt-get install -y ${names.join(" ")}`;
  if (Deno.uid() !== 0 || !canApt()) {
    throw new SetupError(
      `setup: the ${purpose} needs Debian packages that are not installed: ${
        names.join(", ")
      }; install them as root with: ${cmd}`,
    );
  }
  console.error(
    `setup: installing ${names.join(" ")} (${need.map((p) => p.for).join("; ")})`,
  );
  const ok = await run(["apt-get", "update", "-qq"]) &&
    await run(["apt-get", "install", "-y", "-qq", ...names]);
  const still = missing(purpose).map((p) => p.name);
  if (!ok || still.length > 0) {
    throw new SetupError(
      `setup: apt-get could not install ${still.join(", ") || names.join(", ")}; try: ${cmd}`,
    );
  }
}

/** ensurePackages, or the one line that says what is missing and exit 1: for the task scripts. */
export async function setupOrExit(purpose: Purpose): Promise<void> {
  try {
    await ensurePackages(purpose);
  } catch (err) {
    if (!(err instanceof SetupError)) throw err;
    console.error(err.message);
    Deno.exit(1);
  }
}

if (import.meta.main) {
  const purpose = (Deno.args[0] ?? "test") as Purpose;
  if (purpose !== "demo" && purpose !== "test") {
    console.error(`setup: unknown purpose ${JSON.stringify(Deno.args[0])} (want demo or test)`);
    Deno.exit(2);
  }
  await setupOrExit(purpose);
}
