import { dirname } from "node:path";
import * as host from "../host/mod.ts";
import * as isolation from "../isolation/mod.ts";

/**
 * A reprovision's `--wipe-state`: the run records which state directories
 * to wipe, tagged with its migration (the journal's startedAt), before the
 * journal that hands off; the handoff's reset wipes them after both slots
 * are stopped and then drops the request. A request of another migration
 * (left by a run whose journal never landed) is never acted on, so a plain
 * reprovision cannot wipe data by accident.
 */
export async function requestWipe(
  paths: host.HostPaths,
  migrationId: string,
  state: readonly string[],
): Promise<void> {
  await host.ensureDir(dirname(paths.wipeRequest));
  await host.writeFileDurable(
    paths.wipeRequest,
    JSON.stringify({ migration: migrationId, state }) + "\n",
    { mode: 0o600 },
  );
}

/** The paths this migration's request names; empty when there is none of its own. */
async function requested(paths: host.HostPaths, migrationId: string): Promise<readonly string[]> {
  let req: { migration?: unknown; state?: unknown } | undefined;
  try {
    req = JSON.parse(await Deno.readTextFile(paths.wipeRequest));
  } catch {
    return []; // none, or unreadable: not a request anyone can act on
  }
  return req?.migration === migrationId && Array.isArray(req.state) &&
      isolation.stateListProblem(req.state) === undefined
    ? req.state as string[]
    : [];
}

/**
 * Throws (ErrState) when the wipe this migration asked for could not finish
 * (see isolation.checkWipe): the reset calls it before it destroys a slot.
 */
export async function checkRequestedWipe(
  paths: host.HostPaths,
  migrationId: string,
): Promise<void> {
  await isolation.checkWipe(paths, await requested(paths, migrationId));
}

/**
 * Wipes what the request of migration `migrationId` names, if there is one,
 * then removes any request. Returns the wiped paths. Idempotent: after a
 * crash mid-wipe the next reset wipes again (no stack ran in between).
 */
export async function wipeRequested(
  paths: host.HostPaths,
  migrationId: string,
): Promise<readonly string[]> {
  const wiped = await requested(paths, migrationId);
  if (wiped.length > 0) await isolation.wipeState(paths, wiped);
  await host.removeFileDurable(paths.wipeRequest);
  return wiped;
}

/** Removes a wipe request (a run that did not hand off). */
export async function dropWipeRequest(paths: host.HostPaths): Promise<void> {
  await host.removeFileDurable(paths.wipeRequest);
}
