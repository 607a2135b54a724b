import { join, messageOf } from "../errors/mod.ts";
import * as kube from "../kube/mod.ts";
import {
  InterruptedError,
  ProbeError,
  remedy,
  RestartError,
  RolloutPendingWarning,
  whyOf,
} from "./errors.ts";
import { type Workload, Workloads } from "./workloads.ts";

/** How one target of a workload ended. */
export interface TargetResult {
  readonly target: string;
  /**
   * rolled-out: restarted and finished; pending: restarted, not finished in
   * time (or nothing rolls: OnDelete); failed: the restart failed;
   * interrupted: SIGINT/SIGTERM came before its outcome was known.
   */
  readonly state: "rolled-out" | "pending" | "failed" | "interrupted";
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
  /** Joins the targets (or the probe) a SIGINT/SIGTERM stopped before their outcome was known. */
  readonly interrupted?: Error;
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
  readonly commandLine: (args: string) => string;
  /**
   * Bounds one discovery or restart call, in ms: the call is killed at it.
   * kubectl gets no `--request-timeout`: at the same deadline it adds nothing,
   * and when it fires first its error ("Unable to connect to the server:
   * context deadline exceeded") names neither the request nor the deadline and
   * reads as an unreachable apiserver (docs/kubectl-wire.md).
   */
  readonly callTimeout: number;
  /** How long restart waits for all the rollouts it started, in total, in ms. */
  readonly wait: number;
  /** Called as work progresses. Optional. */
  readonly onProgress?: (p: Progress) => void;
  /**
   * Stops the work (SIGINT, SIGTERM): calls under way are killed, nothing
   * new starts, and restart resolves with what is known so far.
   */
  readonly signal?: AbortSignal;
}

/** How much longer than the remaining wait a status call may live before it is killed. */
const statusGraceMs = 1500;
/** kubectl refuses a second restart within the same second (restartedAt has 1 s resolution). */
const sameSecondRetryMs = 1100;

/** Restarts Workloads through the apiserver its kubectl talks to. */
export class Roller {
  readonly kubectl: kube.Kubectl;
  readonly commandLine: (args: string) => string;
  readonly callTimeout: number;
  readonly wait: number;
  readonly #progress: (p: Progress) => void;
  readonly #signal: AbortSignal | undefined;

  constructor(opts: RollerOptions) {
    this.kubectl = opts.kubectl;
    this.commandLine = opts.commandLine;
    this.callTimeout = opts.callTimeout;
    this.wait = opts.wait;
    this.#progress = opts.onProgress ?? (() => {});
    this.#signal = opts.signal;
  }

  /**
   * Probes each workload in its own namespace (absent: skipped), restarts the
   * targets of those present (in order within a workload, workloads side by
   * side, one kubectl call per target so a failure is attributed), then waits
   * for every rollout it started, side by side, under one total deadline.
   * Results come in Workloads order. Nothing outside Workloads is touched.
   * When the signal fires, calls under way are killed and what had not
   * finished is reported as interrupted.
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
      if (p === false) return { name: w.name, namespace: w.namespace, present: false, targets: [] };
      if (p instanceof InterruptedError) {
        // Never probed to the end: none of its targets was restarted.
        const targets = w.targets.map((target): TargetResult => ({
          target,
          state: "interrupted",
          error: this.#interrupted(target, "not restarted"),
        }));
        return { ...this.#summary(w, targets), interrupted: p };
      }
      if (p !== true) {
        return { name: w.name, namespace: w.namespace, present: true, err: p, targets: [] };
      }
      const targets = restarted[i]!.map((t) =>
        t.error ? t : watched.get(`${w.namespace}/${t.target}`)!
      );
      return this.#summary(w, targets);
    });
  }

  /** A present workload's Result from its targets' outcomes. */
  #summary(w: Workload, targets: TargetResult[]): Result {
    const of = (state: TargetResult["state"]) =>
      join(...targets.filter((t) => t.state === state).map((t) => t.error));
    const err = of("failed");
    const warn = of("pending");
    const interrupted = of("interrupted");
    return {
      name: w.name,
      namespace: w.namespace,
      present: true,
      ...(err ? { err } : {}),
      ...(warn ? { warn } : {}),
      ...(interrupted ? { interrupted } : {}),
      targets,
    };
  }

  /** A target whose restart did not run, or may not have been applied. */
  #interrupted(target: string, what: string, cause?: unknown): InterruptedError {
    return new InterruptedError(target, false, `${target}: ${what} (interrupted)`, { cause });
  }

  /**
   * true: present; false: absent; an Error: cannot tell. Absence is only
   * ever a clean exit with nothing printed (`--ignore-not-found` turns the
   * object's or its namespace's NotFound into that); every failure is an
   * error, whatever its text says.
   */
  async #probe(w: Workload): Promise<boolean | Error> {
    if (this.#signal?.aborted) return this.#interrupted(w.probe, "not probed");
    const args = [
      "get",
      w.probe,
      "-n",
      w.namespace,
      "--ignore-not-found",
      "-o",
      "name",
    ];
    let out: string;
    try {
      out = await this.kubectl(args, { timeout: this.callTimeout, signal: this.#signal });
    } catch (err) {
      const why = whyOf(err);
      if (why === "interrupted") return this.#interrupted(w.probe, "probe stopped", err);
      const hint = remedy(why, this.commandLine, w.namespace, w.probe, "get");
      return new ProbeError(`Cannot tell whether ${w.name} runs: ${messageOf(err)}`, {
        cause: err,
        ...(hint ? { hint } : {}),
      });
    }
    const present = out.trim() !== "";
    this.#progress({ kind: "probed", workload: w.name, present });
    return present;
  }

  async #restartTargets(w: Workload): Promise<TargetResult[]> {
    const out: TargetResult[] = [];
    for (const target of w.targets) {
      if (this.#signal?.aborted) {
        out.push({
          target,
          state: "interrupted",
          error: this.#interrupted(target, "not restarted"),
        });
        continue;
      }
      const error = await this.#restartOne(w, target);
      if (error instanceof InterruptedError) {
        out.push({ target, state: "interrupted", error });
      } else if (error) {
        this.#progress({ kind: "restart-failed", target, error });
        out.push({ target, state: "failed", error });
      } else {
        this.#progress({ kind: "restarted", target });
        out.push({ target, state: "rolled-out" });
      }
    }
    return out;
  }

  async #restartOne(
    w: Workload,
    target: string,
  ): Promise<RestartError | InterruptedError | undefined> {
    const args = ["rollout", "restart", target, "-n", w.namespace];
    for (let attempt = 0;; attempt++) {
      try {
        await this.kubectl(args, { timeout: this.callTimeout, signal: this.#signal });
        return undefined;
      } catch (err) {
        const why = whyOf(err);
        if (attempt === 0 && why === "already-restarted") {
          // restartedAt has 1 s resolution: a second restart within the second sends no patch.
          if (await this.#pause(sameSecondRetryMs)) continue;
          return this.#interrupted(target, "not restarted");
        }
        if (why === "interrupted") {
          return this.#interrupted(
            target,
            "restart stopped; it may or may not have been applied",
            err,
          );
        }
        const hint = remedy(why, this.commandLine, w.namespace, target, "patch");
        const what = why === "not-found"
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
    const statusHint = this.commandLine(`-n ${w.namespace} rollout status ${target}`);
    const pending = (message: string, cause: unknown, hint = statusHint): TargetResult => {
      const error = new RolloutPendingWarning(target, message, { cause, hint });
      this.#progress({ kind: "pending", target, error });
      return { target, state: "pending", error };
    };
    const waitText = kube.formatMs(this.wait);
    const stopped = (cause?: unknown): TargetResult => ({
      target,
      state: "interrupted",
      error: new InterruptedError(
        target,
        true,
        `${target}: restarted; stopped waiting for its rollout (interrupted)`,
        { cause, hint: statusHint },
      ),
    });
    if (this.#signal?.aborted) return stopped();
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
      await this.kubectl(args, { timeout: remaining + statusGraceMs, signal: this.#signal });
      this.#progress({ kind: "rolled-out", target });
      return { target, state: "rolled-out" };
    } catch (err) {
      const why = whyOf(err);
      switch (why) {
        case "interrupted":
          return stopped(err);
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
            remedy("on-delete", this.commandLine, w.namespace, target, "watch"),
          );
        case "progress-deadline":
          return pending(`${target} restarted; its rollout exceeded its progress deadline`, err);
        case "deleted":
          return pending(`${target} restarted, then deleted while its rollout was watched`, err);
        default:
          return pending(
            `${target} restarted; cannot watch its rollout: ${messageOf(err)}`,
            err,
            remedy(why, this.commandLine, w.namespace, target, "watch") ?? statusHint,
          );
      }
    }
  }

  /** Waits `ms`; false when the signal fired first. */
  #pause(ms: number): Promise<boolean> {
    const signal = this.#signal;
    if (signal?.aborted) return Promise.resolve(false);
    return new Promise((resolve) => {
      const done = (ok: boolean) => {
        clearTimeout(timer);
        signal?.removeEventListener("abort", onAbort);
        resolve(ok);
      };
      const onAbort = () => done(false);
      const timer = setTimeout(() => done(true), ms);
      signal?.addEventListener("abort", onAbort);
    });
  }
}
