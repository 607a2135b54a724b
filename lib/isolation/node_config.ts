import { dirname } from "node:path";
import { ensureDir, removeFileDurable, writeFileDurable } from "../host/mod.ts";
import { isMode, type Mode } from "./mode.ts";
import { isSlot, type Slot } from "./slot.ts";

/** The node's applied config: which mode and slot its stack runs in. No credentials. */
export interface NodeConfig {
  readonly mode: Mode;
  readonly slot: Slot;
  /** The node's name, as its stack reports it. */
  readonly node: string;
  readonly updatedAt: string;
}

/** A node.json that cannot be read or does not parse: the node's mode is unknown. */
export class ErrBadNodeConfig extends Error {
  override name = "ErrBadNodeConfig";
}

/** Reads node.json; undefined when there is none. */
export async function readNodeConfig(path: string): Promise<NodeConfig | undefined> {
  let text: string;
  try {
    text = await Deno.readTextFile(path);
  } catch (err) {
    if (err instanceof Deno.errors.NotFound) return undefined;
    throw new ErrBadNodeConfig(`Node config ${path} cannot be read: ${(err as Error).message}`, {
      cause: err,
    });
  }
  let o: Record<string, unknown>;
  try {
    o = JSON.parse(text);
  } catch {
    throw new ErrBadNodeConfig(`Node config ${path} is not JSON`);
  }
  if (!isMode(o.mode) || !isSlot(o.slot) || typeof o.node !== "string") {
    throw new ErrBadNodeConfig(`Node config ${path} lacks a valid mode, slot or node`);
  }
  return {
    mode: o.mode,
    slot: o.slot,
    node: o.node,
    updatedAt: typeof o.updatedAt === "string" ? o.updatedAt : "",
  };
}

/** Writes node.json atomically and durably (0644: nothing secret in it). */
export async function writeNodeConfig(
  path: string,
  cfg: Omit<NodeConfig, "updatedAt">,
): Promise<void> {
  await ensureDir(dirname(path));
  const doc = {
    mode: cfg.mode,
    slot: cfg.slot,
    node: cfg.node,
    updatedAt: new Date().toISOString(),
  };
  await writeFileDurable(path, JSON.stringify(doc, null, 2) + "\n", { mode: 0o644 });
}

/**
 * Saves the current node.json beside it before it is replaced, so a rollback
 * can put back the exact bytes. A saved copy from an earlier interrupted run
 * is kept: it is the source's.
 */
export async function saveNodeConfig(path: string, savedPath: string): Promise<void> {
  try {
    await Deno.stat(savedPath);
    return;
  } catch { /* none saved yet */ }
  const bytes = await Deno.readFile(path);
  await ensureDir(dirname(savedPath));
  await writeFileDurable(savedPath, bytes, { mode: 0o644 });
}

/** Puts the saved node.json back; nothing saved means nothing was replaced. */
export async function restoreNodeConfig(path: string, savedPath: string): Promise<void> {
  let bytes: Uint8Array;
  try {
    bytes = await Deno.readFile(savedPath);
  } catch (err) {
    if (err instanceof Deno.errors.NotFound) return;
    throw err;
  }
  await writeFileDurable(path, bytes, { mode: 0o644 });
  await removeFileDurable(savedPath);
}
