// Deployments and DaemonSets: how the server makes them, patches them
// (a restart changes the pod template), and its controllers, which observe
// a new generation at once and finish its rollout after a delay, never, or
// when the test says.

import { json, merge, status } from "./responses.ts";
import { keyOf, type Store } from "./store.ts";
import {
  type Kind,
  type LoggedRequest,
  type Obj,
  plural,
  type RolloutTime,
  type WorkloadSpec,
} from "./types.ts";

export class Controllers {
  readonly #store: Store;
  readonly #rollout = new Map<string, RolloutTime>();

  constructor(store: Store) {
    this.#store = store;
  }

  /** Adds a workload (and its namespace). */
  add(w: WorkloadSpec): void {
    this.#store.namespaces.add(w.namespace);
    const key = keyOf(plural[w.kind], w.namespace, w.name);
    this.#rollout.set(key, w.rolloutMs ?? 300);
    this.#store.objects.set(key, this.#newObject(w));
  }

  /** Changes how long the next rollouts of a workload take. */
  setRollout(kind: Kind, namespace: string, name: string, ms: RolloutTime): void {
    this.#rollout.set(keyOf(plural[kind], namespace, name), ms);
  }

  /** Finishes the workload's rollout now (for "manual" rollouts). */
  complete(kind: Kind, namespace: string, name: string): void {
    const key = keyOf(plural[kind], namespace, name);
    const cur = this.#store.objects.get(key);
    if (!cur) return;
    const done = structuredClone(cur);
    const gen = cur.metadata.generation;
    const replicas = replicasOf(cur);
    done.status = done.kind === "Deployment"
      ? deploymentStatus(gen, replicas, replicas)
      : daemonSetStatus(gen, replicas, replicas);
    done.metadata.resourceVersion = this.#store.nextRv();
    this.#store.put(key, "MODIFIED", done);
  }

  /** The Deployment controller gives up: Progressing=False, ProgressDeadlineExceeded. */
  exceedDeadline(namespace: string, name: string): void {
    const key = keyOf("deployments", namespace, name);
    const cur = this.#store.objects.get(key);
    if (!cur) return;
    const next = structuredClone(cur);
    (next.status as { conditions: unknown[] }).conditions = [{
      type: "Progressing",
      status: "False",
      reason: "ProgressDeadlineExceeded",
      message: `ReplicaSet "${name}-1" has timed out progressing.`,
    }];
    next.metadata.resourceVersion = this.#store.nextRv();
    this.#store.put(key, "MODIFIED", next);
  }

  /** A strategic-merge PATCH: a changed pod template is a new generation, which rolls. */
  patch(key: string, obj: Obj, r: LoggedRequest): Response {
    let patch: unknown;
    try {
      patch = JSON.parse(r.body);
    } catch {
      return status(400, "BadRequest", "invalid patch body");
    }
    const before = JSON.stringify((obj.spec as { template?: unknown }).template);
    const next = merge(structuredClone(obj), patch) as Obj;
    next.metadata.resourceVersion = this.#store.nextRv();
    const templateChanged = JSON.stringify((next.spec as { template?: unknown }).template) !==
      before;
    if (templateChanged) {
      next.metadata.generation = obj.metadata.generation + 1;
      this.#startRollout(key, next);
    }
    this.#store.put(key, "MODIFIED", next);
    return json(next);
  }

  /** The controller: observes the new generation at once, finishes after the delay. */
  #startRollout(key: string, obj: Obj): void {
    const gen = obj.metadata.generation;
    const replicas = replicasOf(obj);
    const onDelete =
      (obj.spec.updateStrategy as { type?: string } | undefined)?.type === "OnDelete";
    obj.status = obj.kind === "Deployment"
      ? deploymentStatus(gen, replicas, 0)
      : daemonSetStatus(gen, replicas, 0);
    const ms = this.#rollout.get(key) ?? 300;
    if (ms === "never" || ms === "manual" || onDelete) return;
    const t = setTimeout(() => {
      this.#store.timers.delete(t);
      const cur = this.#store.objects.get(key);
      if (!cur || cur.metadata.generation !== gen) return;
      const done = structuredClone(cur);
      done.status = done.kind === "Deployment"
        ? deploymentStatus(gen, replicas, replicas)
        : daemonSetStatus(gen, replicas, replicas);
      done.metadata.resourceVersion = this.#store.nextRv();
      this.#store.put(key, "MODIFIED", done);
    }, ms);
    this.#store.timers.add(t);
  }

  #newObject(w: WorkloadSpec): Obj {
    const replicas = w.replicas ?? 2;
    const labels = { app: w.name };
    const base = {
      apiVersion: "apps/v1",
      kind: w.kind,
      metadata: {
        name: w.name,
        namespace: w.namespace,
        uid: crypto.randomUUID(),
        resourceVersion: this.#store.nextRv(),
        generation: 1,
        creationTimestamp: "2026-01-01T00:00:00Z",
        labels,
      },
    };
    const template = {
      metadata: { labels },
      spec: { containers: [{ name: w.name, image: `registry.local/${w.name}:1` }] },
    };
    if (w.kind === "Deployment") {
      return {
        ...base,
        spec: {
          replicas,
          ...(w.paused ? { paused: true } : {}),
          selector: { matchLabels: labels },
          template,
          strategy: { type: "RollingUpdate" },
          progressDeadlineSeconds: 600,
        },
        status: deploymentStatus(1, replicas, replicas),
      };
    }
    return {
      ...base,
      spec: {
        selector: { matchLabels: labels },
        template,
        updateStrategy: { type: w.onDelete ? "OnDelete" : "RollingUpdate" },
      },
      status: daemonSetStatus(1, replicas, replicas),
    };
  }
}

function replicasOf(o: Obj): number {
  return o.kind === "Deployment"
    ? (o.spec.replicas as number)
    : (o.status.desiredNumberScheduled as number);
}

function deploymentStatus(gen: number, replicas: number, updated: number) {
  return {
    observedGeneration: gen,
    replicas: updated === replicas ? replicas : replicas + 1,
    updatedReplicas: updated,
    readyReplicas: replicas,
    availableReplicas: replicas,
    conditions: [{
      type: "Progressing",
      status: "True",
      reason: updated === replicas ? "NewReplicaSetAvailable" : "ReplicaSetUpdated",
    }],
  };
}

function daemonSetStatus(gen: number, desired: number, updated: number) {
  return {
    observedGeneration: gen,
    desiredNumberScheduled: desired,
    currentNumberScheduled: desired,
    numberReady: desired,
    updatedNumberScheduled: updated,
    numberAvailable: updated === desired ? desired : desired - 1,
  };
}
