// A recording fake of one node for the migration state machine's tests: two
// slots, the applied config, the host config files and the config snapshot,
// with hooks and backends that can fail or "crash". A crash is a promise
// that never settles: nothing after that point of the run executes, which is
// what a killed process looks like to the code that follows it. The journal
// is real (a JournalStore on disk) so a resume reads what a run wrote.

import type * as isolation from "../../lib/isolation/mod.ts";
import * as migrate from "../../lib/migrate/mod.ts";

export interface SlotState {
  mode: isolation.Mode;
  built: boolean;
  running: boolean;
}

/** Names of hook and backend calls, as the world logs them. */
export type Call =
  | `save:${migrate.Step}`
  | Exclude<migrate.Action, "record">;

/** When and how a call misbehaves. `nth` counts calls of that name from 1; unset means every one. */
export interface Fault {
  readonly call: Call;
  readonly nth?: number;
  /** fail: reject without effect; crash-before: hang without effect; crash-after: take effect, then hang. */
  readonly kind: "fail" | "crash-before" | "crash-after";
}

export const originalHostConfig = "host-config:source";

/** The node's state, which outlives any one run of the orchestration. */
export class World {
  slots = new Map<isolation.Slot, SlotState>();
  applied: isolation.Slot;
  hostConfig = originalHostConfig;
  snapshot: string | undefined;
  /** Every call, in order, across runs and resumes. */
  log: Call[] = [];
  crashed = false;
  faults: Fault[] = [];
  #counts = new Map<Call, number>();

  readonly store: migrate.JournalStore;

  constructor(journalPath: string, readonly from: isolation.Mode, readonly to: isolation.Mode) {
    this.slots.set("a", { mode: from, built: true, running: true });
    this.applied = "a";
    this.store = new FaultyStore(journalPath, this);
  }

  /** Runs one call through the fault list. */
  async call(name: Call, effect: () => void | Promise<void>): Promise<void> {
    if (this.crashed) return hang();
    const n = (this.#counts.get(name) ?? 0) + 1;
    this.#counts.set(name, n);
    this.log.push(name);
    const fault = this.faults.find((f) => f.call === name && (f.nth === undefined || f.nth === n));
    if (fault?.kind === "fail") throw new Error(`injected failure in ${name}`);
    if (fault?.kind === "crash-before") {
      this.crashed = true;
      return hang();
    }
    await effect();
    if (fault?.kind === "crash-after") {
      this.crashed = true;
      return hang();
    }
  }

  /** A new "process": faults replaced, the crash forgotten, the state kept. */
  reboot(faults: Fault[] = []): void {
    this.crashed = false;
    this.faults = faults;
    this.#counts.clear();
  }

  slot(s: isolation.Slot): SlotState | undefined {
    return this.slots.get(s);
  }

  backend(mode: isolation.Mode, role: "source" | "target"): isolation.Backend {
    return fakeBackend(this, mode, role);
  }

  /** An InPlaceSpec whose every hook goes through this world. */
  spec(record: migrate.InPlaceSpec["record"]): migrate.InPlaceSpec {
    return fakeSpec(this, record);
  }

  /** Runs a migration as a fresh process would; a crash leaves `crashed` set. */
  async run(): Promise<migrate.Result | "crashed"> {
    const record = migrate.recorder(this.store, {
      strategy: "in-place",
      from: this.from,
      to: this.to,
      sourceSlot: "a",
      targetSlot: "b",
    });
    return await untilCrash(this, migrate.runInPlace(this.spec(record)));
  }

  /** Resumes from the journal on disk, as the boot-time resume would. */
  async resume(): Promise<migrate.ResumeOutcome | "crashed" | "no-journal"> {
    const { record: _r, ...spec } = this.spec(undefined);
    const outcome = migrate.resume(this.store, spec).catch((e) => {
      if (migrate.is(e, migrate.ErrNoJournal)) return "no-journal" as const;
      throw e;
    });
    return await untilCrash(this, outcome);
  }
}

/** The real store, with every save going through the world's fault list as `save:<step>`. */
class FaultyStore extends migrate.JournalStore {
  constructor(path: string, readonly world: World) {
    super(path);
  }
  override async save(j: migrate.Journal): Promise<migrate.Journal> {
    let saved: migrate.Journal = j;
    await this.world.call(`save:${j.step}`, async () => {
      saved = await super.save(j);
    });
    return saved;
  }
}

function fakeBackend(w: World, mode: isolation.Mode, role: "source" | "target"): isolation.Backend {
  return {
    mode,
    async prepare(spec) {
      await w.call("prepare", () => {
        w.slots.set(spec.slot, { mode, built: true, running: false });
        w.hostConfig = "host-config:target-prepared";
      });
      return { mode, slot: spec.slot };
    },
    async start(ref) {
      await w.call(role === "source" ? "start-source" : "start-target", () => {
        const s = w.slots.get(ref.slot);
        if (!s?.built) throw new Error(`slot ${ref.slot} is not built`);
        s.running = true;
      });
    },
    async stop(ref) {
      await w.call("stop-source", () => {
        const s = w.slots.get(ref.slot);
        if (s) s.running = false;
      });
    },
    async destroy(ref) {
      await w.call(role === "source" ? "destroy-source" : "destroy-target", () => {
        w.slots.delete(ref.slot);
      });
    },
  };
}

function fakeSpec(w: World, record: migrate.InPlaceSpec["record"]): migrate.InPlaceSpec {
  const c = (name: Call, effect: () => void = () => {}) => () => w.call(name, effect);
  return {
    source: w.backend(w.from, "source"),
    sourceRoot: { mode: w.from, slot: "a" },
    target: w.backend(w.to, "target"),
    targetSpec: { slot: "b", node: "node-1" },
    targetRoot: { mode: w.to, slot: "b" },
    preflight: c("preflight"),
    download: c("download"),
    snapshotConfig: c("snapshot-config", () => {
      w.snapshot = w.hostConfig;
    }),
    restoreConfig: c("restore-config", () => {
      if (w.snapshot !== undefined) w.hostConfig = w.snapshot;
    }),
    discardConfig: c("discard-config", () => {
      w.snapshot = undefined;
    }),
    cleanupNetwork: c("cleanup-network"),
    persistTarget: (t) => w.call("persist-target", () => void (w.applied = t.slot)),
    restoreSource: c("restore-source", () => {
      w.applied = "a";
    }),
    waitReady: c("wait-ready", () => {
      if (!w.slots.get("b")?.running) throw new Error("target is not running");
    }),
    removeSourceConfig: c("remove-source-config"),
    prepareHost: c("prepare-host", () => {
      w.hostConfig = "host-config:target";
    }),
    ...(record ? { record } : {}),
  };
}

function hang(): Promise<never> {
  return new Promise<never>(() => {});
}

/** Resolves with the run's result, or "crashed" once the world has crashed. */
async function untilCrash<T>(w: World, p: Promise<T>): Promise<T | "crashed"> {
  // A crashed run never settles; poll the flag on the macrotask queue, where
  // every microtask the run could still take has already run.
  let timer: ReturnType<typeof setTimeout> | undefined;
  const crashed = new Promise<"crashed">((resolve) => {
    const tick = () => {
      if (w.crashed) resolve("crashed");
      else timer = setTimeout(tick, 0);
    };
    tick();
  });
  try {
    return await Promise.race([p, crashed]);
  } finally {
    clearTimeout(timer);
  }
}
