// A simulated cluster for rollout tests: the API server, a kubeconfig for
// it, a private kubectl cache, and the kube.Config that points the real
// kubectl at it. Use with `await using`, so the server always closes.

import $ from "dax";
import * as kube from "../../lib/kube/mod.ts";
import * as rollout from "../../lib/rollout/mod.ts";
import { ApiServer, type ApiServerOptions, type WorkloadSpec } from "./apiserver.ts";

const sdk = "/usr/lib/google-cloud-sdk/bin";

/** The kubectl minors on this machine (1.27 to 1.33 on the image), each binary by path. */
export const kubectlVersions: { minor: string; binary: string }[] = (() => {
  const found: { minor: string; binary: string }[] = [];
  for (let m = 20; m <= 40; m++) {
    const binary = `${sdk}/kubectl.1.${m}`;
    try {
      Deno.statSync(binary);
      found.push({ minor: String(m), binary });
    } catch { /* not on this machine */ }
  }
  return found;
})();

/** The kubectl most tests use: 1.32 when the image has it, else whatever is on PATH. */
export const defaultKubectl = kubectlVersions.find((v) => v.minor === "32")?.binary ?? "kubectl";

/** Why kubectl tests cannot run here, or undefined when they can. */
export const noKubectl: string | undefined = (() => {
  try {
    const r = new Deno.Command(defaultKubectl, {
      args: ["version", "--client"],
      stdout: "null",
      stderr: "null",
    })
      .outputSync();
    return r.success ? undefined : `${defaultKubectl} version --client failed`;
  } catch (e) {
    return `no kubectl on this machine (${e instanceof Error ? e.message : e})`;
  }
})();

/** Every Stratum workload, present, rolling out in `ms`. */
export function stratumWorkloads(ms: number | "never" | "manual" = 100): WorkloadSpec[] {
  return [
    { kind: "DaemonSet", namespace: "kube-system", name: "cilium", rolloutMs: ms },
    { kind: "Deployment", namespace: "kube-system", name: "cilium-operator", rolloutMs: ms },
    { kind: "Deployment", namespace: "kube-system", name: "coredns", rolloutMs: ms },
    {
      kind: "Deployment",
      namespace: "local-path-storage",
      name: "local-path-provisioner",
      rolloutMs: ms,
    },
    {
      kind: "Deployment",
      namespace: "stratum-dashboard",
      name: "stratum-dashboard",
      rolloutMs: ms,
    },
  ];
}

/** User workloads in the same namespaces, which must never be touched. */
export const userWorkloads: WorkloadSpec[] = [
  { kind: "Deployment", namespace: "kube-system", name: "metrics-server" },
  { kind: "DaemonSet", namespace: "kube-system", name: "cilium-envoy" },
  { kind: "Deployment", namespace: "local-path-storage", name: "my-app" },
];

export class SimCluster implements AsyncDisposable {
  private constructor(
    readonly server: ApiServer,
    readonly dir: string,
    readonly kubeconfig: string,
    readonly cfg: kube.Config,
  ) {}

  static async start(
    opts: ApiServerOptions & { binary?: string; env?: Record<string, string> } = {},
  ) {
    const server = await ApiServer.start(opts);
    const dir = await Deno.makeTempDir({ prefix: "stratum-sim-" });
    const kubeconfig = await server.writeKubeconfig(dir);
    const cfg: kube.Config = {
      binary: opts.binary ?? defaultKubectl,
      kubeconfig,
      // TZ: kubectl's restartedAt is local time; tests that forge one use UTC.
      env: { KUBECACHEDIR: `${dir}/cache`, TZ: "UTC", ...opts.env },
    };
    return new SimCluster(server, dir, kubeconfig, cfg);
  }

  roller(
    opts: {
      callTimeout?: number;
      wait?: number;
      onProgress?: (p: rollout.Progress) => void;
      signal?: AbortSignal;
    } = {},
  ) {
    return new rollout.Roller({
      kubectl: kube.kubectl(this.cfg),
      commandLine: kube.commandLine(this.cfg),
      callTimeout: opts.callTimeout ?? 10_000,
      wait: opts.wait ?? 20_000,
      ...(opts.onProgress ? { onProgress: opts.onProgress } : {}),
      ...(opts.signal ? { signal: opts.signal } : {}),
    });
  }

  /** Finishes every "manual" rollout of Stratum's workloads now. */
  completeAll(): void {
    for (const w of stratumWorkloads()) this.server.complete(w.kind, w.namespace, w.name);
  }

  /** Environment for running the CLI against this cluster. */
  cliEnv(): Record<string, string> {
    return { KUBECACHEDIR: `${this.dir}/cache`, ...(this.cfg.env ?? {}) };
  }

  async [Symbol.asyncDispose](): Promise<void> {
    await this.server.close();
    await Deno.remove(this.dir, { recursive: true }).catch(() => {});
  }
}

/** Processes whose command line mentions `needle` (a test's unique kubeconfig path). */
export async function processesMentioning(needle: string): Promise<string[]> {
  // Deno wants --allow-all to read /proc, so ask ps.
  const out = await $`ps -eo pid=,args=`.text();
  return out.split("\n").filter((l) => l.includes(needle) && !l.includes(" ps -eo"));
}
