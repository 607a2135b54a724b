import { join } from "node:path";

/**
 * Every host path stratum touches, under one root (`--root`, default `/`),
 * so tests can run against a scratch tree. systemd itself reads units only
 * from the real /etc/systemd/system, so commands that start units are
 * meaningful with root `/` (inside the test sandbox, that is its overlay).
 */
export interface HostPaths {
  readonly root: string;
  readonly journal: string;
  readonly nodeConfig: string;
  /** The node's identity, which marks its state directories as its own (made by the first install). */
  readonly identity: string;
  /** The source's node config, kept until the migration is over. */
  readonly nodeConfigSaved: string;
  readonly slotsDir: string;
  /** A reprovision's `--wipe-state` request, tagged with its migration. */
  readonly wipeRequest: string;
  readonly snapshotDir: string;
  readonly lock: string;
  readonly unitDir: string;
  readonly bundlesDir: string;
  /** The public keys (`*.pem`) a bundle must be signed by, when any are installed. */
  readonly trustDir: string;
  /** The node's history of installs, moves, upgrades and their outcomes (lib/node/history.ts). */
  readonly history: string;
  readonly bpfDir: string;
  readonly aptPreferencesDir: string;
  slot(name: string): string;
  bundle(mode: string): string;
  /** `p` (an absolute host path) under the root. */
  at(p: string): string;
}

export function hostPaths(root = "/"): HostPaths {
  const at = (p: string) => join(root, p);
  return {
    root,
    journal: at("/var/lib/stratum/migration.json"),
    nodeConfig: at("/etc/stratum/node.json"),
    identity: at("/etc/stratum/identity.json"),
    nodeConfigSaved: at("/var/lib/stratum/node.source.json"),
    slotsDir: at("/var/lib/stratum/slots"),
    wipeRequest: at("/var/lib/stratum/wipe-state.json"),
    history: at("/var/lib/stratum/history.jsonl"),
    snapshotDir: at("/var/lib/stratum/config-snapshot"),
    lock: at("/run/stratum/migrate.lock"),
    unitDir: at("/etc/systemd/system"),
    bundlesDir: at("/var/lib/stratum/bundles"),
    trustDir: at("/etc/stratum/trust"),
    bpfDir: at("/sys/fs/bpf/stratum"),
    aptPreferencesDir: at("/etc/apt/preferences.d"),
    slot: (s) => at(`/var/lib/stratum/slots/${s}`),
    bundle: (m) => at(`/var/lib/stratum/bundles/${m}`),
    at,
  };
}
