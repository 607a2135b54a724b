import * as bundle from "../bundle/mod.ts";
import type * as host from "../host/mod.ts";
import * as isolation from "../isolation/mod.ts";
import { installBootUnit, type SelfCommand } from "./boot_unit.ts";
import { bundlePolicy } from "./preflight.ts";

/**
 * Brings up a node's first stack: installs the bundle's `mode` directory,
 * builds and starts slot `slot`, records it in node.json, and installs the
 * boot unit that brings that slot up again at every boot. This is what
 * provisioning does before any migration; the tests and the demo use it to
 * have a node to migrate.
 */
export async function installNode(
  o: {
    paths: host.HostPaths;
    systemctl: host.Systemctl;
    mode: isolation.Mode;
    slot: isolation.Slot;
    node: string;
    bundle: string;
    /** How systemd runs stratum, for the boot unit. */
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
  const ref = await backend.prepare({
    slot: o.slot,
    node: o.node,
    bundleDir: o.paths.bundle(o.mode),
  });
  await backend.start(ref);
  await isolation.writeNodeConfig(o.paths.nodeConfig, { mode: o.mode, slot: o.slot, node: o.node });
  const prepared = await isolation.prepareHost(o.paths, o.mode);
  if ((await installBootUnit(o.paths, o.self)) || prepared) await o.systemctl.daemonReload();
}
