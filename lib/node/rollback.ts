import * as bundle from "../bundle/mod.ts";
import { appliedNode, requireNoJournal } from "./applied.ts";
import { ErrBadRequest } from "./errors.ts";
import { withLock } from "./lock.ts";
import { type Migrated, type MigrateOptions, runRecorded } from "./migrate_in_place.ts";
import { bundlePolicy } from "./preflight.ts";

/** What `stratum node rollback` needs: a migration's options, with no mode and no bundle. */
export type RollbackOptions = Omit<MigrateOptions, "to" | "bundle" | "bundleModeDir">;

/**
 * `stratum node rollback`: back to the release the last upgrade replaced,
 * kept on the node (bundle.previousDir), through the same A/B slots,
 * journal, rollback, resume and boot path as an upgrade: it is an upgrade
 * to that kept copy, verified again under the node's trust. A downgrade is
 * what was asked, so no --allow-downgrade. Once it completes, the release
 * it left is the one kept, so a second rollback goes forward again. Nothing
 * kept: ErrBadRequest, nothing changed.
 */
export async function rollback(
  o: RollbackOptions,
): Promise<Migrated & { readonly digest: string }> {
  const { paths } = o;
  return await withLock(paths, o.lock, async () => {
    await requireNoJournal(paths);
    const current = await appliedNode(paths);
    const kept = await bundle.previousDir(paths.bundle(current.mode));
    if (!kept) {
      throw new ErrBadRequest(
        `No earlier release is kept for ${current.mode} mode (one is kept when stratum node upgrade completes): nothing to roll back to`,
      );
    }
    // Hashed by the copy that stages it (preflight), as an upgrade's bundle.
    // Under the trust store as it is now: a kept release signed by a key
    // since removed (a key rotation) is refused, nothing changed (exit 2),
    // never "unexpected".
    const verified = await bundle.verifyBundle(kept, {
      ...await bundlePolicy(paths, o.requireSignature === true, current.mode),
      installed: true,
      deferHashes: true,
    }).catch((err) => {
      if (!(err instanceof bundle.BundleError)) throw err;
      throw new ErrBadRequest(
        `The kept release does not verify under this node's trust now: ${err.message}; nothing changed`,
        { cause: err },
      );
    });
    const digest = verified.manifestDigest;
    const r = await runRecorded(
      {
        ...o,
        to: current.mode,
        bundleModeDir: kept,
        allowDowngrade: true,
        event: "rollback",
        announce:
          `rollback: ${current.mode} mode, slot ${current.slot} → the kept release ${digest}`,
      },
      current,
      verified,
    );
    return { ...r, digest };
  });
}
