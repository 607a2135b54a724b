import * as bundle from "../bundle/mod.ts";
import { messageOf } from "../errors/mod.ts";
import type * as host from "../host/mod.ts";
import type * as isolation from "../isolation/mod.ts";
import { ErrBadRequest } from "./errors.ts";
import { bundleDigest } from "./install.ts";
import { withLock } from "./lock.ts";
import { type Migrated, runRecorded } from "./migrate_in_place.ts";
import { operatorBundle } from "./operator_bundle.ts";
import { bundlePolicy } from "./preflight.ts";
import type { UpgradeOptions } from "./upgrade.ts";

/** What `stratum node repair` needs: an upgrade's options (the operator's copy of the release). */
export type RepairOptions = Omit<UpgradeOptions, "allowDowngrade">;

/** How a repair ended: nothing to repair (the release is whole), or the migration's outcome. */
export type Repaired =
  | {
    readonly intact: true;
    readonly mode: isolation.Mode;
    readonly digest: string;
    readonly version: string | undefined;
  }
  | (Migrated & {
    readonly intact: false;
    readonly digest: string;
    readonly version: string | undefined;
    /** What was found wrong with the running release. */
    readonly damage: string;
  });

/**
 * Whether the release the node runs is whole: its installed copy (every
 * file hashed, its signature checked, as `node status --verify` does) and
 * the running slot (every file hashed against its manifest, as a start
 * does). Resolves to what is wrong, or undefined when both match.
 *
 * The signer the installed copy recorded still counts after a key rotation
 * (a key-retired release is not damaged: `node upgrade` moves it on).
 */
export async function releaseDamage(
  paths: host.HostPaths,
  current: isolation.NodeConfig,
): Promise<string | undefined> {
  const modeDir = paths.bundle(current.mode);
  try {
    const dir = await bundle.installedDir(modeDir);
    const recordedSigner = await bundle.readRecordedSigner(dir);
    await bundle.verifyBundle(dir, {
      ...await bundlePolicy(paths, false, current.mode),
      installed: true,
      ...(recordedSigner ? { recordedSigner } : {}),
    });
  } catch (err) {
    return `installed bundle ${modeDir}: ${messageOf(err)}`;
  }
  try {
    await bundle.checkSlot(paths.slot(current.slot));
  } catch (err) {
    return messageOf(err);
  }
  return undefined;
}

/**
 * `stratum node repair`: the release the node runs, rebuilt from the
 * operator's copy of that same release (as `rauc install` of the bundle a
 * slot already has), through the other slot with the upgrade's journal,
 * preflight, rollback, resume and boot path. For a release whose files no
 * longer match what was signed (bit rot, a hand edit): its slot refuses to
 * start, and an upgrade to the same bundle has nothing to do.
 *
 * Under the migration lock, before anything changes: the bundle must
 * verify (signature, BUNDLE.json, stack.json, then every file's hash as the
 * copy stages it) and be the very release that runs (the same manifest
 * digest as the running slot), or ErrBadRequest (BundleError) and nothing
 * changes; another release is an upgrade, and the message names that
 * command. A release that is whole is `intact`: nothing changes, after the
 * bundle was verified whole.
 *
 * Unlike an upgrade, the release it replaces is not kept (it is the same
 * release, damaged): the kept one stays what `node rollback` goes back to.
 */
export async function repair(o: RepairOptions): Promise<Repaired> {
  const { paths } = o;
  return await withLock(paths, o.lock, async () => {
    const { current, modeDir, policy, verified } = await operatorBundle(
      paths,
      o.bundle,
      o.requireSignature === true,
    );
    const digest = verified.manifestDigest;
    const version = verified.identity?.version;
    const slotDir = paths.slot(current.slot);
    const running = await bundleDigest(slotDir);
    if (digest !== running) {
      const runs = await bundle.readIdentity(slotDir).catch(() => undefined);
      throw new ErrBadRequest(
        `--bundle ${o.bundle} is release ${version ?? "?"} (manifest sha256 ${digest}), ` +
          `not the release ${runs?.version ?? "?"} this node runs (manifest sha256 ${
            running ?? "missing"
          }): to move to it, run stratum node upgrade --bundle ${o.bundle}; nothing changed`,
      );
    }
    const damage = await releaseDamage(paths, current);
    if (damage === undefined) {
      // Whole: the operator's copy is still checked whole (a bad one is refused).
      await bundle.verifyBundle(modeDir, policy);
      o.log(
        `repair: slot ${current.slot} runs bundle ${digest} and every file matches; nothing to repair`,
      );
      return { intact: true, mode: current.mode, digest, version };
    }
    // Said once preflight passed, as an upgrade's line: a refusal says one line only.
    const announce = `repair: the running release is damaged (${damage}); release ${
      version ?? "?"
    } rebuilt from ${o.bundle}, ${current.mode} mode, slot ${current.slot} → ${
      current.slot === "a" ? "b" : "a"
    }, bundle ${digest}`;
    const r = await runRecorded(
      { ...o, to: current.mode, event: "repair", announce },
      current,
      verified,
    );
    return { ...r, intact: false, digest, version, damage };
  });
}
