// Brings up a node's first stack for the sandbox drivers and benchmarks,
// through the same steps as node.install but without waiting for health.
import * as bundle from "../../lib/bundle/mod.ts";
import type * as host from "../../lib/host/mod.ts";
import * as isolation from "../../lib/isolation/mod.ts";
import { bundlePolicy, installBootUnit, type SelfCommand } from "../../lib/node/mod.ts";

/**
 * Brings up a node's first stack in slot `slot` without waiting for it to be
 * healthy: what the test harnesses and benchmarks use to have a node to
 * migrate, through the same steps as node.install.
 */
export async function bringUp(
  o: {
    paths: host.HostPaths;
    systemctl: host.Systemctl;
    mode: isolation.Mode;
    slot: isolation.Slot;
    node: string;
    bundle: string;
    self: SelfCommand;
  },
): Promise<void> {
  const deps = { paths: o.paths, systemctl: o.systemctl };
  await bundle.installBundle(
    `${o.bundle}/${o.mode}`,
    o.paths.bundle(o.mode),
    await bundlePolicy(o.paths),
  );
  const backend = isolation.backendFor(o.mode, deps);
  const stack = await isolation.readStack(o.paths.bundle(o.mode));
  const ref = await backend.prepare({
    slot: o.slot,
    node: o.node,
    bundleDir: o.paths.bundle(o.mode),
    claim: stack.state,
  });
  await backend.start(ref);
  await isolation.writeNodeConfig(o.paths.nodeConfig, { mode: o.mode, slot: o.slot, node: o.node });
  const prepared = await isolation.prepareHost(o.paths, o.mode);
  if ((await installBootUnit(o.paths, o.self)) || prepared) await o.systemctl.daemonReload();
}
