import * as kube from "../kube/mod.ts";

/** A problem that may come with what the operator should run or fix first. */
export class HintedError extends Error {
  override name = "HintedError";
  readonly hint: string | undefined;
  constructor(message: string, opts: { cause?: unknown; hint?: string }) {
    super(message, { cause: opts.cause });
    this.hint = opts.hint;
  }
}

/** A target whose restart failed: it still holds its old watches. */
export class RestartError extends HintedError {
  override name = "RestartError";
  readonly target: string;
  constructor(target: string, message: string, opts: { cause?: unknown; hint?: string }) {
    super(message, opts);
    this.target = target;
  }
}

/** The probe of a workload failed for a reason other than absence: it was not restarted. */
export class ProbeError extends HintedError {
  override name = "ProbeError";
}

/**
 * A target that was restarted but whose rollout did not finish within the
 * wait. It may yet finish: a warning, not a failure.
 */
export class RolloutPendingWarning extends HintedError {
  override name = "RolloutPendingWarning";
  readonly target: string;
  constructor(target: string, message: string, opts: { cause?: unknown; hint?: string }) {
    super(message, opts);
    this.target = target;
  }
}

/**
 * A target, or a workload's probe, that a SIGINT or SIGTERM stopped before
 * its outcome was known: the restart may or may not have been applied.
 */
export class InterruptedError extends HintedError {
  override name = "InterruptedError";
  readonly target: string;
  /** True when the restart was applied and only the wait for its rollout was stopped. */
  readonly restarted: boolean;
  constructor(
    target: string,
    restarted: boolean,
    message: string,
    opts: { cause?: unknown; hint?: string },
  ) {
    super(message, opts);
    this.target = target;
    this.restarted = restarted;
  }
}

/**
 * Why a call failed, as far as the operator's remedy goes: kubectl's own
 * reasons, and the three ways a call can fail before kubectl says anything.
 */
export type Why =
  | kube.Reason
  | "timeout" // no answer within the call's deadline: killed
  | "interrupted" // stopped by SIGINT or SIGTERM
  | "kubectl-missing" // no kubectl at that path or on PATH
  | "kubectl-cannot-start"; // a kubectl there, but it cannot be executed

/** The reason of any error a kube.Kubectl call rejects with. */
export function whyOf(err: unknown): Why {
  if (err instanceof kube.KubectlError) return err.reason;
  if (err instanceof kube.ErrCallTimeout) return "timeout";
  if (err instanceof kube.ErrCallInterrupted) return "interrupted";
  if (err instanceof kube.ErrKubectlMissing) {
    return err.present ? "kubectl-cannot-start" : "kubectl-missing";
  }
  return "other";
}

/** What a call did, for `kubectl auth can-i VERB RESOURCE`. */
export type Verb = "get" | "patch" | "watch";

/** "ds/cilium" → "daemonsets.apps", as `kubectl auth can-i` takes it. */
function resourceOf(target: string): string {
  return target.startsWith("ds/") ? "daemonsets.apps" : "deployments.apps";
}

/** Guidance for a failed call that has a known remedy, for the operator. */
export function remedy(
  why: Why,
  commandLine: (args: string) => string,
  ns: string,
  target: string,
  verb: Verb,
): string | undefined {
  switch (why) {
    case "paused":
      return `the Deployment is paused; resume it, then restart: ${
        commandLine(`-n ${ns} rollout resume ${target}`)
      }`;
    case "untrusted-ca":
      return "the kubeconfig's CA does not verify the apiserver's certificate (a rotated or replaced CA?): refresh the kubeconfig from the new CA, then repeat the restarts";
    case "credential-plugin":
      return "the kubeconfig's user gets its credentials from an exec plugin that is missing or failed on this node: install the plugin where stratum's PATH finds it, or use a kubeconfig with a client certificate (e.g. the node's admin kubeconfig)";
    case "unauthorized":
      return "the apiserver refused the kubeconfig's credentials (401: a rotated CA or expired client certificate?): refresh the kubeconfig, then repeat the restarts";
    case "forbidden":
      return `the credentials are valid but RBAC denies this (403); check what they may do: ${
        commandLine(`auth can-i ${verb} ${resourceOf(target)} -n ${ns}`)
      }`;
    case "unreachable":
      return "the apiserver could not be reached (connection refused, no route, or it did not answer its request timeout): check that it is up and that the kubeconfig's server address is right, then repeat the restarts";
    case "timeout":
      return "kubectl got no answer within the call timeout and was killed: check that the apiserver is up and answering (or raise --call-timeout), then repeat the restarts";
    case "kubectl-missing":
      return "kubectl is not installed here, or not on stratum's PATH: install it, or name it with --kubectl PATH";
    case "kubectl-cannot-start":
      return "the kubectl given cannot be executed (permissions, a directory, or not a program for this machine): check it, or name another with --kubectl PATH";
    case "on-delete":
      return `${target} uses the OnDelete update strategy: its pods are replaced only when deleted; delete them one node at a time (${
        commandLine(`-n ${ns} get pods -o wide`)
      }, then kubectl delete pod)`;
    default:
      return undefined;
  }
}
