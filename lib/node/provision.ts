import { requireNoJournal } from "./applied.ts";
import { install, type Installed, type InstallOptions } from "./install.ts";
import { type LockOptions, withLock } from "./lock.ts";

/**
 * `stratum node install`, what cloud-init runs on first boot: under the
 * migration lock, refuses (ErrJournalExists) while a migration journal is
 * open, then {@linkcode install}. Idempotent like install.
 */
export async function provision(o: InstallOptions & { lock: LockOptions }): Promise<Installed> {
  return await withLock(o.paths, o.lock, async () => {
    await requireNoJournal(o.paths);
    return await install(o);
  });
}
