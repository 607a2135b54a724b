// Who may run a command, and against which --root: checked before a
// command does anything (program.ts's preAction hook; node status checks
// it itself, as the fast path runs it too). No commander at run time: the
// fast path imports this module.

import { resolve } from "node:path";
import { ErrRefused } from "./exit.ts";

/** The commands that change the node: they run as root, or not at all. */
export const changesNode: ReadonlySet<string> = new Set([
  "migrate run",
  "migrate resume",
  "migrate ack",
  "node install",
  "node upgrade",
  "node rollback",
  "node repair",
  "node boot",
]);

/**
 * The commands that drive this machine's systemd or probe the stack's
 * health endpoint. systemd and the endpoint are the real node's whatever
 * --root says, so against a scratch --root they would act on (or report)
 * the real node: refused unless the test switch {@linkcode testRootEnv} is
 * set.
 */
export const drivesThisMachine: ReadonlySet<string> = new Set([
  "migrate run",
  "migrate resume",
  "node install",
  "node upgrade",
  "node rollback",
  "node repair",
  "node boot",
  "node status",
]);

/** Set to 1 (tests only) to let the commands above run against a --root other than /. */
export const testRootEnv = "STRATUM_TEST_ROOT_OK";

/**
 * Refuses `command` (as "migrate run") before it does anything: not root
 * for a command that changes the node, then a --root other than / for one
 * that drives systemd or probes health. Throws ErrRefused (exit 2, one
 * line, nothing changed).
 */
export function guard(command: string, root: string | undefined): void {
  const uid = Deno.uid();
  if (changesNode.has(command) && uid !== null && uid !== 0) {
    throw new ErrRefused(
      `${command} changes the node and must run as root; this is uid ${uid}: nothing was changed`,
      `run it as root: sudo stratum ${command} ...`,
    );
  }
  if (
    drivesThisMachine.has(command) && root !== undefined && resolve(root) !== "/" &&
    Deno.env.get(testRootEnv) !== "1"
  ) {
    throw new ErrRefused(
      `--root ${root}: ${command} drives this machine's systemd and probes its stack's health, ` +
        `which are not under ${root}: refused, nothing was changed`,
      `run it without --root on the node itself`,
    );
  }
}
