// The node's persistent data (etcd, kubelet, containerd, volumes): declared
// by the stack, kept outside the slots, never copied or removed by a
// migration, and checked before any stack starts on it, so that a stack never
// starts silently on an empty or foreign directory.

import { join, normalize } from "node:path";
import { ensureDir, type HostPaths, syncDir, writeFileDurable } from "../host/mod.ts";

/** The file stratum writes into each state directory: whose data it is. */
export const stateMarkerName = ".stratum-state.json";

/** What a state marker and the node identity hold. No credentials. */
export interface NodeIdentity {
  /** Random, made once by the node's first install; never changes while the node's data lives. */
  readonly id: string;
  /** The node's name when the identity was made. */
  readonly node: string;
}

/**
 * A state directory that is not the node's own data: missing, empty,
 * another node's or another path's, behind a link. Names the path.
 */
export class ErrState extends Error {
  override name = "ErrState";
  readonly path: string;
  constructor(path: string, message: string) {
    super(message);
    this.path = path;
  }
}

/** Host trees a state path may not be in: the system's, and stratum's own (its slots among them). */
const forbidden = ["/var/lib/stratum", "/usr", "/proc", "/sys", "/dev", "/run", "/boot"];

/**
 * Why the `state` list of a stack.json is unusable, or undefined: each entry
 * an absolute, normalised host path (no `..`, `.`, `//` or trailing `/`),
 * not `/`, not in a forbidden tree, and no two that overlap.
 */
export function stateListProblem(state: unknown): string | undefined {
  if (!Array.isArray(state)) return `"state" must be a list of absolute host paths`;
  const seen: string[] = [];
  for (const p of state) {
    if (typeof p !== "string") return `"state" entries must be strings: ${JSON.stringify(p)}`;
    const q = JSON.stringify(p);
    if (!p.startsWith("/")) return `state path ${q} is not absolute`;
    if (p.split("/").some((c) => c === ".." || c === ".")) {
      return `state path ${q} has a "." or ".." component`;
    }
    if (p === "/" || normalize(p) !== p || p.endsWith("/") || /[\0\n]/.test(p)) {
      return `state path ${q} is not a normalised path below /`;
    }
    const under = forbidden.find((f) => p === f || p.startsWith(`${f}/`));
    if (under) return `state path ${q} is inside ${under}, which stratum or the system owns`;
    const overlap = seen.find((s) => s === p || p.startsWith(`${s}/`) || s.startsWith(`${p}/`));
    if (overlap) return `state paths ${JSON.stringify(overlap)} and ${q} overlap`;
    seen.push(p);
  }
  return undefined;
}

/** Reads the node identity; undefined on a node never installed. */
export async function readIdentity(paths: HostPaths): Promise<NodeIdentity | undefined> {
  let text: string;
  try {
    text = await Deno.readTextFile(paths.identity);
  } catch (err) {
    if (err instanceof Deno.errors.NotFound) return undefined;
    throw err;
  }
  const o = parseIdentity(text);
  if (!o) throw new ErrState(paths.identity, `Node identity ${paths.identity} is not valid`);
  return o;
}

/** The node identity, made (durably) when there is none yet. */
export async function ensureIdentity(paths: HostPaths, node: string): Promise<NodeIdentity> {
  const had = await readIdentity(paths);
  if (had) return had;
  const id = Array.from(
    crypto.getRandomValues(new Uint8Array(16)),
    (b) => b.toString(16).padStart(2, "0"),
  ).join("");
  const made = { id, node };
  await ensureDir(join(paths.identity, ".."));
  await writeFileDurable(paths.identity, JSON.stringify(made) + "\n", { mode: 0o644 });
  return made;
}

function parseIdentity(text: string): NodeIdentity | undefined {
  try {
    const o = JSON.parse(text);
    if (typeof o?.id === "string" && /^[0-9a-f]{32}$/.test(o.id) && typeof o.node === "string") {
      return { id: o.id, node: o.node };
    }
  } catch { /* not JSON */ }
  return undefined;
}

/**
 * Checks one state directory, as a stack about to start on it will see it:
 * a real directory (no link anywhere on its path under the root) whose
 * marker names this node's identity and this path. Rejects with ErrState
 * naming the path otherwise.
 */
export async function checkStateDir(
  paths: HostPaths,
  path: string,
  identity: NodeIdentity | undefined,
): Promise<void> {
  await checkNoLinks(paths, path);
  const dir = paths.at(path);
  const st = await Deno.lstat(dir).catch(() => undefined);
  if (!st) {
    throw new ErrState(path, `State directory ${path} is missing: the node's data is not there`);
  }
  if (!st.isDirectory) throw new ErrState(path, `State path ${path} is not a directory`);
  const marker = await readMarker(dir);
  if (!marker) {
    throw new ErrState(
      path,
      `State directory ${path} has no ${stateMarkerName}: it is empty or not this node's data ` +
        "(an unmounted disk, a wiped directory); refusing to start a stack on it",
    );
  }
  if (!identity || marker.id !== identity.id || marker.path !== path) {
    throw new ErrState(
      path,
      `State directory ${path} holds another node's or another path's data (marker ${
        JSON.stringify(marker)
      }, this node ${identity ? identity.id : "has no identity"})`,
    );
  }
}

/** Checks every state directory of a stack; see {@linkcode checkStateDir}. */
export async function checkState(paths: HostPaths, state: readonly string[]): Promise<void> {
  if (state.length === 0) return;
  const identity = await readIdentity(paths);
  for (const p of state) await checkStateDir(paths, p, identity);
}

/**
 * What a stack's state directories need before it can start: `ok` (marked as
 * this node's), `create` (absent: made and marked by {@linkcode claimState}),
 * or a refusal naming the path. Changes nothing.
 */
export async function planState(
  paths: HostPaths,
  state: readonly string[],
  identity: NodeIdentity | undefined,
  adopt: readonly string[] = [],
): Promise<{ path: string; action: "ok" | "create" | "claim-empty" | "adopt" }[]> {
  const out: { path: string; action: "ok" | "create" | "claim-empty" | "adopt" }[] = [];
  for (const p of state) {
    await checkNoLinks(paths, p);
    const dir = paths.at(p);
    const st = await Deno.lstat(dir).catch(() => undefined);
    if (!st) {
      out.push({ path: p, action: "create" });
      continue;
    }
    if (!st.isDirectory) throw new ErrState(p, `State path ${p} is not a directory`);
    const marker = await readMarker(dir);
    if (!marker) {
      // An empty directory (a fresh mount point) is claimed; one with data
      // in it is somebody's, and stratum does not adopt it silently.
      // The operator may say it is this node's (what cloud-init or kubeadm
      // join provisioned: a kubelet's credentials): adopted as it is.
      if (await isEmpty(dir)) out.push({ path: p, action: "claim-empty" });
      else if (adopt.includes(p)) out.push({ path: p, action: "adopt" });
      else {
        throw new ErrState(
          p,
          `State directory ${p} holds data stratum did not mark as this node's: if it is this ` +
            `node's (provisioned before the first install), install with --adopt-state ${p}; ` +
            "else move it away or empty it",
        );
      }
      continue;
    }
    await checkStateDir(paths, p, identity);
    out.push({ path: p, action: "ok" });
  }
  return out;
}

/**
 * Makes absent state directories (mode 0700) and marks them, and empty
 * unmarked ones, and those in `adopt`, as this node's data: an adopted
 * directory gets the marker and nothing else of it changes. Marked ones
 * are left alone; anything else is refused by {@linkcode planState}
 * before any is touched.
 */
export async function claimState(
  paths: HostPaths,
  state: readonly string[],
  identity: NodeIdentity,
  adopt: readonly string[] = [],
): Promise<void> {
  for (const { path, action } of await planState(paths, state, identity, adopt)) {
    if (action === "ok") continue;
    const dir = paths.at(path);
    if (action === "create") {
      await ensureDir(join(dir, ".."));
      await Deno.mkdir(dir, { mode: 0o700 }).catch((err) => {
        if (!(err instanceof Deno.errors.AlreadyExists)) throw err;
      });
      await Deno.chmod(dir, 0o700);
      await syncDir(join(dir, ".."));
    }
    await writeFileDurable(
      join(dir, stateMarkerName),
      JSON.stringify({ id: identity.id, node: identity.node, path }) + "\n",
      { mode: 0o644 },
    );
  }
}

/**
 * Empties state directories (reprovision's `--wipe-state`): everything in
 * each is removed and the directory itself stays, so a data disk mounted
 * there is emptied, not unmounted or failed on (EBUSY); the bootstrap then
 * claims it, empty. A missing directory is nothing to wipe.
 */
export async function wipeState(paths: HostPaths, state: readonly string[]): Promise<void> {
  await checkWipe(paths, state);
  for (const p of state) {
    const dir = paths.at(p);
    const entries: string[] = [];
    try {
      for await (const e of Deno.readDir(dir)) entries.push(e.name);
    } catch (err) {
      if (err instanceof Deno.errors.NotFound) continue;
      throw err;
    }
    for (const name of entries) await Deno.remove(join(dir, name), { recursive: true });
    await syncDir(dir);
  }
}

/**
 * Finds what would stop a wipe half-way, before anything is destroyed: a
 * state path through a symlink, one that is not a directory, a file system
 * mounted below it (it cannot be removed: EBUSY), or a directory root cannot
 * write (a read-only mount). Throws ErrState naming the path.
 */
export async function checkWipe(paths: HostPaths, state: readonly string[]): Promise<void> {
  for (const p of state) {
    await checkNoLinks(paths, p);
    const dir = paths.at(p);
    const top = await Deno.lstat(dir).catch(() => undefined);
    if (!top) continue;
    if (!top.isDirectory) {
      throw new ErrState(p, `State path ${p} is not a directory: --wipe-state cannot empty it`);
    }
    const walk = async (d: string): Promise<void> => {
      for await (const e of Deno.readDir(d)) {
        if (!e.isDirectory) continue;
        const sub = join(d, e.name);
        if ((await Deno.lstat(sub)).dev !== top.dev) {
          throw new ErrState(
            p,
            `State directory ${p} has a file system mounted at ${
              join(p, sub.slice(dir.length))
            }: unmount it before --wipe-state (nothing was wiped)`,
          );
        }
        await walk(sub);
      }
    };
    await walk(dir);
    const probe = join(dir, `.stratum-wipe-check-${Deno.pid}`);
    try {
      await Deno.writeFile(probe, new Uint8Array(), { createNew: true, mode: 0o600 });
      await Deno.remove(probe);
    } catch (err) {
      throw new ErrState(
        p,
        `State directory ${p} cannot be written (${
          err instanceof Error ? err.message : err
        }): --wipe-state cannot empty it (nothing was wiped)`,
      );
    }
  }
}

async function readMarker(dir: string): Promise<{ id: string; path: string } | undefined> {
  const st = await Deno.lstat(join(dir, stateMarkerName)).catch(() => undefined);
  if (!st?.isFile) return undefined;
  try {
    const o = JSON.parse(await Deno.readTextFile(join(dir, stateMarkerName)));
    if (typeof o?.id === "string" && typeof o.path === "string") return { id: o.id, path: o.path };
  } catch { /* unreadable: as good as none */ }
  return undefined;
}

async function isEmpty(dir: string): Promise<boolean> {
  for await (const _ of Deno.readDir(dir)) return false;
  return true;
}

/** Refuses a state path that reaches through a symlink on this node (any component under the root). */
async function checkNoLinks(paths: HostPaths, path: string): Promise<void> {
  let at = "";
  for (const c of path.split("/").filter(Boolean)) {
    at += `/${c}`;
    const st = await Deno.lstat(paths.at(at)).catch(() => undefined);
    if (!st) return;
    if (st.isSymlink) {
      throw new ErrState(path, `State path ${path} goes through a symlink on this node (${at})`);
    }
  }
}
