// The --root and --json flags every node and migrate command takes. No
// commander at run time: the fast path (fast.ts) imports this module.

import type { Command } from "commander";
import { type HostPaths, hostPaths } from "../host/paths.ts";
import { ErrUsage } from "./exit.ts";

/** The flags every node and migrate command takes. */
export interface Common {
  root: string;
  json?: boolean;
}

/** The --root prefix, with "/" for the real host. */
export const rootFlag = {
  flags: "--root <dir>",
  description: "prefix for every host path (tests use a scratch tree)",
  default: "/",
} as const;

/** The --json flag, as every command describes it. */
export const jsonFlag = {
  flags: "--json",
  description: "print one JSON document on stdout; logs go to stderr",
} as const;

/** Adds --root and --json to a command. */
export function common(c: Command): Command {
  return c.option(rootFlag.flags, rootFlag.description, rootFlag.default)
    .option(jsonFlag.flags, jsonFlag.description);
}

/** Whether `p` is a directory (false when it does not exist). */
export async function isDir(p: string): Promise<boolean> {
  return await Deno.stat(p).then((s) => s.isDirectory, () => false);
}

/** The host paths under --root; a --root that is not a directory is bad input. */
export async function rootPaths(root: string): Promise<HostPaths> {
  if (!(await isDir(root))) throw new ErrUsage(`--root ${root} is not a directory`);
  return hostPaths(root);
}
