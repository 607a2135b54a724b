import { join } from "node:path";
import * as bundle from "../bundle/mod.ts";
import * as host from "../host/mod.ts";
import * as isolation from "../isolation/mod.ts";
import { installBootUnit, type SelfCommand } from "./boot_unit.ts";
import { bundlePolicy, checkKernelFiles, stackOf } from "./preflight.ts";
import { waitReady } from "./in_place_hooks.ts";
import { appendHistory, type HistoryEvent } from "./history.ts";
import { is, messageOf } from "../errors/mod.ts";
import { ErrBadRequest } from "./errors.ts";
import * as migrate from "../migrate/mod.ts";

/** What `stratum node install` needs. */
export interface InstallOptions {
  readonly paths: host.HostPaths;
  readonly systemctl: host.Systemctl;
  readonly mode: isolation.Mode;
  readonly node: string;
  /** The name was asked for (--node), not defaulted: an installed node of another name is refused. */
  readonly nodeAsked?: boolean;
  /**
   * The operator's bundle: a directory with one subdirectory per mode.
   * Unset: the copy already installed under /var/lib/stratum/bundles (what
   * a reprovision's bootstrap uses; its run downloaded it).
   */
  readonly bundle?: string;
  /** How systemd runs stratum, for the boot unit. */
  readonly self: SelfCommand;
  /** How long the new stack may take to be healthy, in ms. */
  readonly waitReadyMs: number;
  /** Refuse an unsigned bundle even when the node trusts no keys. */
  readonly requireSignature?: boolean;
  readonly signal?: AbortSignal;
  /** Progress lines for the operator (stderr). */
  readonly log?: (line: string) => void;
  /**
   * State directories that already hold this node's data (what cloud-init
   * or `kubeadm join` provisioned), adopted as they are by a first install.
   * Each must be one of the stack's state directories.
   */
  readonly adoptState?: readonly string[];
  /** Called after each step of a first install (tests crash the process there). */
  readonly afterStep?: (step: InstallStep) => Promise<void>;
}

/** The steps of a first install, in order; node.json is written at `committed`. */
export const installSteps = [
  "cleared",
  "bundle-installed",
  "prepared",
  "started",
  "ready",
  "committed",
  "host-prepared",
] as const;
export type InstallStep = typeof installSteps[number];

/** What an install found or did. */
export interface Installed {
  /** False when the node was already installed as asked and nothing had to change. */
  readonly changed: boolean;
  readonly mode: isolation.Mode;
  readonly slot: isolation.Slot;
  readonly node: string;
  /** sha256 of the bundle's manifest: names the bundle's exact content. */
  readonly bundleDigest: string;
  readonly keyId?: string;
  readonly warnings: readonly string[];
}

/** The node is installed already, in a way this install cannot turn into what it asks. */
export class ErrInstalledOtherwise extends Error {
  override name = "ErrInstalledOtherwise";
}

/** The sha256 of a bundle mode directory's manifest, or undefined when it has none. */
export async function bundleDigest(modeDir: string): Promise<string | undefined> {
  const data = await Deno.readFile(join(modeDir, bundle.manifestName)).catch(() => undefined);
  return data && await host.sha256Hex(data);
}

/**
 * First-boot provisioning: verifies the bundle, installs it, builds slot
 * `a`, starts it, waits until it is healthy, then writes /etc/stratum/node.json
 * and, after it, the mode's host preparation and the boot unit that brings
 * the applied slot up at every boot.
 *
 * node.json is the commit point. Before it is written, a run that died left
 * nothing a new run must keep: the next install stops and removes slot `a`
 * and does it all again. After it, an install with the same mode and bundle
 * only makes sure of what follows (host preparation, boot unit, the stack
 * running and healthy) and reports `changed: false` when nothing had to be
 * done. Another mode, or another bundle, is refused with ErrInstalledOtherwise
 * before anything changes: changing a live node is `stratum migrate run`.
 */
export async function install(o: InstallOptions): Promise<Installed> {
  const startedAt = new Date().toISOString();
  const event = (outcome: string, extra: Partial<HistoryEvent> = {}) =>
    appendHistory(o.paths, {
      event: "install",
      asked: `node install --mode ${o.mode}${o.bundle ? " --bundle" : ""}`,
      outcome,
      startedAt,
      endedAt: new Date().toISOString(),
      ...extra,
    }, o.log);
  try {
    const r = await provisionNode(o);
    // An install that found everything as asked did nothing to record.
    if (r.changed) {
      await event("installed", { to: { mode: r.mode, slot: r.slot, digest: r.bundleDigest } });
    }
    return r;
  } catch (err) {
    // A refusal changed nothing, history included; a failure part-way did.
    const refused = err instanceof ErrInstalledOtherwise || err instanceof bundle.BundleError ||
      err instanceof isolation.ErrBadStack || err instanceof isolation.ErrState ||
      err instanceof isolation.ErrBadNodeConfig || is(err, migrate.ErrCorruptJournal);
    if (!refused) await event("failed", { message: messageOf(err) });
    throw err;
  }
}

/** What {@linkcode checkInstall} found: the bundle verified, its stack, and the node as it is. */
export interface InstallChecked {
  /** The mode directory installed from. */
  readonly src: string;
  readonly policy: bundle.VerifyOptions;
  readonly verified: bundle.Verified;
  readonly stack: isolation.Stack;
  readonly state: readonly { path: string; action: "ok" | "create" | "claim-empty" | "adopt" }[];
  /** The node's applied config, when it is installed already (as this install asks). */
  readonly applied?: isolation.NodeConfig;
}

/**
 * Every refusal an install makes before it changes anything (the bundle,
 * its stack and kernel files, the opt-outs, the state directories, a node
 * installed otherwise), in the order the install makes them; `node install
 * --plan` runs the same. With `hashNow`, an operator's bundle is hashed
 * here rather than by the copy that installs it.
 */
export async function checkInstall(
  o: Omit<InstallOptions, "systemctl" | "self" | "waitReadyMs">,
  hashNow = false,
): Promise<InstallChecked> {
  const { paths } = o;
  const src = o.bundle === undefined
    ? await bundle.installedDir(paths.bundle(o.mode))
    : join(o.bundle, o.mode);
  const policy = await bundlePolicy(paths, o.requireSignature === true, o.mode);
  // An operator's bundle is hashed by the copy that installs it (read
  // once); the installed copy, used as it is, is hashed here.
  const verified = await bundle.verifyBundle(src, {
    ...policy,
    ...(o.bundle === undefined ? { installed: true } : hashNow ? {} : { deferHashes: true }),
  });
  const digest = verified.manifestDigest;
  // Bad state entries, or a state directory that holds another node's or
  // unmarked data, are refused here, before anything changes.
  const stack = stackOf(verified, src, o.mode);
  await checkKernelFiles(verified, src, src, stack);
  // Read again when the host is prepared: a bad opt-out is refused here.
  await isolation.packagePinsWanted(paths).catch((err) => {
    throw new ErrBadRequest(messageOf(err), { cause: err });
  });
  const adopt = o.adoptState ?? [];
  const stray = adopt.find((p) => !stack.state.includes(p));
  if (stray !== undefined) {
    throw new isolation.ErrBadStack(
      `--adopt-state ${stray} is not a state directory of this bundle's ${o.mode} stack (${
        stack.state.join(", ") || "it declares none"
      })`,
    );
  }
  const state = await isolation.planState(
    paths,
    stack.state,
    await isolation.readIdentity(paths),
    adopt,
  );
  const applied = await isolation.readNodeConfig(paths.nodeConfig);
  if (applied) {
    if (applied.mode !== o.mode) {
      throw new ErrInstalledOtherwise(
        `This node is installed in ${applied.mode} mode; to move it to ${o.mode} mode run: stratum migrate run --to ${o.mode} --bundle ${
          o.bundle ?? "DIR"
        }`,
      );
    }
    if (o.nodeAsked && applied.node !== o.node) {
      throw new ErrInstalledOtherwise(
        `This node is installed as ${applied.node}, not ${o.node}; node install does not rename a node`,
      );
    }
    const installedDigest = await bundleDigest(paths.bundle(o.mode));
    // A bundle that does not verify is refused even when its manifest matches.
    if (installedDigest === digest && verified.content.deferred) {
      await bundle.verifyBundle(src, policy);
    }
    if (installedDigest !== digest) {
      throw new ErrInstalledOtherwise(
        `This node is installed in ${o.mode} mode from another bundle (manifest sha256 ${
          installedDigest ?? "unknown"
        }, this one ${digest}); node install does not replace a running stack`,
      );
    }
  }
  return { src, policy, verified, stack, state, ...(applied ? { applied } : {}) };
}

async function provisionNode(o: InstallOptions): Promise<Installed> {
  const log = o.log ?? (() => {});
  const after = o.afterStep ?? (() => Promise.resolve());
  const signal = o.signal ?? new AbortController().signal;
  const { paths, systemctl } = o;
  const { src, policy, verified, state, applied } = await checkInstall(o);
  const base = {
    mode: o.mode,
    bundleDigest: verified.manifestDigest,
    ...(verified.keyId ? { keyId: verified.keyId } : {}),
    warnings: verified.warnings,
  };
  if (applied) {
    const ref: isolation.SlotRef = { mode: applied.mode, slot: applied.slot };
    let changed = await finishHost(o);
    if (!(await systemctl.isActive(isolation.targetUnit(ref.slot), { signal }))) {
      log(`start: ${isolation.targetUnit(ref.slot)} was not running`);
      await isolation.backendFor(ref.mode, { paths, systemctl }).start(ref, { signal });
      changed = true;
    }
    await waitReady({ ...o, ...ready(o, applied.node), target: ref, signal, log });
    return { ...base, changed, slot: ref.slot, node: applied.node };
  }

  const ref: isolation.SlotRef = { mode: o.mode, slot: "a" };
  const backend = isolation.backendFor(o.mode, { paths, systemctl });
  if (o.bundle !== undefined) {
    // Copied (each file hashed as it is read) before anything else changes:
    // a file that does not match is refused with nothing changed.
    await bundle.stageBundle(src, bundle.stagedPath(paths.bundle(o.mode)), policy, verified);
  }
  // A run that died before node.json may have left slot a in any state,
  // and host files its stack wrote: the snapshot it took first puts them
  // back (it is an install's only while no node.json exists).
  log("slot a: removing what an earlier, unfinished install left (if anything)");
  const snapshot = installSnapshot(paths);
  await backend.destroy(ref, { signal });
  if (await snapshot.restore()) await isolation.restoreKernelConfig(paths);
  await snapshot.take();
  await after("cleared");
  try {
    await buildFirstSlot(o, ref, backend, src, state, after, signal, log);
  } catch (err) {
    // Nothing is committed: remove what this install did, so that the next
    // one (of this bundle or another) starts from the host as it was.
    throw await undoFirstInstall(o, ref, backend, snapshot, log, err);
  }
  await isolation.writeNodeConfig(paths.nodeConfig, { mode: o.mode, slot: "a", node: o.node });
  log("node.json: written; the install is committed");
  await snapshot.discard();
  await after("committed");
  await finishHost(o);
  await after("host-prepared");
  return { ...base, changed: true, slot: "a", node: o.node };
}

/**
 * The snapshot of the host config files a first install takes before it
 * changes any (the files a stack may write: isolation.snapshotFiles), in
 * the directory a migration uses: an install runs only where no node.json
 * and no journal are, so no migration owns one then.
 */
function installSnapshot(paths: host.HostPaths): host.ConfigSnapshot {
  return new host.ConfigSnapshot({
    root: paths.root,
    dir: paths.snapshotDir,
    files: isolation.snapshotFiles(),
    owner: "node install",
  });
}

/** A first install's forward path, from the bundle installed to the stack healthy. */
async function buildFirstSlot(
  o: InstallOptions,
  ref: isolation.SlotRef,
  backend: isolation.Backend,
  src: string,
  state: readonly { path: string; action: string }[],
  after: (step: InstallStep) => Promise<void>,
  signal: AbortSignal,
  log: (line: string) => void,
): Promise<void> {
  const { paths } = o;
  if (o.bundle !== undefined) {
    log(`bundle: installing ${src} as ${paths.bundle(o.mode)}`);
    await bundle.promoteBundle(paths.bundle(o.mode));
  }
  await after("bundle-installed");
  for (const p of state.filter((p) => p.action === "adopt")) {
    log(`state: adopting ${p.path} as this node's data (nothing in it is changed)`);
  }
  log(`slot a: building the ${o.mode} stack`);
  await backend.prepare({
    slot: "a",
    node: o.node,
    bundleDir: paths.bundle(o.mode),
    claim: state.filter((p) => p.action !== "ok").map((p) => p.path),
    adopt: state.filter((p) => p.action === "adopt").map((p) => p.path),
  }, { signal });
  await after("prepared");
  log(`slot a: starting ${isolation.targetUnit("a")}`);
  await backend.start(ref, { signal });
  await after("started");
  await waitReady({ ...o, ...ready(o, o.node), target: ref, signal, log });
  await after("ready");
}

/**
 * Undoes a first install that failed before its commit: slot a and its
 * units go, the host config files are put back as the snapshot found them
 * (a file the stack added is removed), and the kernel settings it changed
 * are set back. Not cut short by the signal that may have stopped the
 * install. Returns the error to throw: `err`, with what could not be
 * undone added to its message.
 */
async function undoFirstInstall(
  o: InstallOptions,
  ref: isolation.SlotRef,
  backend: isolation.Backend,
  snapshot: host.ConfigSnapshot,
  log: (line: string) => void,
  err: unknown,
): Promise<unknown> {
  log("install failed: removing slot a and the host files it wrote");
  const left: string[] = [];
  const undo = async (what: string, fn: () => Promise<unknown>) => {
    try {
      await fn();
    } catch (e) {
      left.push(`${what}: ${messageOf(e)}`);
    }
  };
  await undo("remove slot a", () => backend.destroy(ref, {}));
  await undo("restore the host config files", async () => {
    if (await snapshot.restore()) await isolation.restoreKernelConfig(o.paths);
    await snapshot.discard();
  });
  if (left.length === 0) return err;
  const e = err instanceof Error ? err : new Error(String(err));
  e.message += ` (and the cleanup did not finish: ${
    left.join("; ")
  }; the next node install retries it)`;
  return e;
}

/** waitReady's options for an install. */
function ready(o: InstallOptions, node: string) {
  return {
    from: o.mode,
    to: o.mode,
    sourceSlot: "a" as const,
    node,
    migrationId: "",
  };
}

/** The mode's host preparation and the boot unit; true when either changed. */
async function finishHost(o: InstallOptions): Promise<boolean> {
  const prepared = await isolation.prepareHost(o.paths, o.mode);
  // The slot's prepare applied the stack's kernel settings: kept, as installed.
  await isolation.discardKernelRecord(o.paths);
  const unit = await installBootUnit(o.paths, o.self);
  if (prepared || unit) await o.systemctl.daemonReload();
  return prepared || unit;
}
