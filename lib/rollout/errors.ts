import type * as kube from "../kube/mod.ts";

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

/** Guidance for a kubectl failure that has a known remedy, for the operator. */
export function remedy(
  reason: kube.Reason | "timeout",
  hint: (args: string) => string,
  ns: string,
  target: string,
): string | undefined {
  switch (reason) {
    case "paused":
      return `the Deployment is paused; resume it, then restart: ${
        hint(`-n ${ns} rollout resume ${target}`)
      }`;
    case "untrusted-ca":
      return "the kubeconfig's CA does not verify the apiserver's certificate (a rotated or replaced CA?): refresh the kubeconfig from the new CA, then repeat the restarts";
    case "unauthorized":
      return "the apiserver refused the kubeconfig's credentials (a rotated CA or expired client certificate?): refresh the kubeconfig, then repeat the restarts";
    case "unreachable":
    case "timeout":
      return "the apiserver did not answer in time; check that it is up, then repeat the restarts";
    case "on-delete":
      return `${target} uses the OnDelete update strategy: its pods are replaced only when deleted; delete them one node at a time (${
        hint(`-n ${ns} get pods -o wide`)
      }, then kubectl delete pod)`;
    default:
      return undefined;
  }
}
