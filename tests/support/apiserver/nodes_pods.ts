// Nodes and Pods of the core API, and the eviction subresource: what
// `kubectl drain` and `uncordon` use.

import { json, merge, methodNotAllowed, notFound, status } from "./responses.ts";
import type { Store } from "./store.ts";
import type { LoggedRequest, PodSpec } from "./types.ts";

export class NodesAndPods {
  readonly #store: Store;
  readonly #nodes = new Map<string, Record<string, unknown>>();
  readonly #pods = new Map<string, Record<string, unknown>>();

  constructor(store: Store) {
    this.#store = store;
  }

  /** A Node as the server holds it: `spec.unschedulable` says whether it is cordoned. */
  node(name: string): Record<string, unknown> | undefined {
    return this.#nodes.get(name);
  }

  /** The pods on `node`, as "namespace/name". */
  podsOn(node: string): string[] {
    return [...this.#pods.values()].filter((p) =>
      (p.spec as { nodeName: string }).nodeName === node
    ).map((p) => {
      const m = p.metadata as { namespace: string; name: string };
      return `${m.namespace}/${m.name}`;
    }).sort();
  }

  addNode(name: string): void {
    this.#nodes.set(name, {
      apiVersion: "v1",
      kind: "Node",
      metadata: {
        name,
        uid: crypto.randomUUID(),
        resourceVersion: this.#store.nextRv(),
        labels: { "kubernetes.io/hostname": name },
      },
      spec: {},
      status: { conditions: [{ type: "Ready", status: "True", reason: "KubeletReady" }] },
    });
  }

  /** Puts a pod (back) on a node, as a controller rescheduling it would. */
  addPod(pod: PodSpec): void {
    this.#store.namespaces.add(pod.namespace);
    this.#pods.set(`${pod.namespace}/${pod.name}`, {
      apiVersion: "v1",
      kind: "Pod",
      metadata: {
        name: pod.name,
        namespace: pod.namespace,
        uid: crypto.randomUUID(),
        resourceVersion: this.#store.nextRv(),
        ...(pod.owner
          ? {
            ownerReferences: [{
              apiVersion: "apps/v1",
              kind: pod.owner.kind,
              name: pod.owner.name,
              uid: crypto.randomUUID(),
              controller: true,
            }],
          }
          : {}),
      },
      spec: { nodeName: pod.node, containers: [{ name: "c", image: "registry.local/c:1" }] },
      status: { phase: "Running" },
    });
  }

  /** Core API routes for Nodes, Pods and the eviction subresource; undefined: not one of them. */
  route(r: LoggedRequest): Response | undefined {
    const p = r.path;
    if (p === "/api/v1/nodes" && r.method === "GET") {
      const name = /^metadata\.name=(.+)$/.exec(r.query.fieldSelector ?? "")?.[1];
      const items = [...this.#nodes.values()].filter((n) =>
        name === undefined || (n.metadata as { name: string }).name === name
      );
      return json({
        apiVersion: "v1",
        kind: "NodeList",
        metadata: { resourceVersion: String(this.#store.rv) },
        items,
      });
    }
    let m = /^\/api\/v1\/nodes\/([^/]+)$/.exec(p);
    if (m) {
      const node = this.#nodes.get(m[1]!);
      if (!node) return notFound("", "nodes", m[1]!);
      if (r.method === "GET") return json(node);
      if (r.method === "PATCH") {
        let patch: unknown;
        try {
          patch = JSON.parse(r.body);
        } catch {
          return status(400, "BadRequest", "invalid patch body");
        }
        const next = merge(structuredClone(node), patch) as Record<string, unknown>;
        (next.metadata as { resourceVersion: string }).resourceVersion = this.#store.nextRv();
        this.#nodes.set(m[1]!, next);
        return json(next);
      }
      return methodNotAllowed();
    }
    if (p === "/api/v1/pods" && r.method === "GET") {
      const node = /spec\.nodeName=([^,]+)/.exec(r.query.fieldSelector ?? "")?.[1];
      const items = [...this.#pods.values()].filter((x) =>
        node === undefined || (x.spec as { nodeName: string }).nodeName === node
      );
      return json({
        apiVersion: "v1",
        kind: "PodList",
        metadata: { resourceVersion: String(this.#store.rv) },
        items,
      });
    }
    m = /^\/api\/v1\/namespaces\/([^/]+)\/pods\/([^/]+)(\/eviction)?$/.exec(p);
    if (m) {
      const key = `${m[1]}/${m[2]}`;
      const pod = this.#pods.get(key);
      if (!pod) return notFound("", "pods", m[2]!);
      if (m[3] && r.method === "POST") {
        // No PodDisruptionBudget here: the eviction is allowed and the pod goes.
        this.#pods.delete(key);
        return json({
          kind: "Status",
          apiVersion: "v1",
          metadata: {},
          status: "Success",
          code: 201,
        }, 201);
      }
      if (!m[3] && r.method === "GET") return json(pod);
      return methodNotAllowed();
    }
    return undefined;
  }
}
