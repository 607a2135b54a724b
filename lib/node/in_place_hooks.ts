import { join } from "node:path";
import * as bundle from "../bundle/mod.ts";
import * as host from "../host/mod.ts";
import * as isolation from "../isolation/mod.ts";
import type * as migrate from "../migrate/mod.ts";
import { bundlePolicy, preflight } from "./preflight.ts";

/** What the real migration of this node needs. */
export interface InPlaceHooksOptions {
  readonly paths: host.HostPaths;
  readonly systemctl: host.Systemctl;
  readonly from: isolation.Mode;
  readonly to: isolation.Mode;
  readonly sourceSlot: isolation.Slot;
  /** The node's name. */
  readonly node: string;
  /** The operator's bundle (a directory with one subdirectory per mode); unset: use the installed copy. */
  readonly bundle?: string;
  /** Refuse an unsigned bundle even when the node trusts no keys. */
  readonly requireSignature?: boolean;
  /** Accept a bundle older than the one the node runs. */
  readonly allowDowngrade?: boolean;
  /** How long waitReady waits for the target to be healthy, in ms. */
  readonly waitReadyMs: number;
  /**
   * The migration's identity (its journal's startedAt, RFC 3339): the config
   * snapshot it takes is tagged with it, and only that snapshot is restored.
   */
  readonly migrationId: string;
  /** Progress lines for the operator (stderr). */
  readonly log?: (line: string) => void;
  /** What this run already verified of the operator's bundle (an upgrade's check): not read again. */
  readonly verified?: bundle.Verified | undefined;
  /**
   * The target's mode directory itself, instead of `bundle`/MODE: a kept
   * release (`node rollback`), already on the node.
   */
  readonly bundleModeDir?: string | undefined;
}

/**
 * Every InPlaceSpec hook of the seed, wired to the real side effects on this
 * node (except record, which the caller wires to the journal):
 *
 * - preflight: modes differ, nspawn present, bundle verifies, target slot free, disk space;
 * - preflight also copies the bundle beside the installed one, hashing each file as it reads it;
 * - download: makes that copy the installed bundle (an upgrade: builds the target from it);
 * - snapshot/restore/discardConfig: the host config files both modes write, and the kernel
 *   settings among them put back (host_kernel.ts);
 * - cleanupNetwork: links, chains and pinned BPF objects the source left;
 * - persistTarget/restoreSource: /etc/stratum/node.json, the source's copy kept until the end;
 * - waitReady: the target's units active and its health endpoint answering, bounded;
 * - removeSourceConfig: drops the source's saved node.json;
 * - prepareHost: the target mode's firewall flush unit and apt pins.
 */
export function inPlaceHooks(o: InPlaceHooksOptions): Omit<migrate.InPlaceSpec, "record"> & {
  readonly targetRoot: isolation.SlotRef;
} {
  const { paths, systemctl } = o;
  const deps = { paths, systemctl };
  const log = o.log ?? (() => {});
  const target = isolation.otherSlot(o.sourceSlot);
  const targetRoot: isolation.SlotRef = { mode: o.to, slot: target };
  const installed = paths.bundle(o.to);
  // An upgrade (same mode, new bundle) stages the new version beside the
  // installed one and builds the target from it; the installed link moves
  // to it only once the target is proven (removeSourceConfig), and a
  // rollback drops it (discardConfig), so the installed bundle always names
  // what runs, also after a crash at any step.
  const upgrade = o.from === o.to;
  // Where the target's bundle comes from: the operator's, a kept release, or
  // (undefined) the installed copy as it is.
  const source = o.bundleModeDir ?? (o.bundle ? `${o.bundle}/${o.to}` : undefined);
  const targetBundleStaged = bundle.stagedPath(installed);
  const targetBundle = upgrade ? targetBundleStaged : installed;
  const snapshot = new host.ConfigSnapshot({
    root: paths.root,
    dir: paths.snapshotDir,
    files: isolation.snapshotFiles(),
    owner: o.migrationId,
  });
  // The state directories new to the target, which its prepare may make:
  // filled by preflight, which checked that no running stack uses them.
  const claim: string[] = [];
  // The bundle is read once: preflight runs twice (before the boot unit and
  // the journal, and as runInPlace's first step) and the copy is held to
  // the same verification.
  let verified = o.verified;
  // The first preflight copies the bundle to its staging place (hashing it
  // as it reads it, so the carrier's bundle is read once); download then
  // only promotes it.
  let staged = false;
  // The preflight lines already printed: the second preflight says none again.
  const said = new Set<string>();
  return {
    source: isolation.backendFor(o.from, deps),
    sourceRoot: { mode: o.from, slot: o.sourceSlot },
    target: isolation.backendFor(o.to, deps),
    targetSpec: { slot: target, node: o.node, bundleDir: targetBundle, claim },
    targetRoot,
    preflight: async () => {
      const r = await preflight({
        paths,
        from: o.from,
        to: o.to,
        sourceSlot: o.sourceSlot,
        bundleModeDir: source ?? installed,
        ...(upgrade ? { upgrade: true } : {}),
        ...(o.allowDowngrade ? { allowDowngrade: true } : {}),
        ...(o.requireSignature ? { requireSignature: true } : {}),
        ...(verified ? { verified } : {}),
        ...(source && !staged ? { stageTo: bundle.stagedPath(installed) } : {}),
      });
      verified = r.verified;
      if (source) staged = true;
      claim.splice(
        0,
        claim.length,
        ...r.state.filter((p) => p.action !== "keep").map((p) => p.path),
      );
      // Said once: the second run (runInPlace's own) repeats only what changed.
      const lines = [
        ...r.warnings.map((w) => `warning: ${w}`),
        ...r.state.map((p) => `preflight: state ${p.path}: ${p.action}`),
        ...(r.keyId ? [`preflight: bundle signed by trusted key ${r.keyId}`] : []),
      ];
      for (const l of lines.filter((l) => !said.has(l))) {
        said.add(l);
        log(l);
      }
    },
    download: async () => {
      if (!source) return;
      // Preflight staged it (verified as it was copied); a staging that is
      // gone (removed by hand) is made again from the same verification.
      if (!(await Deno.lstat(targetBundleStaged).then((s) => s.isDirectory, () => false))) {
        log(`download: copying ${source} to ${targetBundleStaged} and verifying it`);
        await bundle.stageBundle(
          source,
          targetBundleStaged,
          await bundlePolicy(paths, o.requireSignature, o.to),
          verified,
        );
      }
      if (upgrade) {
        log(`download: ${source} staged as ${targetBundle}, verified as it was copied`);
        return;
      }
      await bundle.promoteBundle(installed);
      log(`download: ${source} installed as ${installed}, verified as it was copied`);
    },
    snapshotConfig: async () => {
      // Values an earlier, unfinished change recorded are not this one's "before".
      await isolation.discardKernelRecord(paths);
      await snapshot.take();
    },
    restoreConfig: async () => {
      const stale = await snapshot.ownerOnDisk();
      const restored = await snapshot.restore();
      // The kernel as the restored files say (keys they no longer set: as
      // before); nothing recorded, nothing to do.
      await isolation.restoreKernelConfig(paths);
      if (!restored && stale !== undefined) {
        log(
          `restore-config: left alone a config snapshot of another migration (${
            stale || "unowned"
          })`,
        );
      }
    },
    discardConfig: async () => {
      await snapshot.discard();
      await isolation.discardKernelRecord(paths);
      if (upgrade) await bundle.dropStaged(installed);
    },
    cleanupNetwork: async (signal) => {
      const r = await host.cleanupNetwork({ root: paths.root, signal });
      const n = r.links.length + r.chains.length + r.tables.length + (r.bpf ? 1 : 0);
      if (n > 0) log(`cleanup-network: removed ${n} leftovers of the source stack`);
    },
    persistTarget: async (t) => {
      await isolation.saveNodeConfig(paths.nodeConfig, paths.nodeConfigSaved);
      await isolation.writeNodeConfig(paths.nodeConfig, {
        mode: t.mode,
        slot: t.slot,
        node: o.node,
      });
    },
    restoreSource: () => isolation.restoreNodeConfig(paths.nodeConfig, paths.nodeConfigSaved),
    waitReady: (signal) => waitReady({ ...o, target: targetRoot, signal, log }),
    removeSourceConfig: async () => {
      // A repair (`node repair`: the staged copy is the release installed,
      // rebuilt) keeps no previous: the copy it replaces is that release
      // damaged, and the release kept before stays what `node rollback`
      // goes back to. Told apart by the manifests, so a resume after a
      // crash decides as the run would have.
      const rebuilt = upgrade && await sameManifest(targetBundleStaged, installed);
      if (upgrade && (await bundle.promoteBundle(installed, { keepPrevious: !rebuilt }))) {
        log(
          rebuilt
            ? `repair: ${installed} is now the rebuilt copy of the same release`
            : `upgrade: ${installed} is now the new bundle`,
        );
      }
      await host.removeFileDurable(paths.nodeConfigSaved);
    },
    prepareHost: async (signal) => {
      if (!upgrade) await isolation.unprepareHost(paths, o.from);
      if (await isolation.prepareHost(paths, o.to)) await systemctl.daemonReload({ signal });
    },
  };
}

/** Whether the bundle copies `a` and `b` have the same manifest (neither missing). */
async function sameManifest(a: string, b: string): Promise<boolean> {
  const read = (d: string) =>
    Deno.readFile(join(d, bundle.manifestName)).then(host.sha256Hex, () => undefined);
  const [x, y] = await Promise.all([read(a), read(b)]);
  return x !== undefined && x === y;
}

/** The target stack did not become healthy in time. */
export class ErrNotReady extends Error {
  override name = "ErrNotReady";
}

/** Resolves once the target's units are active and its health URL answers 200. */
export async function waitReady(
  o: InPlaceHooksOptions & {
    target: isolation.SlotRef;
    signal: AbortSignal;
    log: (l: string) => void;
  },
): Promise<void> {
  const stack = await isolation.readStack(o.paths.slot(o.target.slot));
  const unit = isolation.targetUnit(o.target.slot);
  const deadline = performance.now() + o.waitReadyMs;
  let last = "";
  let lastLog = 0;
  for (;;) {
    o.signal.throwIfAborted();
    const active = await o.systemctl.isActive(unit);
    let health = "no answer";
    if (active) {
      const r = await isolation.probeStack(stack, {
        paths: o.paths,
        systemctl: o.systemctl,
        ref: o.target,
        node: o.node,
      });
      if (r.ok) return;
      health = r.detail;
    }
    last = `${unit} ${active ? "active" : "not active"}, ${stack.health.url}: ${health}`;
    if (performance.now() >= deadline) {
      throw new ErrNotReady(
        `Target not ready after ${Math.round(o.waitReadyMs / 1000)} s: ${last}`,
      );
    }
    if (performance.now() - lastLog > 2000) {
      o.log(`wait-ready: ${last}`);
      lastLog = performance.now();
    }
    await new Promise((r) => setTimeout(r, 200));
  }
}
