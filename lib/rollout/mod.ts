/**
 * Restarts the in-cluster workloads Stratum owns, so that every command that
 * has to do it (snapshot restore, rotate-ca) rolls one list.
 *
 * After an etcd snapshot restore, Cilium's and CoreDNS's watches point past
 * the restored resourceVersions; after a CA rotation, in-cluster clients hold
 * the old CA. {@linkcode Roller} restarts {@linkcode Workloads} and reports,
 * per workload, a failed restart (`err`) apart from a slow rollout (`warn`);
 * {@linkcode restartCommands} gives the same restarts as commands to run by
 * hand.
 *
 * @example Restart with a 5 minute total wait
 * ```ts
 * import * as kube from "../kube/mod.ts";
 * import * as rollout from "./mod.ts";
 * const cfg = { kubeconfig: "/etc/stratum/admin.conf" };
 * const roller = new rollout.Roller({
 *   kubectl: kube.kubectl(cfg),
 *   commandLine: kube.commandLine(cfg),
 *   callTimeout: 30_000,
 *   wait: 300_000,
 * });
 * for (const r of await roller.restart()) console.log(r.name, r.err ?? r.warn ?? "ok");
 * ```
 *
 * @module
 */

export {
  HintedError,
  InterruptedError,
  ProbeError,
  RestartError,
  RolloutPendingWarning,
  type Why,
  whyOf,
} from "./errors.ts";
export {
  type Progress,
  type Result,
  Roller,
  type RollerOptions,
  type TargetResult,
} from "./roller.ts";
export { owned, restartCommands, type Workload, Workloads } from "./workloads.ts";
