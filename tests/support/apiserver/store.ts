// What the server holds: the resourceVersion counter, namespaces, the
// workloads by "resource/namespace/name", and the open watches, which see
// every change as it is stored. Also list and watch, which read it.

import { json } from "./responses.ts";
import { kindOf, type LoggedRequest, type Obj } from "./types.ts";

interface Watcher {
  resource: string;
  namespace: string;
  name: string | undefined;
  send: (type: string, obj: unknown) => void;
}

export function keyOf(resource: string, ns: string, name: string): string {
  return `${resource}/${ns}/${name}`;
}

export class Store {
  #rv = 100;
  readonly namespaces = new Set<string>();
  readonly objects = new Map<string, Obj>();
  readonly #watchers = new Set<Watcher>();
  /** Timers of controllers and watches, cleared when the server closes. */
  readonly timers = new Set<ReturnType<typeof setTimeout>>();
  /** Aborted when the server closes: held requests and watches end. */
  readonly closing = new AbortController();

  /** The current resourceVersion. */
  get rv(): number {
    return this.#rv;
  }

  /** A new resourceVersion, for an object about to be stored. */
  nextRv(): string {
    return String(++this.#rv);
  }

  /** Stores `obj` at `key` and tells the watches that see it. */
  put(key: string, type: "MODIFIED", obj: Obj): void {
    this.objects.set(key, obj);
    this.#notify(key, type, obj);
  }

  /** Removes the object at `key`, as a delete, and tells the watches. */
  delete(key: string): void {
    const obj = this.objects.get(key);
    if (!obj) return;
    this.objects.delete(key);
    this.#notify(key, "DELETED", obj);
  }

  matching(ns: string, resource: string, fieldSelector: string | undefined): Obj[] {
    const name = /^metadata\.name=(.+)$/.exec(fieldSelector ?? "")?.[1];
    return [...this.objects.entries()]
      .filter(([k, o]) =>
        k.startsWith(`${resource}/${ns}/`) && (name === undefined || o.metadata.name === name)
      )
      .map(([, o]) => o);
  }

  list(ns: string, resource: string, q: Record<string, string>): Response {
    return json({
      apiVersion: "apps/v1",
      kind: kindOf[resource] + "List",
      metadata: { resourceVersion: String(this.#rv) },
      items: this.matching(ns, resource, q.fieldSelector),
    });
  }

  /**
   * A watch, as kubectl opens it: with the initial events and their
   * bookmark, from resourceVersion 0, or from a list's resourceVersion
   * (what changed since is replayed). `stalled`: it opens and sends nothing.
   */
  watch(r: LoggedRequest, ns: string, resource: string, stalled: boolean): Response {
    const name = /^metadata\.name=(.+)$/.exec(r.query.fieldSelector ?? "")?.[1];
    const enc = new TextEncoder();
    let watcher: Watcher | undefined;
    let timer: ReturnType<typeof setTimeout> | undefined;
    const stop = () => {
      if (watcher) this.#watchers.delete(watcher);
      if (timer !== undefined) {
        clearTimeout(timer);
        this.timers.delete(timer);
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
        this.closing.signal.addEventListener("abort", end);
        const secs = Number(r.query.timeoutSeconds ?? "0");
        if (secs > 0) {
          timer = setTimeout(end, secs * 1000);
          this.timers.add(timer);
        }
        if (stalled) return;
        if (r.query.sendInitialEvents === "true") {
          for (const o of this.matching(ns, resource, r.query.fieldSelector)) send("ADDED", o);
          send("BOOKMARK", {
            apiVersion: "apps/v1",
            kind: kindOf[resource],
            metadata: {
              resourceVersion: String(this.#rv),
              annotations: { "k8s.io/initial-events-end": "true" },
            },
          });
        } else if (r.query.resourceVersion === "0" || r.query.resourceVersion === undefined) {
          for (const o of this.matching(ns, resource, r.query.fieldSelector)) send("ADDED", o);
        } else {
          // A watch from a list's resourceVersion: replay what changed since,
          // as the apiserver does, or a change between list and watch is lost.
          const since = Number(r.query.resourceVersion);
          for (const o of this.matching(ns, resource, r.query.fieldSelector)) {
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

  #notify(key: string, type: string, obj: Obj): void {
    for (const w of this.#watchers) {
      if (
        key.startsWith(`${w.resource}/${w.namespace}/`) &&
        (w.name === undefined || w.name === obj.metadata.name)
      ) w.send(type, obj);
    }
  }
}
