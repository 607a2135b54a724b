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

/**
 * A snapshot of host config files in one directory. `take` builds it in a
 * temp directory and renames it into place, so it exists whole or not at
 * all, which is what lets a rollback after a crash call `restore` safely.
 */
export class ConfigSnapshot {
  readonly root: string;
  readonly dir: string;
  readonly files: readonly string[];

  constructor(opts: { root: string; dir: string; files: readonly string[] }) {
    this.root = opts.root;
    this.dir = opts.dir;
    this.files = opts.files;
  }

  /** Whether a complete snapshot exists. */
  async exists(): Promise<boolean> {
    try {
      await Deno.stat(join(this.dir, "manifest.json"));
      return true;
    } catch {
      return false;
    }
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
    await writeFileDurable(join(tmp, "manifest.json"), JSON.stringify(entries, null, 2) + "\n");
    await syncDir(join(tmp, "files"));
    await Deno.remove(this.dir, { recursive: true }).catch(() => {});
    await Deno.rename(tmp, this.dir);
    await syncDir(dirname(this.dir));
  }

  /**
   * Puts every file back as it was when the snapshot was taken, removing
   * those that did not exist then. Resolves with nothing done when there is
   * no snapshot. Keeps the snapshot, so a failed restore can be retried.
   */
  async restore(): Promise<void> {
    let entries: Entry[];
    try {
      entries = JSON.parse(await Deno.readTextFile(join(this.dir, "manifest.json")));
    } catch (err) {
      if (err instanceof Deno.errors.NotFound) return;
      throw err;
    }
    for (const e of entries) {
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
  }

  /** Removes the snapshot; a missing one is fine. */
  async discard(): Promise<void> {
    await removeTreeDurable(this.dir);
  }
}
