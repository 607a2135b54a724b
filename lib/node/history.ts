import { dirname } from "node:path";
import { sha256Hex } from "../host/sha256.ts";
import * as host from "../host/mod.ts";
import type * as isolation from "../isolation/mod.ts";

/**
 * The node's history: one JSON line per install, migration, upgrade,
 * rollback, resume and boot resolution, appended (and fsynced) before the
 * command reports, so that after `migrate ack` removed the journal the node
 * still says what happened to it — as RAUC's event log and Mender's
 * deployment log do. Bounded: past `maxHistoryBytes` the oldest half is dropped
 * (the file rewritten atomically). A line a power cut tore is skipped when
 * read, and the next append starts on a line of its own. No credentials: an
 * event holds modes, slots, digests, versions, steps and messages.
 */
export interface HistoryEvent {
  readonly event:
    | "install"
    | "migrate"
    | "upgrade"
    | "rollback"
    | "repair"
    | "resume"
    | "boot"
    | "reprovision";
  /** The command line's gist, e.g. `migrate run --to nspawn`. */
  readonly asked: string;
  readonly from?: Place;
  readonly to?: Place;
  /** complete, rolled-back, failed, installed, handed-off, ... (a refusal changed nothing: no event) */
  readonly outcome: string;
  readonly failedStep?: string;
  readonly message?: string;
  readonly startedAt: string;
  readonly endedAt: string;
}

/** Where a node ran or runs: a mode, a slot, and the bundle's manifest digest and version. */
export interface Place {
  readonly mode: isolation.Mode;
  readonly slot?: isolation.Slot;
  readonly digest?: string;
  readonly version?: string;
}

/** Past this size the oldest half of the history is dropped. */
export const maxHistoryBytes = 512 * 1024;

/** Appends `ev` durably. A failure to write history never fails the command that made it. */
export async function appendHistory(
  paths: host.HostPaths,
  ev: HistoryEvent,
  log: (line: string) => void = () => {},
): Promise<void> {
  try {
    await host.ensureDir(dirname(paths.history), 0o755);
    const line = JSON.stringify(ev) + "\n";
    const st = await Deno.lstat(paths.history).catch(() => undefined);
    if (st && !st.isFile) throw new Error(`${paths.history} is not a regular file`);
    if (st && st.size + line.length > maxHistoryBytes) {
      // The newest events that fill half the bound, then this one.
      const kept: string[] = [];
      let bytes = line.length;
      for (const e of (await readLines(paths.history)).reverse()) {
        const l = JSON.stringify(e) + "\n";
        if (bytes + l.length > maxHistoryBytes / 2) break;
        kept.unshift(l);
        bytes += l.length;
      }
      await host.writeFileDurable(paths.history, kept.join("") + line, { mode: 0o644 });
      return;
    }
    const f = await Deno.open(paths.history, { append: true, create: true, mode: 0o644 });
    try {
      // A torn last line (a power cut mid-append) must not swallow this one.
      let torn = false;
      if (st && st.size > 0) {
        const last = new Uint8Array(1);
        const r = await Deno.open(paths.history, { read: true });
        try {
          await r.seek(st.size - 1, Deno.SeekMode.Start);
          await r.read(last);
        } finally {
          r.close();
        }
        torn = last[0] !== 0x0a;
      }
      const bytes = new TextEncoder().encode((torn ? "\n" : "") + line);
      for (let at = 0; at < bytes.length;) at += await f.write(bytes.subarray(at));
      await f.syncData();
    } finally {
      f.close();
    }
    if (!st) await host.syncDir(dirname(paths.history));
  } catch (err) {
    log(
      `warning: could not append to ${paths.history}: ${err instanceof Error ? err.message : err}`,
    );
  }
}

async function readLines(path: string): Promise<HistoryEvent[]> {
  let text: string;
  try {
    text = await Deno.readTextFile(path);
  } catch (err) {
    if (err instanceof Deno.errors.NotFound) return [];
    throw err;
  }
  const out: HistoryEvent[] = [];
  for (const l of text.split("\n")) {
    if (l.trim() === "") continue;
    try {
      const e = JSON.parse(l);
      if (typeof e?.event === "string" && typeof e.endedAt === "string") out.push(e);
    } catch { /* a line a power cut tore */ }
  }
  return out;
}

/** The newest `limit` events, oldest first. */
export async function readHistory(
  paths: host.HostPaths,
  limit = Infinity,
): Promise<HistoryEvent[]> {
  const all = await readLines(paths.history);
  return limit >= all.length ? all : all.slice(all.length - limit);
}

/**
 * Where a slot stands: its mode, its manifest's digest and its
 * BUNDLE.json's version (stratum's own files), as far as they are there.
 */
export async function placeOf(
  paths: host.HostPaths,
  mode: isolation.Mode,
  slot: isolation.Slot,
): Promise<Place> {
  const dir = paths.slot(slot);
  const manifest = await Deno.readFile(`${dir}/SHA256SUMS`).catch(() => undefined);
  let version: string | undefined;
  try {
    const id = JSON.parse(await Deno.readTextFile(`${dir}/BUNDLE.json`));
    if (typeof id?.version === "string") version = id.version;
  } catch { /* none */ }
  return {
    mode,
    slot,
    ...(manifest ? { digest: await sha256Hex(manifest) } : {}),
    ...(version ? { version } : {}),
  };
}
