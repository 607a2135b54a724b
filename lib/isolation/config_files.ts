import type { Mode } from "./mode.ts";

/**
 * The host configuration files each mode's stack writes (absolute host
 * paths). A migration snapshots the union of both lists, so a rollback puts
 * back exactly what the source had: same bytes, same modes, and absent files
 * absent again.
 */
export const configFiles: Readonly<Record<Mode, readonly string[]>> = Object.freeze({
  host: Object.freeze([
    "/etc/sysctl.d/90-stratum.conf",
    "/etc/modules-load.d/stratum.conf",
    "/etc/containerd/config.toml",
    "/etc/default/kubelet",
    "/var/lib/kubelet/config.yaml",
  ]),
  // No .nspawn file: stratum's machines take every setting from their
  // unit's command line (docs/nspawn.md), and no machine is named after one.
  nspawn: Object.freeze([
    "/etc/sysctl.d/90-stratum.conf",
    "/etc/modules-load.d/stratum.conf",
  ]),
});

/** The files a migration between any two modes snapshots. */
export function snapshotFiles(): string[] {
  return [...new Set(Object.values(configFiles).flat())].sort();
}
