import { join } from "node:path";
import * as bundle from "../bundle/mod.ts";
import type * as host from "../host/mod.ts";
import type * as isolation from "../isolation/mod.ts";
import { appliedNode, requireNoJournal } from "./applied.ts";
import { ErrBadRequest } from "./errors.ts";
import { bundlePolicy } from "./preflight.ts";

/** The operator's bundle for the mode the node runs in, checked before anything changes. */
export interface OperatorBundle {
  /** What node.json says runs. */
  readonly current: isolation.NodeConfig;
  /** The bundle's directory for that mode. */
  readonly modeDir: string;
  /** The trust the bundle was checked against (to check it whole later). */
  readonly policy: Awaited<ReturnType<typeof bundlePolicy>>;
  /** Signature, listing, BUNDLE.json and stack.json checked; file hashes not yet. */
  readonly verified: bundle.Verified;
}

/**
 * The opening of a same-mode release change (`node upgrade`, `node
 * repair`), under the migration lock: no journal open, the node installed,
 * the bundle has the node's mode, and its signature, listing, BUNDLE.json
 * and stack.json verify. Each file's hash is left to the copy that stages
 * it (preflight), so the operator's bundle is read once. ErrBadRequest (or
 * a BundleError) when not; nothing has changed then.
 */
export async function operatorBundle(
  paths: host.HostPaths,
  dir: string,
  requireSignature: boolean,
): Promise<OperatorBundle> {
  await requireNoJournal(paths);
  const current = await appliedNode(paths);
  const modeDir = join(dir, current.mode);
  if (!(await Deno.stat(modeDir).then((s) => s.isDirectory, () => false))) {
    throw new ErrBadRequest(
      `--bundle ${dir} has no ${current.mode} directory (the node runs in ${current.mode} mode)`,
    );
  }
  const policy = await bundlePolicy(paths, requireSignature, current.mode);
  const verified = await bundle.verifyBundle(modeDir, { ...policy, deferHashes: true });
  return { current, modeDir, policy, verified };
}
