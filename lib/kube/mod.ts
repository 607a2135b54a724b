/**
 * The kubectl runner: every call through dax, under its own deadline, killed
 * with its children when it hangs, and its failure turned into a typed error
 * whose `reason` tells apart what kubectl's exit code 1 lumps together.
 *
 * @example Probe a workload under a 10 s deadline
 * ```ts
 * import * as kube from "./mod.ts";
 * const run = kube.kubectl({ kubeconfig: "/etc/stratum/admin.conf" });
 * try {
 *   await run(["get", "ds/cilium", "-n", "kube-system", "-o", "name"], { timeout: 10_000 });
 * } catch (err) {
 *   if (err instanceof kube.KubectlError && err.reason === "not-found") {
 *     // not installed
 *   }
 * }
 * ```
 *
 * @module
 */

export {
  classify,
  ErrCallInterrupted,
  ErrCallTimeout,
  ErrKubectlMissing,
  formatMs,
  KubectlError,
  type Reason,
} from "./errors.ts";
export {
  type CallOptions,
  commandLine,
  type Config,
  connectionArgs,
  durationFlag,
  type Kubectl,
  kubectl,
} from "./kubectl.ts";
