import * as host from "../host/mod.ts";
import * as migrate from "../migrate/mod.ts";
import { ErrBadRequest } from "./errors.ts";
import { type LockOptions, withLock } from "./lock.ts";
import { loadJournal } from "./recorded.ts";

/**
 * `stratum migrate ack`: under the migration lock, removes a terminal
 * journal once its outcome was reported, with what the migration kept for
 * its rollback (the source's node.json, the config snapshot): a snapshot
 * left behind must never be restored by a later migration. Returns the
 * journal removed, undefined when there was none; ErrBadRequest while the
 * migration is still in progress.
 */
export async function ack(
  o: { paths: host.HostPaths; lock: LockOptions },
): Promise<migrate.Journal | undefined> {
  const { paths } = o;
  return await withLock(paths, o.lock, async () => {
    const store = new migrate.JournalStore(paths.journal);
    const j = await loadJournal(store);
    if (!j) return undefined;
    if (!migrate.isTerminal(j.step)) {
      throw new ErrBadRequest(
        `The migration is still in progress (step ${j.step}): run \`stratum migrate resume\` first`,
      );
    }
    await store.remove();
    await host.removeFileDurable(paths.nodeConfigSaved);
    await host.removeTreeDurable(paths.snapshotDir);
    return j;
  });
}
