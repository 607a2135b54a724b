import { dirname, join } from "node:path";
import {
  ensureDir,
  removeFileDurable,
  removeTreeDurable,
  syncDir,
  writeFileDurable,
} from "./durable_file.ts";

interface Entry {
  path: string;
  present: boolean;
  mode?: number;
  file?: string;
}

interface Manifest {
  owner: string;
  entries: Entry[];
}

/**
 * A snapshot of host config files in one directory, owned by one migration.
 * `take` builds it in a temp directory and renames it into place, so it
 * exists whole or not at all, which is what lets a rollback after a crash
 * call `restore` safely.
 *
 * The snapshot records its owner (the migration's start time), and `restore`
 * puts back only a snapshot its own migration took. A snapshot an earlier
 * migration left (a discard that failed, a crash before its discard) must
 * never be restored over the operator's current files.
 */
export class ConfigSnapshot {
  readonly root: string;
  readonly dir: string;
  readonly files: readonly string[];
  /** The migration this snapshot belongs to. */
  readonly owner: string;

  constructor(opts: { root: string; dir: string; files: readonly string[]; owner: string }) {
    this.root = opts.root;
    this.dir = opts.dir;
    this.files = opts.files;
    this.owner = opts.owner;
  }

  /** The owner of the snapshot on disk, or undefined when there is none (or it is unreadable). */
  async ownerOnDisk(): Promise<string | undefined> {
    return (await this.#manifest().catch(() => undefined))?.owner;
  }

  async #manifest(): Promise<Manifest | undefined> {
    let o: unknown;
    try {
      o = JSON.parse(await Deno.readTextFile(join(this.dir, "manifest.json")));
    } catch (err) {
      if (err instanceof Deno.errors.NotFound) return undefined;
      throw err;
    }
    const m = o as Partial<Manifest>;
    if (typeof m?.owner !== "string" || !Array.isArray(m.entries)) {
      // An unowned snapshot (an older format) belongs to no migration we run.
      return { owner: "", entries: [] };
    }
    return m as Manifest;
  }

  /** Saves every listed file (or its absence). Replaces an older snapshot. */
  async take(): Promise<void> {
    const tmp = `${this.dir}.tmp-${Deno.pid}`;
    await Deno.remove(tmp, { recursive: true }).catch(() => {});
    await ensureDir(join(tmp, "files"));
    const entries: Entry[] = [];
    for (const [i, path] of this.files.entries()) {
      const real = join(this.root, path);
      try {
        const st = await Deno.lstat(real);
        if (!st.isFile) throw new Error(`Cannot snapshot ${real}: not a regular file`);
        const file = `files/${i}`;
        await writeFileDurable(join(tmp, file), await Deno.readFile(real), {
          mode: st.mode! & 0o7777,
        });
        entries.push({ path, present: true, mode: st.mode! & 0o7777, file });
      } catch (err) {
        if (!(err instanceof Deno.errors.NotFound)) throw err;
        entries.push({ path, present: false });
      }
    }
    const manifest: Manifest = { owner: this.owner, entries };
    await writeFileDurable(join(tmp, "manifest.json"), JSON.stringify(manifest, null, 2) + "\n");
    await syncDir(join(tmp, "files"));
    await Deno.remove(this.dir, { recursive: true }).catch(() => {});
    await Deno.rename(tmp, this.dir);
    await syncDir(dirname(this.dir));
  }

  /**
   * Puts every file back as it was when the snapshot was taken, removing
   * those that did not exist then. Resolves with nothing done when there is
   * no snapshot or it belongs to another migration. Keeps the snapshot, so a
   * failed restore can be retried. Returns whether it restored.
   */
  async restore(): Promise<boolean> {
    const manifest = await this.#manifest();
    if (!manifest || manifest.owner !== this.owner) return false;
    for (const e of manifest.entries) {
      const real = join(this.root, e.path);
      if (e.present && e.file) {
        await ensureDir(dirname(real));
        await writeFileDurable(real, await Deno.readFile(join(this.dir, e.file)), {
          mode: e.mode ?? 0o644,
        });
      } else {
        await removeFileDurable(real);
      }
    }
    return true;
  }

  /** Removes the snapshot; a missing one is fine. */
  async discard(): Promise<void> {
    await removeTreeDurable(this.dir);
  }
}
