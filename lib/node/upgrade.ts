import * as bundle from "../bundle/mod.ts";
import type * as isolation from "../isolation/mod.ts";
import { bundleDigest } from "./install.ts";
import { withLock } from "./lock.ts";
import { type Migrated, type MigrateOptions, runRecorded } from "./migrate_in_place.ts";
import { operatorBundle } from "./operator_bundle.ts";

/** What `stratum node upgrade` needs: a migration's options, with the new bundle required and no mode. */
export type UpgradeOptions = Omit<MigrateOptions, "to" | "bundle"> & {
  /** The new bundle: a directory with a subdirectory for the node's mode. */
  readonly bundle: string;
};

/** How an upgrade ended: nothing to do (the bundle already runs), or the migration's outcome. */
export type Upgraded =
  | { readonly alreadyInstalled: true; readonly mode: isolation.Mode; readonly digest: string }
  | (Migrated & { readonly alreadyInstalled: false; readonly digest: string });

/**
 * `stratum node upgrade`: the node's stack, in the mode it runs in, moved to
 * a new bundle through the other slot with the same steps, write-ahead
 * journal, rollback, resume and boot path as a mode change (the journal's
 * `from` and `to` are the same mode; each slot's manifest names its
 * version). Under the migration lock: the new bundle must verify (and be
 * signed by a trusted key when keys are installed), or ErrBadRequest
 * (BundleError) and nothing changes; the bundle that already runs is
 * `alreadyInstalled`, nothing changes.
 */
export async function upgrade(o: UpgradeOptions): Promise<Upgraded> {
  const { paths } = o;
  return await withLock(paths, o.lock, async () => {
    const { current, modeDir, policy, verified } = await operatorBundle(
      paths,
      o.bundle,
      o.requireSignature === true,
    );
    // The digest of what was verified: the carrier's directory is not read
    // again (a FIFO planted there would hang root while it holds the lock).
    const digest = verified.manifestDigest;
    if (digest === (await bundleDigest(paths.slot(current.slot)))) {
      // A bundle that does not verify is refused even when its manifest matches.
      await bundle.verifyBundle(modeDir, policy);
      o.log(`upgrade: slot ${current.slot} already runs bundle ${digest}; nothing to do`);
      return { alreadyInstalled: true, mode: current.mode, digest };
    }
    const announce = `upgrade: ${current.mode} mode, slot ${current.slot} → ${
      current.slot === "a" ? "b" : "a"
    }, bundle ${digest}`;
    const r = await runRecorded(
      { ...o, to: current.mode, event: "upgrade", announce },
      current,
      verified,
    );
    return { ...r, alreadyInstalled: false, digest };
  });
}
