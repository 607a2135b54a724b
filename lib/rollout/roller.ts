import { join, messageOf } from "../errors/mod.ts";
import * as kube from "../kube/mod.ts";
import { ProbeError, remedy, RestartError, RolloutPendingWarning } from "./errors.ts";
import { type Workload, Workloads } from "./workloads.ts";

/** How one target of a workload ended. */
export interface TargetResult {
  readonly target: string;
  /**
   * rolled-out: restarted and finished; pending: restarted, not finished in
   * time (or nothing rolls: OnDelete); failed: the restart failed.
   */
  readonly state: "rolled-out" | "pending" | "failed";
  readonly error?: Error;
}

/**
 * What Roller.restart reports for one Workload. `err` joins the restarts
 * that failed (those components still hold their old watches) or the probe
 * that could not tell; `warn` joins the rollouts that did not finish in time
 * (they were restarted and may yet finish, so the operator's recovery must
 * not wait on them).
 */
export interface Result {
  readonly name: string;
  readonly namespace: string;
  /** False when the cluster does not run it. */
  readonly present: boolean;
  readonly warn?: Error;
  readonly err?: Error;
  readonly targets: readonly TargetResult[];
}

/** What Roller reports while it works, for live progress. */
export type Progress =
  | { readonly kind: "probed"; readonly workload: string; readonly present: boolean }
  | { readonly kind: "restarted"; readonly target: string }
  | { readonly kind: "restart-failed"; readonly target: string; readonly error: Error }
  | { readonly kind: "waiting"; readonly targets: readonly string[]; readonly waitMs: number }
  | { readonly kind: "rolled-out"; readonly target: string }
  | { readonly kind: "pending"; readonly target: string; readonly error: Error };

/** What a Roller needs. */
export interface RollerOptions {
  /** Runs one kubectl call under its own deadline; a call with no answer in time is killed. */
  readonly kubectl: kube.Kubectl;
  /** The command line an operator runs by hand against the same apiserver, for args. */
  readonly hint: (args: string) => string;
  /** Bounds one discovery or restart call, in ms. */
  readonly callTimeout: number;
  /** How long restart waits for all the rollouts it started, in total, in ms. */
  readonly wait: number;
  /** Called as work progresses. Optional. */
  readonly onProgress?: (p: Progress) => void;
}

/** How much longer than the remaining wait a status call may live before it is killed. */
const statusGraceMs = 1500;
/** kubectl refuses a second restart within the same second (restartedAt has 1 s resolution). */
const sameSecondRetryMs = 1100;

/** Restarts Workloads through the apiserver its kubectl talks to. */
export class Roller {
  readonly kubectl: kube.Kubectl;
  readonly hint: (args: string) => string;
  readonly callTimeout: number;
  readonly wait: number;
  readonly #progress: (p: Progress) => void;

  constructor(opts: RollerOptions) {
    this.kubectl = opts.kubectl;
    this.hint = opts.hint;
    this.callTimeout = opts.callTimeout;
    this.wait = opts.wait;
    this.#progress = opts.onProgress ?? (() => {});
  }

  /**
   * Probes each workload in its own namespace (absent: skipped), restarts the
   * targets of those present (in order within a workload, workloads side by
   * side, one kubectl call per target so a failure is attributed), then waits
   * for every rollout it started, side by side, under one total deadline.
   * Results come in Workloads order. Nothing outside Workloads is touched.
   */
  async restart(): Promise<Result[]> {
    const probed = await Promise.all(Workloads.map((w) => this.#probe(w)));

    const restarted = await Promise.all(
      Workloads.map((w, i) => probed[i] === true ? this.#restartTargets(w) : Promise.resolve([])),
    );

    const toWatch = Workloads.flatMap((w, i) =>
      restarted[i]!.filter((t) => !t.error).map((t) => ({ w, target: t.target }))
    );
    const deadline = performance.now() + this.wait;
    if (toWatch.length > 0) {
      this.#progress({ kind: "waiting", targets: toWatch.map((t) => t.target), waitMs: this.wait });
    }
    const watched = new Map<string, TargetResult>(
      await Promise.all(toWatch.map(async ({ w, target }) => {
        const r = await this.#watch(w, target, deadline);
        return [`${w.namespace}/${target}`, r] as const;
      })),
    );

    return Workloads.map((w, i): Result => {
      const p = probed[i]!;
      if (p !== true) {
        return p === false
          ? { name: w.name, namespace: w.namespace, present: false, targets: [] }
          : { name: w.name, namespace: w.namespace, present: true, err: p, targets: [] };
      }
      const targets = restarted[i]!.map((t) =>
        t.error ? t : watched.get(`${w.namespace}/${t.target}`)!
      );
      const err = join(...targets.filter((t) => t.state === "failed").map((t) => t.error));
      const warn = join(...targets.filter((t) => t.state === "pending").map((t) => t.error));
      return {
        name: w.name,
        namespace: w.namespace,
        present: true,
        ...(err ? { err } : {}),
        ...(warn ? { warn } : {}),
        targets,
      };
    });
  }

  /** true: present; false: absent (object or namespace not found); an Error: cannot tell. */
  async #probe(w: Workload): Promise<boolean | Error> {
    const args = ["get", w.probe, "-n", w.namespace, "-o", "name", ...this.#requestTimeout()];
    try {
      await this.kubectl(args, { timeout: this.callTimeout });
      this.#progress({ kind: "probed", workload: w.name, present: true });
      return true;
    } catch (err) {
      if (err instanceof kube.KubectlError && err.reason === "not-found") {
        this.#progress({ kind: "probed", workload: w.name, present: false });
        return false;
      }
      const reason = err instanceof kube.KubectlError ? err.reason : "timeout";
      const hint = remedy(reason, this.hint, w.namespace, w.probe);
      return new ProbeError(`Cannot tell whether ${w.name} runs: ${messageOf(err)}`, {
        cause: err,
        ...(hint ? { hint } : {}),
      });
    }
  }

  async #restartTargets(w: Workload): Promise<TargetResult[]> {
    const out: TargetResult[] = [];
    for (const target of w.targets) {
      const error = await this.#restartOne(w, target);
      if (error) {
        this.#progress({ kind: "restart-failed", target, error });
        out.push({ target, state: "failed", error });
      } else {
        this.#progress({ kind: "restarted", target });
        out.push({ target, state: "rolled-out" });
      }
    }
    return out;
  }

  async #restartOne(w: Workload, target: string): Promise<RestartError | undefined> {
    const args = ["rollout", "restart", target, "-n", w.namespace, ...this.#requestTimeout()];
    for (let attempt = 0;; attempt++) {
      try {
        await this.kubectl(args, { timeout: this.callTimeout });
        return undefined;
      } catch (err) {
        if (
          attempt === 0 && err instanceof kube.KubectlError && err.reason === "already-restarted"
        ) {
          await new Promise((r) => setTimeout(r, sameSecondRetryMs));
          continue;
        }
        const reason = err instanceof kube.KubectlError ? err.reason : "timeout";
        const hint = remedy(reason, this.hint, w.namespace, target);
        const what = reason === "not-found"
          ? `${target} not found in ${w.namespace} (deleted since the probe?)`
          : messageOf(err);
        return new RestartError(target, `Restart of ${target} failed: ${what}`, {
          cause: err,
          ...(hint ? { hint } : {}),
        });
      }
    }
  }

  async #watch(w: Workload, target: string, deadline: number): Promise<TargetResult> {
    const remaining = deadline - performance.now();
    const statusHint = this.hint(`-n ${w.namespace} rollout status ${target}`);
    const pending = (message: string, cause: unknown, hint = statusHint): TargetResult => {
      const error = new RolloutPendingWarning(target, message, { cause, hint });
      this.#progress({ kind: "pending", target, error });
      return { target, state: "pending", error };
    };
    const waitText = kube.formatMs(this.wait);
    if (remaining <= 0) {
      return pending(`${target} restarted; rollout not finished within ${waitText}`, undefined);
    }
    const args = [
      "rollout",
      "status",
      target,
      "-n",
      w.namespace,
      "--watch=true",
      `--timeout=${kube.durationFlag(remaining)}`,
    ];
    try {
      await this.kubectl(args, { timeout: remaining + statusGraceMs });
      this.#progress({ kind: "rolled-out", target });
      return { target, state: "rolled-out" };
    } catch (err) {
      const reason = err instanceof kube.KubectlError ? err.reason : "timeout";
      switch (reason) {
        case "rollout-timeout":
        case "timeout":
          return pending(
            `${target} restarted; rollout not finished within ${waitText}: it may yet finish`,
            err,
          );
        case "on-delete":
          return pending(
            `${target} restarted, but nothing rolls until its pods are deleted (OnDelete)`,
            err,
            remedy("on-delete", this.hint, w.namespace, target),
          );
        case "progress-deadline":
          return pending(`${target} restarted; its rollout exceeded its progress deadline`, err);
        case "deleted":
          return pending(`${target} restarted, then deleted while its rollout was watched`, err);
        default:
          return pending(`${target} restarted; cannot watch its rollout: ${messageOf(err)}`, err);
      }
    }
  }

  #requestTimeout(): string[] {
    return [`--request-timeout=${kube.durationFlag(this.callTimeout)}`];
  }
}
