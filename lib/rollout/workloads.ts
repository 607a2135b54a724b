/**
 * A set of in-cluster workloads that hold watches or credentials from before
 * an operation, restarted together as one entry in its report.
 */
export interface Workload {
  /** As reported to the operator. */
  readonly name: string;
  /** Where its targets live. */
  readonly namespace: string;
  /** An object whose presence says the cluster runs it. */
  readonly probe: string;
  /** What is rolled, in this order. */
  readonly targets: readonly string[];
}

/**
 * The workloads Stratum restarts itself, after the control plane's own
 * watchers. Cilium's service table and endpoint state, and CoreDNS's Service
 * and EndpointSlice view (headless-Service names answer from it), are built
 * from watches that now point past etcd's restored resourceVersions. The
 * local-path provisioner watches PersistentVolumeClaims, so a claim restored
 * from the snapshot stays unprovisioned until it has restarted; it is there
 * only when the cluster's default storage is local-path. Each workload is
 * found in its own namespace and skipped when absent.
 *
 * Not here, on purpose: cilium-envoy (no ClusterRole, config from a mounted
 * ConfigMap and the agent, no API watch); containerd and the cluster
 * controller (no long watch); user workloads and third-party controllers,
 * which a restore must never restart since that would widen a destructive
 * command to what it does not own (docs/snapshot-restore.md gives the
 * command to restart them by hand).
 */
export const Workloads: readonly Workload[] = Object.freeze([
  w("cilium agent + operator", "kube-system", "ds/cilium", ["ds/cilium", "deploy/cilium-operator"]),
  w("coredns", "kube-system", "deploy/coredns", ["deploy/coredns"]),
  w("local-path provisioner", "local-path-storage", "deploy/local-path-provisioner", [
    "deploy/local-path-provisioner",
  ]),
  w("dashboard", "stratum-dashboard", "deploy/stratum-dashboard", ["deploy/stratum-dashboard"]),
]);

function w(name: string, namespace: string, probe: string, targets: string[]): Workload {
  return Object.freeze({ name, namespace, probe, targets: Object.freeze(targets) });
}

const prefixOfKind: Readonly<Record<string, string>> = {
  Deployment: "deploy/",
  DaemonSet: "ds/",
};

/**
 * Reports whether `kind` (a Kubernetes kind: Deployment or DaemonSet) named
 * `name` in `namespace` is one of the targets Stratum rolls itself, so a
 * caller that looks for workloads Stratum does not own can leave these out.
 * Any other kind is never owned.
 */
export function owned(kind: string, name: string, namespace: string): boolean {
  const prefix = prefixOfKind[kind];
  if (prefix === undefined) return false;
  return Workloads.some((w) => w.namespace === namespace && w.targets.includes(prefix + name));
}

/**
 * One `rollout restart` command per namespace for the workloads the restore
 * rolls, namespaces in first-appearance order, each prefixed by `commandLine` (which
 * adds kubectl and the flags that reach the same apiserver). One list, so the
 * guidance cannot drift from what the restore does. `workloads` narrows it,
 * e.g. to the targets whose restart failed; by default all of Workloads.
 */
export function restartCommands(
  commandLine: (args: string) => string = (a) => `kubectl ${a}`,
  workloads: readonly Workload[] = Workloads,
): string[] {
  const byNamespace = new Map<string, string[]>();
  for (const w of workloads) {
    if (w.targets.length === 0) continue;
    const targets = byNamespace.get(w.namespace) ?? [];
    targets.push(...w.targets);
    byNamespace.set(w.namespace, targets);
  }
  return [...byNamespace].map(([ns, targets]) =>
    commandLine(`-n ${ns} rollout restart ${targets.join(" ")}`)
  );
}
