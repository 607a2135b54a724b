import { join } from "node:path";

/**
 * What a bundle's node stack runs, from its `stack.json`. In `exec`,
 * `${SLOT}` is the slot's directory as the stack sees it (the slot path on
 * the host; `/` inside an nspawn machine) and `${NODE}` the node's name.
 */
export interface Stack {
  readonly services: readonly { readonly name: string; readonly exec: readonly string[] }[];
  /** An HTTP URL that answers 200 once the stack is up. */
  readonly health: { readonly url: string };
  /**
   * Host config files the stack writes when its slot is prepared: host path
   * (absolute) → file in the slot. They are among the files a migration
   * snapshots.
   */
  readonly hostFiles?: Readonly<Record<string, string>>;
}

/** A bundle or slot whose stack.json cannot be used. */
export class ErrBadStack extends Error {
  override name = "ErrBadStack";
}

/** Reads and checks `stack.json` in `dir` (a bundle's mode directory or a slot). */
export async function readStack(dir: string): Promise<Stack> {
  const path = join(dir, "stack.json");
  let o: Record<string, unknown>;
  try {
    o = JSON.parse(await Deno.readTextFile(path));
  } catch (err) {
    throw new ErrBadStack(`Cannot read ${path}: ${err instanceof Error ? err.message : err}`);
  }
  const services = o.services;
  if (
    !Array.isArray(services) || services.length === 0 ||
    !services.every((s) =>
      typeof s?.name === "string" && /^[a-z0-9-]+$/.test(s.name) && Array.isArray(s.exec) &&
      s.exec.length > 0 && s.exec.every((a: unknown) => typeof a === "string")
    )
  ) {
    throw new ErrBadStack(`${path}: "services" must list {name, exec[]} with lowercase names`);
  }
  const health = o.health as { url?: unknown } | undefined;
  if (typeof health?.url !== "string" || !/^http:\/\//.test(health.url)) {
    throw new ErrBadStack(`${path}: "health.url" must be an http:// URL`);
  }
  const hostFiles = o.hostFiles as Record<string, unknown> | undefined;
  if (
    hostFiles !== undefined &&
    !Object.entries(hostFiles).every(([k, v]) =>
      k.startsWith("/") && typeof v === "string" && !v.startsWith("/")
    )
  ) {
    throw new ErrBadStack(`${path}: "hostFiles" maps absolute host paths to files in the slot`);
  }
  return {
    services: services.map((s) => ({ name: s.name, exec: s.exec })),
    health: { url: health.url },
    ...(hostFiles ? { hostFiles: hostFiles as Record<string, string> } : {}),
  };
}

/** `exec` with `${SLOT}` and `${NODE}` substituted. */
export function expand(exec: readonly string[], slotDir: string, node: string): string[] {
  return exec.map((a) => a.replaceAll("${SLOT}", slotDir).replaceAll("${NODE}", node));
}
