// A simulated Kubernetes API server for the real kubectl: enough of the API
// for `kubectl get`, `kubectl rollout restart` and `kubectl rollout status`
// on Deployments and DaemonSets (discovery, get, strategic-merge PATCH, list,
// watch and watch-list with the initial-events bookmark), with controllers
// that finish a rollout after a delay or never, fault injection, and a log of
// every request. docs/kubectl-wire.md says what kubectl sends and expects.
//
// This module is the server (listening, fault injection, routing) and what
// tests call; each concern is a module of its own in apiserver/: the store
// and its watches (store.ts), the workloads' controllers (controllers.ts),
// discovery (discovery.ts), nodes and pods (nodes_pods.ts), the answers in
// the apiserver's words (responses.ts) and the types (types.ts).

import { join } from "node:path";
import { Controllers } from "./apiserver/controllers.ts";
import { discovery } from "./apiserver/discovery.ts";
import { NodesAndPods } from "./apiserver/nodes_pods.ts";
import { forbidden, json, methodNotAllowed, notFound, status } from "./apiserver/responses.ts";
import { keyOf, Store } from "./apiserver/store.ts";
import {
  type ApiServerOptions,
  type Faults,
  type Kind,
  type KubeconfigOptions,
  type LoggedRequest,
  type Obj,
  plural,
  type PodSpec,
  type RolloutTime,
  type WorkloadSpec,
} from "./apiserver/types.ts";

export type {
  ApiServerOptions,
  Faults,
  Kind,
  KubeconfigOptions,
  LoggedRequest,
  Match,
  PodSpec,
  WorkloadSpec,
} from "./apiserver/types.ts";

/** The simulated API server. Start with {@linkcode ApiServer.start}; always `close()`. */
export class ApiServer {
  readonly requests: LoggedRequest[] = [];
  faults: Faults = {};
  readonly #store = new Store();
  readonly #controllers = new Controllers(this.#store);
  readonly #core = new NodesAndPods(this.#store);
  #server!: Deno.HttpServer;
  readonly #minor: string;
  readonly #tls: ApiServerOptions["tls"];

  private constructor(opts: ApiServerOptions) {
    this.#minor = opts.minor ?? "32";
    this.#tls = opts.tls;
    for (const ns of opts.namespaces ?? []) this.#store.namespaces.add(ns);
    for (const w of opts.workloads ?? []) this.add(w);
    for (const n of opts.nodes ?? []) this.#core.addNode(n);
    for (const pod of opts.pods ?? []) this.#core.addPod(pod);
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

  /** A Node as the server holds it: `spec.unschedulable` says whether it is cordoned. */
  node(name: string): Record<string, unknown> | undefined {
    return this.#core.node(name);
  }

  /** The pods on `node`, as "namespace/name". */
  podsOn(node: string): string[] {
    return this.#core.podsOn(node);
  }

  /** Puts a pod (back) on a node, as a controller rescheduling it would. */
  addPod(pod: PodSpec): void {
    this.#core.addPod(pod);
  }

  /** Adds a workload (and its namespace). */
  add(w: WorkloadSpec): void {
    this.#controllers.add(w);
  }

  /** Removes a workload, as a `kubectl delete` between probe and restart would. */
  remove(kind: Kind, namespace: string, name: string): void {
    this.#store.delete(keyOf(plural[kind], namespace, name));
  }

  /** Changes how long the next rollouts of a workload take. */
  setRollout(kind: Kind, namespace: string, name: string, ms: RolloutTime): void {
    this.#controllers.setRollout(kind, namespace, name, ms);
  }

  /** The controller finishes the workload's rollout now (for "manual" rollouts). */
  complete(kind: Kind, namespace: string, name: string): void {
    this.#controllers.complete(kind, namespace, name);
  }

  /** The Deployment controller gives up: Progressing=False, ProgressDeadlineExceeded. */
  exceedDeadline(namespace: string, name: string): void {
    this.#controllers.exceedDeadline(namespace, name);
  }

  /** The object as the server holds it, for assertions. */
  get(kind: Kind, namespace: string, name: string): Obj | undefined {
    return this.#store.objects.get(keyOf(plural[kind], namespace, name));
  }

  /** The PATCH requests, as "resource/namespace/name". */
  patched(): string[] {
    return this.requests.filter((r) => r.method === "PATCH").map((r) =>
      r.path.replace(/^\/apis\/apps\/v1\/namespaces\/([^/]+)\/([^/]+)\/([^/]+)$/, "$2/$1/$3")
    );
  }

  async close(): Promise<void> {
    this.#store.closing.abort();
    for (const t of this.#store.timers) clearTimeout(t);
    await this.#server.shutdown();
  }

  /** Logs the request, applies the faults, then routes it. */
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
        this.#store.closing.signal.addEventListener("abort", () => resolve());
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
    const found = discovery(p, this.#minor) ?? this.#core.route(r);
    if (found) return found;
    let m = /^\/api\/v1\/namespaces\/([^/]+)$/.exec(p);
    if (m && r.method === "GET") {
      const ns = m[1]!;
      if (!this.#store.namespaces.has(ns)) return notFound("", "namespaces", ns);
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
          ? this.#store.watch(r, ns, resource, this.faults.stallWatch?.(r) ?? false)
          : this.#store.list(ns, resource, r.query);
      }
      if (name === undefined) return methodNotAllowed();
      const key = keyOf(resource, ns, name);
      const obj = this.#store.objects.get(key);
      if (!obj) return notFound("apps", resource, name);
      if (r.method === "GET") return json(obj);
      if (r.method === "PATCH") return this.#controllers.patch(key, obj, r);
      return methodNotAllowed();
    }
    return status(404, "NotFound", "the server could not find the requested resource");
  }
}
