import { dirname } from "node:path";
import { ensureDir, removeFileDurable, removeStaleTemps, writeFileDurable } from "../host/mod.ts";
import { ErrCorruptJournal, ErrNoJournal } from "./errors.ts";
import { decodeJournal, encodeJournal, type Journal } from "./journal.ts";

/** Options for {@linkcode JournalStore}. */
export interface JournalStoreOptions {
  /** Overrides the clock. Unset means `new Date()`. */
  readonly now?: () => Date;
}

/** Reads and writes a Journal at one path. */
export class JournalStore {
  readonly path: string;
  readonly now: () => Date;
  #cleaned = false;

  constructor(path: string, opts: JournalStoreOptions = {}) {
    this.path = path;
    this.now = opts.now ?? (() => new Date());
  }

  /**
   * Reads the journal. A missing file is ErrNoJournal. A file that does not
   * parse is ErrCorruptJournal and not "no journal": nothing may carry on as
   * if no migration were under way when one may be.
   */
  async load(): Promise<Journal> {
    let text: string;
    try {
      text = await Deno.readTextFile(this.path);
    } catch (err) {
      if (err instanceof Deno.errors.NotFound) {
        throw new ErrNoJournal(`No migration journal at ${this.path}`, { cause: err });
      }
      throw new ErrCorruptJournal(this.path, err instanceof Error ? err.message : String(err), {
        cause: err,
      });
    }
    try {
      return decodeJournal(text);
    } catch (err) {
      throw new ErrCorruptJournal(this.path, err instanceof Error ? err.message : String(err), {
        cause: err,
      });
    }
  }

  /**
   * Writes `j` atomically and durably, stamping `updatedAt`, so a crash
   * leaves the previous journal or the new one and never a partial file.
   * Returns the journal as written. The first save of a store also removes
   * temp files an earlier crash left, which is safe because only the holder
   * of the migration lock writes the journal.
   */
  async save(j: Journal): Promise<Journal> {
    const stamped: Journal = { ...j, updatedAt: this.now() };
    if (!this.#cleaned) {
      await ensureDir(dirname(this.path));
      await removeStaleTemps(this.path);
      this.#cleaned = true;
    }
    await writeFileDurable(this.path, encodeJournal(stamped), { mode: 0o600 });
    return stamped;
  }

  /**
   * Deletes the journal and syncs its directory, so a removed journal does
   * not come back after a crash. A missing file is not an error.
   */
  async remove(): Promise<void> {
    await removeFileDurable(this.path);
    await removeStaleTemps(this.path);
  }
}
