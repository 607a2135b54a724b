import * as host from "../host/mod.ts";
import * as isolation from "../isolation/mod.ts";
import type * as migrate from "../migrate/mod.ts";
import type { SelfCommand } from "./boot_unit.ts";
import { install } from "./install.ts";
import { checkRequestedWipe, wipeRequested } from "./wipe_state.ts";

/** What a reprovision of this node needs. */
export interface ReprovisionOptions {
  readonly paths: host.HostPaths;
  readonly systemctl: host.Systemctl;
  readonly from: isolation.Mode;
  readonly to: isolation.Mode;
  readonly self: SelfCommand;
  readonly waitReadyMs: number;
  /** The migration's identity (its journal's startedAt, RFC 3339): a `--wipe-state` request must carry it. */
  readonly migrationId: string;
  readonly log?: (line: string) => void;
}

/**
 * The reprovision hooks wired to this node. reset stops and destroys both
 * slots, wipes the state directories only when this reprovision recorded a
 * `--wipe-state` request (the node's data is kept otherwise), removes what the source left on the network and in the host
 * preparation, and moves node.json aside (node.source.json keeps the node's
 * name for the bootstrap; `ack` removes it). bootstrap is `node install` in
 * the target mode from the bundle the run downloaded. Both are idempotent.
 */
export function reprovisionSpec(o: ReprovisionOptions): migrate.ReprovisionSpec {
  const { paths, systemctl } = o;
  const log = o.log ?? (() => {});
  return {
    reset: async (signal) => {
      // A wipe that cannot finish is found before a slot is destroyed.
      await checkRequestedWipe(paths, o.migrationId);
      for (const slot of ["a", "b"] as const) {
        log(`reset: destroying slot ${slot}`);
        await isolation.backendFor(o.from, { paths, systemctl }).destroy(
          { mode: o.from, slot },
          { signal },
        );
      }
      // The node's data is kept unless this reprovision asked for --wipe-state.
      const wiped = await wipeRequested(paths, o.migrationId);
      if (wiped.length > 0) {
        log(`reset: wiped the node's state (--wipe-state): ${wiped.join(", ")}`);
      }
      const r = await host.cleanupNetwork({ root: paths.root, signal });
      log(`reset: network cleaned (${r.links.length} links, ${r.chains.length} chains)`);
      if (await exists(paths.nodeConfig)) {
        await isolation.saveNodeConfig(paths.nodeConfig, paths.nodeConfigSaved);
        await host.removeFileDurable(paths.nodeConfig);
      }
      await isolation.unprepareHost(paths, o.from);
      await systemctl.daemonReload({ signal });
    },
    bootstrap: async (signal) => {
      const saved = await isolation.readNodeConfig(paths.nodeConfigSaved).catch(() => undefined);
      const applied = await isolation.readNodeConfig(paths.nodeConfig).catch(() => undefined);
      const node = applied?.node ?? saved?.node ?? Deno.hostname();
      log(`bootstrap: installing ${node} in ${o.to} mode`);
      await install({
        paths,
        systemctl,
        mode: o.to,
        node,
        self: o.self,
        waitReadyMs: o.waitReadyMs,
        signal,
        log,
      });
    },
  };
}

async function exists(p: string): Promise<boolean> {
  return await Deno.lstat(p).then(() => true, () => false);
}
