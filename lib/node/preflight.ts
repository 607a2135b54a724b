import * as exec from "../exec/mod.ts";
import { dirname, join } from "node:path";
import * as bundle from "../bundle/mod.ts";
import * as host from "../host/mod.ts";
import * as isolation from "../isolation/mod.ts";

/** A migration refused before anything changed: the node is as it was. */
export class ErrPreflight extends Error {
  override name = "ErrPreflight";
}

/** What preflight checks a migration against. */
export interface PreflightInput {
  readonly paths: host.HostPaths;
  readonly from: isolation.Mode;
  readonly to: isolation.Mode;
  readonly sourceSlot: isolation.Slot;
  /** Where the target's bundle is verified: the operator's --bundle DIR/<to>, or the installed copy. */
  readonly bundleModeDir: string;
  /** Refuse an unsigned bundle even when the node trusts no keys. */
  readonly requireSignature?: boolean;
  /** An upgrade: the same mode, a new bundle (from === to is expected, not refused). */
  readonly upgrade?: boolean;
  /** Accept a bundle older (BUNDLE.json's version) than the one the node runs. */
  readonly allowDowngrade?: boolean;
  readonly nspawn?: string;
  /**
   * What this run already verified of `bundleModeDir` under the same policy
   * (an earlier preflight, an upgrade's check): not read again. The copy
   * that gets installed is held to it (bundle.stageBundle).
   */
  readonly verified?: bundle.Verified;
  /**
   * Where the bundle is copied for the migration (bundle.stagedPath of the
   * installed copy), once every other check passed: the copy hashes each
   * file as it reads it, so the bundle is read once, and a file that does
   * not match is still refused here, before anything changed (the staged
   * copy is removed). Unset: the bundle is hashed in place.
   */
  readonly stageTo?: string;
}

/** How a bundle is checked on this node: its trust store, and whether a signature is required. */
export async function bundlePolicy(
  paths: host.HostPaths,
  requireSignature = false,
  mode?: isolation.Mode,
): Promise<bundle.VerifyOptions> {
  return {
    trust: await bundle.loadTrust(paths.trustDir),
    trustDir: paths.trustDir,
    requireSignature,
    ...(mode ? { mode } : {}),
  };
}

/**
 * Checks the target's requirements before anything is mutated: the modes
 * differ, the target backend can run here (systemd-nspawn for nspawn), the
 * bundle verifies, the target slot is free, and the file system has room
 * for the slot; with `stageTo`, the bundle is then copied there, each file
 * hashed as it is read. Returns what it found, for `migrate plan`.
 */
export async function preflight(
  input: PreflightInput,
): Promise<{
  bundleFiles: number;
  bundleBytes: number;
  freeBytes: number;
  keyId?: string;
  warnings: readonly string[];
  /** The target's state directories and what happens to each before it starts. */
  state: readonly StatePlan[];
  /** The bundle's verification, for the copy that installs it. */
  verified: bundle.Verified;
}> {
  const { paths, from, to } = input;
  if (from === to && !input.upgrade) {
    throw new ErrPreflight(`The node already runs in ${to} mode`);
  }
  if (to === "nspawn") {
    const nspawn = input.nspawn ?? "/usr/bin/systemd-nspawn";
    if (!(await Deno.stat(nspawn).then(() => true, () => false))) {
      throw new ErrPreflight(
        `${nspawn} is missing: install the systemd-container package before migrating to nspawn mode`,
      );
    }
  }
  // The host preparation at the end reads the operator's opt-out: a bad one
  // is refused now, not after the target is proven.
  await isolation.packagePinsWanted(paths).catch((err) => {
    throw new ErrPreflight(err instanceof Error ? err.message : String(err), { cause: err });
  });
  // Stratum's own installed copy is its link resolved once; an operator's
  // bundle is verified as given (a link is refused).
  const installed = dirname(input.bundleModeDir) === paths.bundlesDir;
  const policy = async () => ({
    ...await bundlePolicy(paths, input.requireSignature, to),
    ...(installed ? { installed } : {}),
  });
  let verified: bundle.Verified;
  if (input.verified) {
    verified = input.verified;
  } else {
    try {
      const dir = installed ? await bundle.installedDir(input.bundleModeDir) : input.bundleModeDir;
      verified = await bundle.verifyBundle(dir, {
        ...await policy(),
        ...(input.stageTo ? { deferHashes: true } : {}),
      });
    } catch (err) {
      throw new ErrPreflight(err instanceof Error ? err.message : String(err), { cause: err });
    }
  }
  // An older version than the node runs is refused unless asked for.
  const running = await bundle.readIdentity(paths.slot(input.sourceSlot)).catch(() => undefined);
  if (
    running && verified.identity && !input.allowDowngrade &&
    bundle.compareVersions(verified.identity.version, running.version) < 0
  ) {
    throw new ErrPreflight(
      `Bundle version ${verified.identity.version} is older than the ${running.version} this node runs: pass --allow-downgrade to go back on purpose`,
    );
  }
  const state = await planTargetState(input, verified);
  const target = isolation.otherSlot(input.sourceSlot);
  const units = await isolation.unitsOf(paths, target);
  const slotDir = paths.slot(target);
  if (units.length > 0 || (await Deno.stat(slotDir).then(() => true, () => false))) {
    throw new ErrPreflight(
      `Target slot ${target} is not free (${units.length ? units.join(", ") : slotDir} exist): ` +
        "a migration left it behind; check `stratum migrate status`",
    );
  }
  // The slot and the installed bundle copy, with room to spare.
  const freeBytes = await freeSpace(paths.slotsDir);
  if (freeBytes < verified.bytes * 2 + 16 * 1024 * 1024) {
    throw new ErrPreflight(
      `Not enough space for slot ${target}: ${freeBytes} bytes free under ${paths.slotsDir}, ` +
        `${verified.bytes * 2 + 16 * 1024 * 1024} needed`,
    );
  }
  if (verified.content.deferred && !input.stageTo) {
    throw new Error("preflight: a verification with its hashes deferred needs stageTo");
  }
  if (input.stageTo) {
    // The last check, once nothing else refuses: the copy that reads the
    // bundle once and checks every file's hash as it does.
    try {
      const dir = installed ? await bundle.installedDir(input.bundleModeDir) : input.bundleModeDir;
      verified = await bundle.stageBundle(dir, input.stageTo, await policy(), verified);
    } catch (err) {
      if (!(err instanceof bundle.BundleError)) throw err;
      throw new ErrPreflight(err.message, { cause: err });
    }
  }
  return {
    bundleFiles: verified.files,
    bundleBytes: verified.bytes,
    freeBytes,
    ...(verified.keyId ? { keyId: verified.keyId } : {}),
    warnings: verified.warnings,
    state,
    verified,
  };
}

/**
 * The stack a verified bundle declares, parsed from the stack.json bytes
 * its verification hashed (`dir` names it in errors): the carrier's
 * directory is not read again. With `mode`, also what that mode allows.
 */
export function stackOf(
  verified: bundle.Verified,
  dir: string,
  mode?: isolation.Mode,
): isolation.Stack {
  const path = join(dir, "stack.json");
  const bytes = verified.content.kept.get("stack.json");
  if (!bytes) throw new isolation.ErrBadStack(`Cannot read ${path}: the bundle has no stack.json`);
  const stack = isolation.parseStack(new TextDecoder().decode(bytes), path);
  // A node image is for nspawn mode (host mode runs the host's userland),
  // and only one the manifest lists was verified.
  if (stack.root !== undefined && mode !== undefined && mode !== "nspawn") {
    throw new isolation.ErrBadStack(
      `${path}: "root" (a node image) is for nspawn mode; ${mode} mode runs the host's userland`,
    );
  }
  if (stack.grants !== undefined && mode !== undefined && mode !== "nspawn") {
    throw new isolation.ErrBadStack(
      `${path}: "grants" are what an nspawn machine is given; ${mode} mode has no machine`,
    );
  }
  if (stack.root !== undefined && !verified.content.listed.has(stack.root)) {
    throw new isolation.ErrBadStack(
      `${path}: "root" names ${stack.root}, which the bundle's manifest does not list`,
    );
  }
  // A host file comes from a file of the bundle, never from a node image's
  // entry or through its links (the prepare checks again: _slot_layout.ts).
  for (const [hostPath, inSlot] of Object.entries(stack.hostFiles ?? {})) {
    if (!verified.content.listed.has(inSlot)) {
      throw new isolation.ErrBadStack(
        `${path}: hostFiles ${
          JSON.stringify(hostPath)
        } names ${inSlot}, which the bundle's manifest does not list`,
      );
    }
  }
  return stack;
}

/**
 * Checks the kernel settings `stack`'s host files ask for (module names,
 * sysctl keys: host_kernel.ts) in the verified bundle at `dir` (`named`
 * in errors): each file is read bounded, without following a link, and
 * must be the bytes its manifest line says. A bad line is ErrBadStack,
 * naming it.
 */
export async function checkKernelFiles(
  verified: bundle.Verified,
  dir: string,
  named: string,
  stack: isolation.Stack,
): Promise<void> {
  for (const [hostPath, inSlot] of Object.entries(stack.hostFiles ?? {})) {
    if (!isolation.isKernelFile(hostPath)) continue;
    const bytes = await host.readSmallFile(join(dir, inSlot), 1 << 20).catch((err) => {
      throw new isolation.ErrBadStack(
        `${join(named, inSlot)}: ${err instanceof Error ? err.message : err}`,
      );
    });
    if (!bytes || (await host.sha256Hex(bytes)) !== verified.content.listed.get(inSlot)) {
      throw new isolation.ErrBadStack(
        `${join(named, inSlot)} is not the file the bundle's manifest lists`,
      );
    }
    const problem = isolation.kernelFileProblem(hostPath, new TextDecoder().decode(bytes));
    if (problem) {
      throw new isolation.ErrBadStack(`${join(named, inSlot)} (hostFiles ${hostPath}): ${problem}`);
    }
  }
}

/** What happens to one state directory of the target before it starts. */
export interface StatePlan {
  readonly path: string;
  /** `keep`: the node's marked data, used as it is; `create`/`claim-empty`: new, made and marked at prepare. */
  readonly action: "keep" | "create" | "claim-empty";
}

/**
 * The target's state directories: each must be the node's marked data, or
 * new to the target (absent, or an empty directory) and declared by no stack
 * that runs now. A directory the source declares but that is missing, empty
 * or foreign is refused: the target would start without the node's data.
 */
async function planTargetState(
  input: PreflightInput,
  verified: bundle.Verified,
): Promise<StatePlan[]> {
  const { paths } = input;
  try {
    const stack = stackOf(verified, input.bundleModeDir, input.to);
    const installed = dirname(input.bundleModeDir) === paths.bundlesDir;
    await checkKernelFiles(
      verified,
      installed ? await bundle.installedDir(input.bundleModeDir) : input.bundleModeDir,
      input.bundleModeDir,
      stack,
    );
    const source = await isolation.readStack(paths.slot(input.sourceSlot)).then(
      (s) => s.state,
      () => [] as readonly string[],
    );
    const identity = await isolation.readIdentity(paths);
    const planned = await isolation.planState(paths, stack.state, identity);
    return planned.map(({ path, action }) => {
      if (action !== "ok" && source.includes(path)) {
        throw new isolation.ErrState(
          path,
          `State directory ${path}, which the running stack uses, is ${
            action === "create" ? "missing" : "empty and unmarked"
          }: the target would start without the node's data`,
        );
      }
      // Nothing is adopted here (no list given): only node install adopts.
      return { path, action: action === "ok" ? "keep" : action as "create" | "claim-empty" };
    });
  } catch (err) {
    if (err instanceof isolation.ErrBadStack || err instanceof isolation.ErrState) {
      throw new ErrPreflight(err.message, { cause: err });
    }
    throw err;
  }
}

/** Bytes available to root on the file system holding `path` (or its nearest existing parent). */
export async function freeSpace(path: string): Promise<number> {
  let p = path;
  while (!(await Deno.stat(p).then(() => true, () => false)) && dirname(p) !== p) p = dirname(p);
  const out = await exec.output(["df", "-P", "-B1", join(p, ".")], { timeoutMs: 10_000 });
  const fields = out.trim().split("\n").pop()!.trim().split(/\s+/);
  return Number(fields[3]);
}
