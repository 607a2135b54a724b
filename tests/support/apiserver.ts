// A simulated Kubernetes API server for the real kubectl: enough of the API
// for `kubectl get`, `kubectl rollout restart` and `kubectl rollout status`
// on Deployments and DaemonSets (discovery, get, strategic-merge PATCH, list,
// watch and watch-list with the initial-events bookmark), with controllers
// that finish a rollout after a delay or never, fault injection, and a log of
// every request. docs/kubectl-wire.md says what kubectl sends and expects.

import { join } from "node:path";

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
  readonly rolloutMs?: number | "never" | "manual";
}

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

type Obj = Record<string, unknown> & {
  metadata: Record<string, unknown> & { resourceVersion: string; generation: number };
  spec: Record<string, unknown>;
  status: Record<string, unknown>;
};

interface Watcher {
  resource: string;
  namespace: string;
  name: string | undefined;
  send: (type: string, obj: unknown) => void;
}

const plural: Record<Kind, string> = { Deployment: "deployments", DaemonSet: "daemonsets" };
const kindOf: Record<string, Kind> = { deployments: "Deployment", daemonsets: "DaemonSet" };

/** The simulated API server. Start with {@linkcode ApiServer.start}; always `close()`. */
export class ApiServer {
  readonly requests: LoggedRequest[] = [];
  faults: Faults = {};
  #rv = 100;
  #namespaces = new Set<string>();
  #objects = new Map<string, Obj>();
  #rollout = new Map<string, number | "never" | "manual">();
  #watchers = new Set<Watcher>();
  #timers = new Set<ReturnType<typeof setTimeout>>();
  #closing = new AbortController();
  #server!: Deno.HttpServer;
  #minor: string;
  #tls: ApiServerOptions["tls"];
  #nodes = new Map<string, Record<string, unknown>>();
  #pods = new Map<string, Record<string, unknown>>();

  private constructor(opts: ApiServerOptions) {
    this.#minor = opts.minor ?? "32";
    this.#tls = opts.tls;
    for (const ns of opts.namespaces ?? []) this.#namespaces.add(ns);
    for (const w of opts.workloads ?? []) this.add(w);
    for (const n of opts.nodes ?? []) this.#nodes.set(n, this.#newNode(n));
    for (const pod of opts.pods ?? []) this.#addPod(pod);
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

  /** Puts a pod (back) on a node, as a controller rescheduling it would. */
  addPod(pod: PodSpec): void {
    this.#addPod(pod);
  }

  #newNode(name: string): Record<string, unknown> {
    return {
      apiVersion: "v1",
      kind: "Node",
      metadata: {
        name,
        uid: crypto.randomUUID(),
        resourceVersion: String(++this.#rv),
        labels: { "kubernetes.io/hostname": name },
      },
      spec: {},
      status: { conditions: [{ type: "Ready", status: "True", reason: "KubeletReady" }] },
    };
  }

  #addPod(pod: PodSpec): void {
    this.#namespaces.add(pod.namespace);
    this.#pods.set(`${pod.namespace}/${pod.name}`, {
      apiVersion: "v1",
      kind: "Pod",
      metadata: {
        name: pod.name,
        namespace: pod.namespace,
        uid: crypto.randomUUID(),
        resourceVersion: String(++this.#rv),
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
  #routeCore(r: LoggedRequest): Response | undefined {
    const p = r.path;
    if (p === "/api/v1/nodes" && r.method === "GET") {
      const name = /^metadata\.name=(.+)$/.exec(r.query.fieldSelector ?? "")?.[1];
      const items = [...this.#nodes.values()].filter((n) =>
        name === undefined || (n.metadata as { name: string }).name === name
      );
      return json({
        apiVersion: "v1",
        kind: "NodeList",
        metadata: { resourceVersion: String(this.#rv) },
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
        (next.metadata as { resourceVersion: string }).resourceVersion = String(++this.#rv);
        this.#nodes.set(m[1]!, next);
        return json(next);
      }
      return status(405, "MethodNotAllowed", "method not allowed");
    }
    if (p === "/api/v1/pods" && r.method === "GET") {
      const node = /spec\.nodeName=([^,]+)/.exec(r.query.fieldSelector ?? "")?.[1];
      const items = [...this.#pods.values()].filter((x) =>
        node === undefined || (x.spec as { nodeName: string }).nodeName === node
      );
      return json({
        apiVersion: "v1",
        kind: "PodList",
        metadata: { resourceVersion: String(this.#rv) },
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
      return status(405, "MethodNotAllowed", "method not allowed");
    }
    return undefined;
  }

  static start(opts: ApiServerOptions = {}): Promise<ApiServer> {
    const s = new ApiServer(opts);
    return new Promise((resolve) => {
      const listen = { hostname: "127.0.0.1", port: 0, onListen: () => resolve(s) };
      const tls = opts.tls ? { cert: opts.tls.cert, key: opts.tls.key } : {};
      s.#server = Deno.serve({ ...listen, ...tls }, (req) => s.#handle(req));
    });
  }

  get url(): string {
    const addr = this.#server.addr as Deno.NetAddr;
    return `${this.#tls ? "https" : "http"}://127.0.0.1:${addr.port}`;
  }

  /**
   * Writes a kubeconfig for this server into `dir` (with its CA when it
   * serves https; no credentials unless `opts.user` says); returns its path.
   */
  async writeKubeconfig(dir: string, opts: KubeconfigOptions = {}): Promise<string> {
    const path = join(dir, "kubeconfig");
    const context = opts.context ?? "sim";
    const ca = this.#tls ? `\n    certificate-authority-data: ${btoa(this.#tls.ca)}` : "";
    await Deno.writeTextFile(
      path,
      `apiVersion: v1
kind: Config
clusters:
- name: sim
  cluster:
    server: ${this.url}${ca}
users:
- name: sim
  user: ${opts.user ?? "{}"}
contexts:
- name: ${context}
  context:
    cluster: sim
    user: sim
current-context: ${context}
`,
    );
    return path;
  }

  /** Adds a workload (and its namespace). */
  add(w: WorkloadSpec): void {
    this.#namespaces.add(w.namespace);
    const key = keyOf(plural[w.kind], w.namespace, w.name);
    this.#rollout.set(key, w.rolloutMs ?? 300);
    this.#objects.set(key, this.#newObject(w));
  }

  /** Removes a workload, as a `kubectl delete` between probe and restart would. */
  remove(kind: Kind, namespace: string, name: string): void {
    const key = keyOf(plural[kind], namespace, name);
    const obj = this.#objects.get(key);
    if (!obj) return;
    this.#objects.delete(key);
    this.#notify(key, "DELETED", obj);
  }

  /** Changes how long the next rollouts of a workload take. */
  setRollout(kind: Kind, namespace: string, name: string, ms: number | "never" | "manual"): void {
    this.#rollout.set(keyOf(plural[kind], namespace, name), ms);
  }

  /** The controller finishes the workload's rollout now (for "manual" rollouts). */
  complete(kind: Kind, namespace: string, name: string): void {
    const key = keyOf(plural[kind], namespace, name);
    const cur = this.#objects.get(key);
    if (!cur) return;
    const done = structuredClone(cur);
    const gen = cur.metadata.generation;
    const replicas = replicasOf(cur);
    done.status = done.kind === "Deployment"
      ? deploymentStatus(gen, replicas, replicas)
      : daemonSetStatus(gen, replicas, replicas);
    done.metadata.resourceVersion = String(++this.#rv);
    this.#objects.set(key, done);
    this.#notify(key, "MODIFIED", done);
  }

  /** The Deployment controller gives up: Progressing=False, ProgressDeadlineExceeded. */
  exceedDeadline(namespace: string, name: string): void {
    const key = keyOf("deployments", namespace, name);
    const cur = this.#objects.get(key);
    if (!cur) return;
    const next = structuredClone(cur);
    (next.status as { conditions: unknown[] }).conditions = [{
      type: "Progressing",
      status: "False",
      reason: "ProgressDeadlineExceeded",
      message: `ReplicaSet "${name}-1" has timed out progressing.`,
    }];
    next.metadata.resourceVersion = String(++this.#rv);
    this.#objects.set(key, next);
    this.#notify(key, "MODIFIED", next);
  }

  /** The object as the server holds it, for assertions. */
  get(kind: Kind, namespace: string, name: string): Obj | undefined {
    return this.#objects.get(keyOf(plural[kind], namespace, name));
  }

  /** The PATCH requests, as "resource/namespace/name". */
  patched(): string[] {
    return this.requests.filter((r) => r.method === "PATCH").map((r) =>
      r.path.replace(/^\/apis\/apps\/v1\/namespaces\/([^/]+)\/([^/]+)\/([^/]+)$/, "$2/$1/$3")
    );
  }

  async close(): Promise<void> {
    this.#closing.abort();
    for (const t of this.#timers) clearTimeout(t);
    await this.#server.shutdown();
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
        resourceVersion: String(++this.#rv),
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

  async #handle(req: Request): Promise<Response> {
    const url = new URL(req.url);
    const body = req.method === "GET" ? "" : await req.text();
    const logged: LoggedRequest = {
      method: req.method,
      path: url.pathname,
      query: Object.fromEntries(url.searchParams),
      accept: req.headers.get("accept") ?? "",
      contentType: req.headers.get("content-type") ?? "",
      body,
    };
    this.requests.push(logged);
    await this.faults.before?.(logged, this);
    if (this.faults.hang?.(logged)) {
      // Held until the server closes; a killed client just drops the connection.
      await new Promise<void>((resolve) => {
        this.#closing.signal.addEventListener("abort", () => resolve());
      });
      return status(503, "ServiceUnavailable", "server closing");
    }
    if (this.faults.error500?.(logged)) return status(500, "InternalError", "injected failure");
    if (this.faults.forbidden?.(logged)) return forbidden(logged);
    const res = this.#route(logged);
    this.faults.after?.(logged, this);
    return res;
  }

  #route(r: LoggedRequest): Response {
    const p = r.path;
    if (p === "/version") {
      return json({
        major: "1",
        minor: this.#minor,
        gitVersion: `v1.${this.#minor}.0`,
        platform: "linux/amd64",
      });
    }
    if (p === "/api") {
      return json({
        kind: "APIVersions",
        versions: ["v1"],
        serverAddressByClientCIDRs: [{ clientCIDR: "0.0.0.0/0", serverAddress: "127.0.0.1" }],
      });
    }
    if (p === "/apis") {
      const v = { groupVersion: "apps/v1", version: "v1" };
      const policy = { groupVersion: "policy/v1", version: "v1" };
      return json({
        kind: "APIGroupList",
        apiVersion: "v1",
        groups: [
          { name: "apps", versions: [v], preferredVersion: v },
          { name: "policy", versions: [policy], preferredVersion: policy },
        ],
      });
    }
    if (p === "/api/v1") {
      const list = resourceList("v1", [
        ["namespaces", "Namespace", false, ["ns"]],
        ["nodes", "Node", false, ["no"]],
        ["pods", "Pod", true, ["po"]],
      ]);
      // The eviction subresource, as drain looks for it: group policy, version v1.
      list.resources.push({
        name: "pods/eviction",
        singularName: "",
        namespaced: true,
        kind: "Eviction",
        verbs: ["create"],
        shortNames: [],
        group: "policy",
        version: "v1",
      } as never);
      return json(list);
    }
    if (p === "/apis/policy/v1") {
      return json(
        resourceList("policy/v1", [["poddisruptionbudgets", "PodDisruptionBudget", true, ["pdb"]]]),
      );
    }
    const core = this.#routeCore(r);
    if (core) return core;
    if (p === "/apis/apps/v1") {
      return json(resourceList("apps/v1", [
        ["deployments", "Deployment", true, ["deploy"]],
        ["daemonsets", "DaemonSet", true, ["ds"]],
      ]));
    }
    let m = /^\/api\/v1\/namespaces\/([^/]+)$/.exec(p);
    if (m && r.method === "GET") {
      const ns = m[1]!;
      if (!this.#namespaces.has(ns)) return notFound("", "namespaces", ns);
      return json({
        apiVersion: "v1",
        kind: "Namespace",
        metadata: { name: ns, resourceVersion: "1" },
        status: { phase: "Active" },
      });
    }
    m = /^\/apis\/apps\/v1\/namespaces\/([^/]+)\/(deployments|daemonsets)(?:\/([^/]+))?$/.exec(p);
    if (m) {
      const [, ns, resource, name] = m as unknown as [string, string, string, string | undefined];
      if (name === undefined && r.method === "GET") {
        return r.query.watch === "true"
          ? this.#watch(r, ns, resource)
          : this.#list(ns, resource, r.query);
      }
      if (name === undefined) return status(405, "MethodNotAllowed", "method not allowed");
      const key = keyOf(resource, ns, name);
      const obj = this.#objects.get(key);
      if (!obj) return notFound("apps", resource, name);
      if (r.method === "GET") return json(obj);
      if (r.method === "PATCH") return this.#patch(key, obj, r);
      return status(405, "MethodNotAllowed", "method not allowed");
    }
    return status(404, "NotFound", "the server could not find the requested resource");
  }

  #list(ns: string, resource: string, q: Record<string, string>): Response {
    return json({
      apiVersion: "apps/v1",
      kind: kindOf[resource] + "List",
      metadata: { resourceVersion: String(this.#rv) },
      items: this.#matching(ns, resource, q.fieldSelector),
    });
  }

  #matching(ns: string, resource: string, fieldSelector: string | undefined): Obj[] {
    const name = /^metadata\.name=(.+)$/.exec(fieldSelector ?? "")?.[1];
    return [...this.#objects.entries()]
      .filter(([k, o]) =>
        k.startsWith(`${resource}/${ns}/`) && (name === undefined || o.metadata.name === name)
      )
      .map(([, o]) => o);
  }

  #watch(r: LoggedRequest, ns: string, resource: string): Response {
    const name = /^metadata\.name=(.+)$/.exec(r.query.fieldSelector ?? "")?.[1];
    const enc = new TextEncoder();
    const stalled = this.faults.stallWatch?.(r) ?? false;
    let watcher: Watcher | undefined;
    let timer: ReturnType<typeof setTimeout> | undefined;
    const stop = () => {
      if (watcher) this.#watchers.delete(watcher);
      if (timer !== undefined) {
        clearTimeout(timer);
        this.#timers.delete(timer);
      }
    };
    const stream = new ReadableStream<Uint8Array>({
      start: (ctrl) => {
        const send = (type: string, object: unknown) => {
          try {
            ctrl.enqueue(enc.encode(JSON.stringify({ type, object }) + "\n"));
          } catch { /* client gone */ }
        };
        const end = () => {
          stop();
          try {
            ctrl.close();
          } catch { /* already closed */ }
        };
        this.#closing.signal.addEventListener("abort", end);
        const secs = Number(r.query.timeoutSeconds ?? "0");
        if (secs > 0) {
          timer = setTimeout(end, secs * 1000);
          this.#timers.add(timer);
        }
        if (stalled) return;
        if (r.query.sendInitialEvents === "true") {
          for (const o of this.#matching(ns, resource, r.query.fieldSelector)) send("ADDED", o);
          send("BOOKMARK", {
            apiVersion: "apps/v1",
            kind: kindOf[resource],
            metadata: {
              resourceVersion: String(this.#rv),
              annotations: { "k8s.io/initial-events-end": "true" },
            },
          });
        } else if (r.query.resourceVersion === "0" || r.query.resourceVersion === undefined) {
          for (const o of this.#matching(ns, resource, r.query.fieldSelector)) send("ADDED", o);
        } else {
          // A watch from a list's resourceVersion: replay what changed since,
          // as the apiserver does, or a change between list and watch is lost.
          const since = Number(r.query.resourceVersion);
          for (const o of this.#matching(ns, resource, r.query.fieldSelector)) {
            if (Number(o.metadata.resourceVersion) > since) send("MODIFIED", o);
          }
        }
        watcher = { resource, namespace: ns, name, send };
        this.#watchers.add(watcher);
      },
      cancel: stop,
    });
    return new Response(stream, {
      headers: { "content-type": "application/json", "transfer-encoding": "chunked" },
    });
  }

  #patch(key: string, obj: Obj, r: LoggedRequest): Response {
    let patch: unknown;
    try {
      patch = JSON.parse(r.body);
    } catch {
      return status(400, "BadRequest", "invalid patch body");
    }
    const before = JSON.stringify((obj.spec as { template?: unknown }).template);
    const next = merge(structuredClone(obj), patch) as Obj;
    next.metadata.resourceVersion = String(++this.#rv);
    const templateChanged = JSON.stringify((next.spec as { template?: unknown }).template) !==
      before;
    if (templateChanged) {
      next.metadata.generation = obj.metadata.generation + 1;
      this.#startRollout(key, next);
    }
    this.#objects.set(key, next);
    this.#notify(key, "MODIFIED", next);
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
      this.#timers.delete(t);
      const cur = this.#objects.get(key);
      if (!cur || cur.metadata.generation !== gen) return;
      const done = structuredClone(cur);
      done.status = done.kind === "Deployment"
        ? deploymentStatus(gen, replicas, replicas)
        : daemonSetStatus(gen, replicas, replicas);
      done.metadata.resourceVersion = String(++this.#rv);
      this.#objects.set(key, done);
      this.#notify(key, "MODIFIED", done);
    }, ms);
    this.#timers.add(t);
  }

  #notify(key: string, type: string, obj: Obj): void {
    for (const w of this.#watchers) {
      if (
        key.startsWith(`${w.resource}/${w.namespace}/`) &&
        (w.name === undefined || w.name === obj.metadata.name)
      ) w.send(type, obj);
    }
  }
}

function keyOf(resource: string, ns: string, name: string): string {
  return `${resource}/${ns}/${name}`;
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

function resourceList(groupVersion: string, rs: [string, string, boolean, string[]][]) {
  return {
    kind: "APIResourceList",
    apiVersion: "v1",
    groupVersion,
    resources: rs.map(([name, kind, namespaced, shortNames]) => ({
      name,
      singularName: kind.toLowerCase(),
      namespaced,
      kind,
      verbs: ["create", "delete", "get", "list", "patch", "update", "watch"],
      shortNames,
    })),
  };
}

/** JSON merge, which is what a strategic merge patch of maps does. */
function merge(target: unknown, patch: unknown): unknown {
  if (typeof patch !== "object" || patch === null || Array.isArray(patch)) return patch;
  const out = (typeof target === "object" && target !== null && !Array.isArray(target))
    ? { ...(target as Record<string, unknown>) }
    : {};
  for (const [k, v] of Object.entries(patch)) {
    if (v === null) delete out[k];
    else out[k] = merge(out[k], v);
  }
  return out;
}

function json(body: unknown, code = 200): Response {
  return new Response(JSON.stringify(body), {
    status: code,
    headers: { "content-type": "application/json" },
  });
}

function status(code: number, reason: string, message: string): Response {
  return json({
    kind: "Status",
    apiVersion: "v1",
    metadata: {},
    status: "Failure",
    message,
    reason,
    code,
  }, code);
}

/** 403 in the apiserver's words: `deployments.apps "x" is forbidden: User ... cannot patch ...`. */
function forbidden(r: LoggedRequest): Response {
  const m = /^\/apis\/apps\/v1\/namespaces\/([^/]+)\/([^/]+)(?:\/([^/]+))?$/.exec(r.path);
  const [ns, resource, name] = m ? [m[1]!, m[2]!, m[3]] : ["", "namespaces", undefined];
  const verb = r.method === "PATCH"
    ? "patch"
    : r.query.watch === "true"
    ? "watch"
    : name
    ? "get"
    : "list";
  const what = name ? `${resource}.apps "${name}"` : `${resource}.apps`;
  return status(
    403,
    "Forbidden",
    `${what} is forbidden: User "system:serviceaccount:default:limited" cannot ${verb} resource "${resource}" in API group "apps" in the namespace "${ns}"`,
  );
}

function notFound(group: string, resource: string, name: string): Response {
  const qualified = group ? `${resource}.${group}` : resource;
  return json({
    kind: "Status",
    apiVersion: "v1",
    metadata: {},
    status: "Failure",
    message: `${qualified} "${name}" not found`,
    reason: "NotFound",
    details: { name, group: group || undefined, kind: resource },
    code: 404,
  }, 404);
}
