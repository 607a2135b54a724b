import { join, normalize } from "node:path";
import { snapshotFiles } from "./config_files.ts";
import { stateListProblem } from "./state.ts";

/**
 * What a bundle's node stack runs, from its `stack.json`. In `exec`,
 * `${SLOT}` is the slot's directory as the stack sees it (the slot path on
 * the host; `/` inside an nspawn machine) and `${NODE}` the node's name.
 */
export interface Stack {
  readonly services: readonly Service[];
  /**
   * What says the stack is up; every probe given must pass. `url`: an HTTP
   * URL that answers 2xx. `exec`: a command that exits 0, run in the
   * stack's own context (on the host in host mode, inside the slot's
   * machine in nspawn mode), e.g. `ctr version`, `etcdctl endpoint health`;
   * `${SLOT}` and `${NODE}` are substituted as in a service's `exec`.
   */
  readonly health: { readonly url: string; readonly exec?: readonly string[] };
  /**
   * Host config files the stack writes when its slot is prepared: host path
   * (absolute) → file in the slot. They are among the files a migration
   * snapshots.
   */
  readonly hostFiles?: Readonly<Record<string, string>>;
  /**
   * Absolute host paths that hold the node's persistent data. They live
   * outside the slots, are never copied or removed by a migration, and are
   * used in place in host mode and bound read-write at the same path into an
   * nspawn machine. Empty when the stack keeps nothing.
   */
  readonly state: readonly string[];
  /**
   * Cgroups (paths from the hierarchy's root, e.g. `/stratum` for
   * containerd's namespace `stratum`, `/kubepods.slice`) where the stack's
   * workloads live, outside its services' units: containers outlive the
   * runtime that started them, by design. Stopping a host-mode slot (or
   * destroying one while the other slot is down: a rollback's target) kills
   * every process in them, and fails while one is left. In nspawn mode the
   * paths are inside the machine, whose stratum-workloads.service kills
   * them as it goes down.
   */
  readonly workloads?: readonly string[];
  /**
   * The container runtime among the stack's services, so that stopping a
   * host-mode slot stops every container it ran, whatever its namespace
   * (`k8s.io`, the operator's own) or cgroup (`kubepods.slice`,
   * `/<namespace>/<id>`): `workloads` covers only the cgroups the stack's
   * author thought of. In nspawn mode every container is in the machine's
   * cgroup, which systemd kills whole when the machine stops.
   */
  readonly runtime?: Runtime;
  /**
   * nspawn mode only: a tar archive in the mode directory holding the
   * machine's own root tree, a node image with its own /usr and systemd
   * (as kind's node image), so the stack's userland does not depend on the
   * host's. Unpacked into the slot when it is prepared; without it the
   * machine borrows the host's /usr read-only.
   */
  readonly root?: string;
  /**
   * nspawn mode only: what the machine is given beyond its defaults, from a
   * closed vocabulary (grants). Each widens what root in the machine can
   * do to the host, so a stack asks for what it needs and nothing is given
   * to every machine.
   */
  readonly grants?: readonly Grant[];
}

/**
 * What an nspawn-mode stack may ask its machine to be given:
 *
 * - `kernel-log`: `/dev/kmsg` bound read-only and CAP_SYSLOG. kubelet's
 *   OOM watcher reads the kernel log and kubelet will not start without it
 *   (`failed to create kubelet: open /dev/kmsg: no such file or
 *   directory`); reading it needs CAP_SYSLOG where `kernel.dmesg_restrict`
 *   is 1 (Debian's default). Cost: root in the machine reads the host's
 *   kernel log, and CAP_SYSLOG also lets it clear the ring buffer and see
 *   kernel addresses in /proc that `kptr_restrict=1` hides.
 */
export type Grant = "kernel-log";
/** Every grant a stack may name. */
export const grants: readonly Grant[] = ["kernel-log"];

/**
 * A stack's container runtime, from a closed vocabulary of kinds whose
 * containers stratum can find: `containerd` mounts each container's root
 * file system at `<state>/io.containerd.runtime.v2.task/<namespace>/<id>/rootfs`
 * on the host (`state` is its config's `state`, `/run/containerd` unless
 * set), and every process of that container has it as its root.
 */
export interface Runtime {
  readonly kind: RuntimeKind;
  readonly state: string;
}
/** The container runtimes a stack may name. */
export type RuntimeKind = "containerd";
/** Every runtime kind a stack may name, with its default state directory. */
export const runtimeKinds: Readonly<Record<RuntimeKind, { state: string }>> = {
  containerd: { state: "/run/containerd" },
};

/** One service of a stack: a process stratum runs and systemd supervises. */
export interface Service {
  /** Lowercase letters, digits and dashes: part of its unit's name. */
  readonly name: string;
  readonly exec: readonly string[];
  /**
   * Services of the same stack this one starts after, and stops before
   * (systemd's Requires= and After=): containerd before what uses its
   * socket. Each must be listed; no cycles.
   */
  readonly after?: readonly string[];
  /**
   * The service manages cgroups of its own (a container runtime): its unit
   * gets `Delegate=yes`, so runc may create and control the cgroups of
   * the containers under it, and they are stopped with it.
   */
  readonly delegate?: boolean;
}

/** The fields a stack.json may have: any other is a typo that must not pass silently. */
const stackFields = [
  "services",
  "health",
  "hostFiles",
  "state",
  "workloads",
  "runtime",
  "root",
  "grants",
];
/** The fields a service may have. */
const serviceFields = ["name", "exec", "after", "delegate"];

/**
 * Service names stratum's own units inside an nspawn machine take
 * (`stratum-<name>.service`, and the machine's unit on the host): a stack's
 * service by one of them would replace stratum's unit, or be replaced by it.
 * `ready` and `probe` are the readiness check's and the command probe's.
 */
export const reservedServiceNames: readonly string[] = [
  "end",
  "workloads",
  "ready",
  "probe",
  "machine",
  "stack",
];

/** A bundle or slot whose stack.json cannot be used. */
export class ErrBadStack extends Error {
  override name = "ErrBadStack";
}

/** Reads and checks `stack.json` in `dir` (a bundle's mode directory or a slot). */
export async function readStack(dir: string): Promise<Stack> {
  const path = join(dir, "stack.json");
  let text: string;
  try {
    text = await Deno.readTextFile(path);
  } catch (err) {
    throw new ErrBadStack(`Cannot read ${path}: ${err instanceof Error ? err.message : err}`);
  }
  return parseStack(text, path);
}

/**
 * Checks the text of a `stack.json` (`path` names it in errors): what a
 * bundle's verification kept is parsed, never the carrier's file again.
 */
export function parseStack(text: string, path: string): Stack {
  let o: Record<string, unknown>;
  try {
    o = JSON.parse(text);
  } catch (err) {
    throw new ErrBadStack(`Cannot read ${path}: ${err instanceof Error ? err.message : err}`);
  }
  if (typeof o !== "object" || o === null || Array.isArray(o)) {
    throw new ErrBadStack(`${path}: not a JSON object`);
  }
  const unknown = Object.keys(o).filter((k) => !stackFields.includes(k));
  if (unknown.length > 0) {
    throw new ErrBadStack(
      `${path}: unknown field ${unknown.map((k) => JSON.stringify(k)).join(", ")} (known: ${
        stackFields.join(", ")
      })`,
    );
  }
  const services = o.services;
  if (
    !Array.isArray(services) || services.length === 0 ||
    !services.every((s) =>
      typeof s?.name === "string" && /^[a-z0-9-]+$/.test(s.name) && Array.isArray(s.exec) &&
      s.exec.length > 0 && s.exec.every((a: unknown) => typeof a === "string")
    )
  ) {
    throw new ErrBadStack(`${path}: "services" must list {name, exec[]} with lowercase names`);
  }
  for (const [i, svc] of services.entries()) {
    const extra = Object.keys(svc).filter((k) => !serviceFields.includes(k));
    if (extra.length > 0) {
      throw new ErrBadStack(
        `${path}: services[${i}] has unknown field ${JSON.stringify(extra[0])} (known: ${
          serviceFields.join(", ")
        })`,
      );
    }
    if (reservedServiceNames.includes(svc.name)) {
      throw new ErrBadStack(
        `${path}: service name ${JSON.stringify(svc.name)} is stratum's own ` +
          `(stratum-${svc.name} is one of its units; reserved: ${reservedServiceNames.join(", ")})`,
      );
    }
    if (services.findIndex((t) => t.name === svc.name) !== i) {
      throw new ErrBadStack(`${path}: service name ${JSON.stringify(svc.name)} is listed twice`);
    }
    if (svc.delegate !== undefined && typeof svc.delegate !== "boolean") {
      throw new ErrBadStack(`${path}: services[${i}].delegate must be true or false`);
    }
    if (
      svc.after !== undefined &&
      (!Array.isArray(svc.after) || !svc.after.every((a: unknown) => typeof a === "string"))
    ) {
      throw new ErrBadStack(`${path}: services[${i}].after must list service names`);
    }
    for (const a of svc.after ?? []) {
      if (a === svc.name || !services.some((t) => t.name === a)) {
        throw new ErrBadStack(
          `${path}: services[${i}] (${svc.name}) starts after ${JSON.stringify(a)}, which is ${
            a === svc.name ? "itself" : "not a service of this stack"
          }`,
        );
      }
    }
  }
  const cycle = orderCycle(services);
  if (cycle) throw new ErrBadStack(`${path}: services start after each other in a cycle: ${cycle}`);
  const health = o.health as { url?: unknown } | undefined;
  if (typeof health?.url !== "string" || !/^http:\/\//.test(health.url)) {
    throw new ErrBadStack(`${path}: "health.url" must be an http:// URL`);
  }
  const healthExtra = Object.keys(health).filter((k) => k !== "url" && k !== "exec");
  if (healthExtra.length > 0) {
    throw new ErrBadStack(
      `${path}: health has unknown field ${JSON.stringify(healthExtra[0])} (known: url, exec)`,
    );
  }
  const probe = (health as { exec?: unknown }).exec;
  if (
    probe !== undefined &&
    (!Array.isArray(probe) || probe.length === 0 ||
      !probe.every((a: unknown) => typeof a === "string") || !String(probe[0]).startsWith("/"))
  ) {
    throw new ErrBadStack(
      `${path}: "health.exec" must be a command line, its program an absolute path`,
    );
  }
  const hostFiles = o.hostFiles as Record<string, unknown> | undefined;
  if (hostFiles !== undefined) {
    if (typeof hostFiles !== "object" || hostFiles === null || Array.isArray(hostFiles)) {
      throw new ErrBadStack(`${path}: "hostFiles" maps host config paths to files in the slot`);
    }
    // Only the host config files a migration snapshots and restores: a
    // signed bundle must not write /etc/shadow or a trust key, and whatever
    // it writes must come back on a rollback.
    const allowed = snapshotFiles();
    for (const [k, v] of Object.entries(hostFiles)) {
      if (!allowed.includes(k)) {
        throw new ErrBadStack(
          `${path}: hostFiles may write only ${allowed.join(", ")}; not ${JSON.stringify(k)}`,
        );
      }
      if (!inSlot(v)) {
        throw new ErrBadStack(
          `${path}: hostFiles ${JSON.stringify(k)} must name a file inside the slot, not ${
            JSON.stringify(v)
          }`,
        );
      }
    }
  }
  const state = o.state ?? [];
  const problem = stateListProblem(state);
  if (problem) throw new ErrBadStack(`${path}: ${problem}`);
  const workloads = o.workloads;
  if (workloads !== undefined) {
    const bad = !Array.isArray(workloads)
      ? workloads
      : workloads.find((w: unknown) => typeof w !== "string" || workloadProblem(w));
    if (bad !== undefined) {
      throw new ErrBadStack(
        `${path}: "workloads" lists cgroup paths such as "/stratum" (not the root, nor inside ` +
          `systemd's own slices); not ${JSON.stringify(bad)}`,
      );
    }
  }
  const runtime = runtimeOf(o.runtime, path);
  const root = o.root;
  if (root !== undefined && !inSlot(root)) {
    throw new ErrBadStack(
      `${path}: "root" must name a tar archive inside the mode directory, not ${
        JSON.stringify(root)
      }`,
    );
  }
  const asked = o.grants;
  if (
    asked !== undefined &&
    (!Array.isArray(asked) || !asked.every((g) => grants.includes(g)) ||
      new Set(asked).size !== asked.length)
  ) {
    throw new ErrBadStack(
      `${path}: "grants" lists what the machine is given, each once, from: ${grants.join(", ")}`,
    );
  }
  return {
    services: services.map((s) => ({
      name: s.name,
      exec: s.exec,
      ...(s.after?.length ? { after: s.after } : {}),
      ...(s.delegate ? { delegate: true } : {}),
    })),
    state: state as string[],
    health: { url: health.url, ...(probe ? { exec: probe as string[] } : {}) },
    ...(hostFiles ? { hostFiles: hostFiles as Record<string, string> } : {}),
    ...(Array.isArray(workloads) && workloads.length ? { workloads: workloads as string[] } : {}),
    ...(runtime ? { runtime } : {}),
    ...(typeof root === "string" ? { root } : {}),
    ...(Array.isArray(asked) && asked.length ? { grants: asked as Grant[] } : {}),
  };
}

/** stack.json's `runtime`, checked: `{kind, state?}`, or undefined when absent. */
function runtimeOf(v: unknown, path: string): Runtime | undefined {
  if (v === undefined) return undefined;
  const kinds = Object.keys(runtimeKinds) as RuntimeKind[];
  const o = v as Record<string, unknown>;
  const usage = `${path}: "runtime" is {"kind": ${
    kinds.map((k) => JSON.stringify(k)).join(" | ")
  }, "state": "/run/containerd"} (state: the runtime's state directory, optional)`;
  if (typeof o !== "object" || o === null || Array.isArray(o)) throw new ErrBadStack(usage);
  const extra = Object.keys(o).filter((k) => k !== "kind" && k !== "state");
  if (extra.length > 0 || !kinds.includes(o.kind as RuntimeKind)) throw new ErrBadStack(usage);
  const kind = o.kind as RuntimeKind;
  const state = o.state ?? runtimeKinds[kind].state;
  // A plain absolute path: the stop script globs under it.
  if (
    typeof state !== "string" || !/^\/[A-Za-z0-9._/-]+$/.test(state) ||
    normalize(state) !== state ||
    state.endsWith("/") || state.split("/").some((c) => c === ".." || c === ".")
  ) {
    throw new ErrBadStack(`${usage}; not state ${JSON.stringify(state)}`);
  }
  return { kind, state };
}

/** Whether `v` is a plain relative path inside the slot (no `..`, `.`, empty part or leading /). */
function inSlot(v: unknown): v is string {
  return typeof v === "string" && v !== "" && !v.startsWith("/") && normalize(v) === v &&
    !v.split("/").some((c) => c === ".." || c === "." || c === "") && !/[\0\n]/.test(v);
}

/**
 * Systemd's own top-level cgroups: a workloads path inside one would let a
 * stack's stop kill host services (stratum itself among them).
 */
const systemdCgroups = ["init.scope", "system.slice", "user.slice", "machine.slice", "-.slice"];

/** Why `w` cannot be a workloads cgroup, or undefined. */
function workloadProblem(w: string): string | undefined {
  if (!w.startsWith("/") || normalize(w) !== w || w === "/" || w.endsWith("/")) return "path";
  if (/[\0\n]/.test(w) || w.split("/").some((c) => c === ".." || c === ".")) return "path";
  if (systemdCgroups.includes(w.split("/")[1] ?? "")) return "systemd's";
  return undefined;
}

/** `exec` with `${SLOT}` and `${NODE}` substituted. */
export function expand(exec: readonly string[], slotDir: string, node: string): string[] {
  return exec.map((a) => a.replaceAll("${SLOT}", slotDir).replaceAll("${NODE}", node));
}

/** A cycle in the services' `after`, as "a → b → a", or undefined. */
function orderCycle(services: readonly { name: string; after?: readonly string[] }[]) {
  const after = new Map(services.map((s) => [s.name, s.after ?? []]));
  const state = new Map<string, "visiting" | "done">();
  const visit = (n: string, path: string[]): string | undefined => {
    if (state.get(n) === "done") return undefined;
    if (state.get(n) === "visiting") return [...path.slice(path.indexOf(n)), n].join(" → ");
    state.set(n, "visiting");
    for (const a of after.get(n) ?? []) {
      const c = visit(a, [...path, n]);
      if (c) return c;
    }
    state.set(n, "done");
    return undefined;
  };
  for (const s of services) {
    const c = visit(s.name, []);
    if (c) return c;
  }
  return undefined;
}
