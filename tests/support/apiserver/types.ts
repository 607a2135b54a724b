// The simulated API server's public types, and the shapes it stores.

import type { ApiServer } from "../apiserver.ts";

export type Kind = "Deployment" | "DaemonSet";

/** One workload in the simulated cluster. */
export interface WorkloadSpec {
  readonly kind: Kind;
  readonly namespace: string;
  readonly name: string;
  readonly replicas?: number;
  /** A paused Deployment: kubectl refuses to restart it. */
  readonly paused?: boolean;
  /** A DaemonSet with the OnDelete update strategy: patched, nothing rolls. */
  readonly onDelete?: boolean;
  /**
   * How long a rollout takes after a restart, in ms; "never" stalls it;
   * "manual" waits for the test to call complete() or exceedDeadline().
   * Default 300.
   */
  readonly rolloutMs?: RolloutTime;
}

/** How long a workload's rollouts take: ms, "never", or "manual" (the test ends it). */
export type RolloutTime = number | "never" | "manual";

export interface LoggedRequest {
  readonly method: string;
  readonly path: string;
  readonly query: Record<string, string>;
  readonly accept: string;
  readonly contentType: string;
  readonly body: string;
}

/** A request predicate for fault injection. */
export type Match = (r: LoggedRequest) => boolean;

export interface Faults {
  /** Requests that get no answer at all, until the client goes away. */
  hang?: Match;
  /** Requests answered with a 500 Status (no Retry-After, so client-go does not retry). */
  error500?: Match;
  /** Watches that open but never send an event. */
  stallWatch?: Match;
  /** Requests refused by RBAC: 403 Forbidden, as the apiserver words it. */
  forbidden?: Match;
  /** Called after each request is answered: lets a test change the cluster at that moment. */
  after?: (r: LoggedRequest, server: ApiServer) => void;
  /** Called before each request is answered (awaited): lets a test set what it will see. */
  before?: (r: LoggedRequest, server: ApiServer) => void | Promise<void>;
}

export interface ApiServerOptions {
  /** The minor version /version reports; the kubectl dispatcher picks its kubectl by it. */
  readonly minor?: string;
  /** Namespaces that exist besides those of the workloads. */
  readonly namespaces?: readonly string[];
  readonly workloads?: readonly WorkloadSpec[];
  /** Nodes of the cluster (for drain, uncordon and readiness), all Ready. */
  readonly nodes?: readonly string[];
  /** Pods, each on a node; `owner` makes it a DaemonSet's (drain skips it) or a ReplicaSet's. */
  readonly pods?: readonly PodSpec[];
  /** Serve https with this certificate (tests/support/tls.ts makes one); default plain http. */
  readonly tls?: { readonly cert: string; readonly key: string; readonly ca: string };
}

/** A pod in the simulated cluster. */
export interface PodSpec {
  readonly namespace: string;
  readonly name: string;
  readonly node: string;
  readonly owner?: { readonly kind: "DaemonSet" | "ReplicaSet"; readonly name: string };
}

/** What writeKubeconfig puts in the kubeconfig besides the server. */
export interface KubeconfigOptions {
  readonly context?: string;
  /** The kubeconfig's `user:` value, as YAML flow (default `{}`: no credentials). */
  readonly user?: string;
}

/** A Deployment or DaemonSet as the server holds it. */
export type Obj = Record<string, unknown> & {
  metadata: Record<string, unknown> & { resourceVersion: string; generation: number };
  spec: Record<string, unknown>;
  status: Record<string, unknown>;
};

export const plural: Record<Kind, string> = { Deployment: "deployments", DaemonSet: "daemonsets" };
export const kindOf: Record<string, Kind> = { deployments: "Deployment", daemonsets: "DaemonSet" };
