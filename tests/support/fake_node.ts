// A fake node for the migration state machine's tests: two slots, the
// applied config and the source's saved copy, the host config files, the
// config snapshot (with its owner), network leftovers and the installed
// bundle, with hooks and backends that fail, hang or "crash", and a power
// supply that can be cut.
//
// What it models, because a node does it:
// - a crash is a promise that never settles: nothing after that point of the
//   run executes, which is what a killed process looks like to its code;
// - a power cut is a crash that also stops every stack (and the boot after
//   it runs `node.boot`, as stratum-boot.service does);
// - a failing call may have taken effect first (`fail-after`: a start that
//   fails leaves the unit failed, a prepare that fails a partial slot);
// - a call that hangs fails at its own deadline (`hang`), as the real
//   runners do;
// - network cleanup, download, removeSourceConfig and preflight each change
//   something a test can see, so dropping one is visible: the target does
//   not start over the source's network leftovers, prepare needs the bundle
//   download installed, completion needs the source's saved config gone.
//
// The journal is real (a JournalStore on disk) so a resume reads what a run
// wrote. After every call the world checks the invariants that must hold at
// every instant, not only at the end (see `checkAlways`).

import type * as isolation from "../../lib/isolation/mod.ts";
import * as migrate from "../../lib/migrate/mod.ts";
import * as node from "../../lib/node/mod.ts";

export interface SlotState {
  mode: isolation.Mode;
  built: boolean;
  running: boolean;
  /** A start failed and left the unit failed. */
  failed: boolean;
}

/** Names of hook and backend calls, as the world logs them. */
export type Call =
  | `save:${migrate.Step}`
  | Exclude<migrate.Action, "record">;

/** When and how a call misbehaves. `nth` counts calls of that name from 1; unset means every one. */
export interface Fault {
  readonly call: Call;
  readonly nth?: number;
  /**
   * fail: reject without effect; fail-after: take effect, then reject;
   * hang: reject at the call's deadline without effect; crash-before: die
   * without effect; crash-after: take effect, then die; power-before and
   * power-after: the same with every stack stopped.
   */
  readonly kind:
    | "fail"
    | "fail-after"
    | "hang"
    | "crash-before"
    | "crash-after"
    | "power-before"
    | "power-after";
}

export const originalHostConfig = "host-config:source";

/** The journal steps in order; a stopped source needs the journal at stopping-source or later. */
const forward = migrate.inPlaceSteps;

/** The node's state, which outlives any one run of the orchestration. */
export class World {
  slots = new Map<isolation.Slot, SlotState>();
  /** The slot node.json names. */
  applied: isolation.Slot;
  /** The source's node.json, saved by persistTarget until removeSourceConfig. */
  savedSource = false;
  hostConfig = originalHostConfig;
  snapshot: { owner: string; content: string } | undefined;
  /** The stopped source's links and chains, left until cleanupNetwork. */
  networkLeftovers = false;
  /** The target's bundle, installed by download. */
  bundleInstalled = false;
  /** The migration now running (its journal's startedAt), for the snapshot's owner. */
  migrationId = "";
  /** Every call, in order, across runs and resumes. */
  log: Call[] = [];
  /** Invariant violations seen at any instant. */
  violations: string[] = [];
  crashed = false;
  /** The source was stopped by the migration (not by a power cut) and not started since. */
  sourceStoppedByMigration = false;
  faults: Fault[] = [];
  /**
   * The write-ahead rule, from the specification: the journal step that must
   * be on disk (or a later one) before each forward call runs.
   */
  writeAhead = new Map<Call, migrate.Step>();
  #counts = new Map<Call, number>();
  #runs = 0;

  readonly store: migrate.JournalStore;

  constructor(journalPath: string, readonly from: isolation.Mode, readonly to: isolation.Mode) {
    this.slots.set("a", { mode: from, built: true, running: true, failed: false });
    this.applied = "a";
    this.store = new FaultyStore(journalPath, this);
  }

  /** Runs one call through the fault list, checking the invariants around it. */
  async call(name: Call, effect: () => void | Promise<void>): Promise<void> {
    if (this.crashed) return hang();
    const n = (this.#counts.get(name) ?? 0) + 1;
    this.#counts.set(name, n);
    this.log.push(name);
    const fault = this.faults.find((f) => f.call === name && (f.nth === undefined || f.nth === n));
    this.checkAlways(`before ${name}`);
    const need = this.writeAhead.get(name);
    if (need !== undefined) {
      const j = this.#journalNow();
      const at = j ? forward.indexOf(j.step) : -1;
      if (at < forward.indexOf(need)) {
        this.violations.push(`${name} ran with the journal at ${j?.step}, before ${need}`);
      }
    }
    switch (fault?.kind) {
      case "fail":
        throw new Error(`injected failure in ${name}`);
      case "hang":
        await new Promise((r) => setTimeout(r, 1));
        throw new Error(`${name}: no answer after its deadline, killed`);
      case "crash-before":
        return this.#die(false);
      case "power-before":
        return this.#die(true);
    }
    await effect();
    this.checkAlways(`after ${name}`);
    switch (fault?.kind) {
      case "fail-after":
        throw new Error(`injected failure in ${name}, after it took effect`);
      case "crash-after":
        return this.#die(false);
      case "power-after":
        return this.#die(true);
    }
  }

  #die(power: boolean): Promise<never> {
    this.crashed = true;
    if (power) this.powerCut();
    return hang();
  }

  /** Every stack stops, as at a power cut. Whatever was on disk stays. */
  powerCut(): void {
    for (const s of this.slots.values()) s.running = false;
    this.sourceStoppedByMigration = false;
    // Links and chains live in the kernel: a power cut clears them.
    this.networkLeftovers = false;
  }

  /**
   * Invariants that hold at every instant of every run, resume and boot:
   * never two stacks running; a source the migration stopped only while the
   * journal says stopping-source or later (the write-ahead rule).
   */
  checkAlways(when: string): void {
    const [a, b] = [this.slots.get("a"), this.slots.get("b")];
    if (a?.running && b?.running) this.violations.push(`${when}: both stacks run`);
    if (this.sourceStoppedByMigration && a?.built && !a.running) {
      const j = this.#journalNow();
      const at = j ? forward.indexOf(j.step) : -1;
      const ok = j !== undefined &&
        (at >= forward.indexOf(migrate.StepStoppingSource) ||
          j.step === migrate.StepRolledBack || j.step === migrate.StepFailed);
      if (!ok) {
        this.violations.push(`${when}: the source is stopped but the journal says ${j?.step}`);
      }
    }
  }

  #journalNow(): migrate.Journal | undefined {
    try {
      return migrate.decodeJournal(Deno.readTextFileSync(this.store.path));
    } catch {
      return undefined;
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
  async run(opts: migrate.RunOptions = {}): Promise<migrate.Result | "crashed"> {
    const startedAt = new Date(Date.UTC(2026, 0, 1, 0, 0, ++this.#runs));
    this.migrationId = startedAt.toISOString();
    const record = migrate.recorder(this.store, {
      strategy: "in-place",
      from: this.from,
      to: this.to,
      sourceSlot: "a",
      targetSlot: "b",
      startedAt,
    });
    return await untilCrash(this, migrate.runInPlace(this.spec(record), opts));
  }

  /** Resumes from the journal on disk, as `stratum migrate resume` would. */
  async resume(): Promise<migrate.ResumeOutcome | "crashed" | "no-journal"> {
    const r = await untilCrash(this, this.#resume());
    return r ?? "no-journal";
  }

  async #resume(): Promise<migrate.ResumeOutcome | undefined> {
    const j = await this.store.load().catch((e) => {
      if (migrate.is(e, migrate.ErrNoJournal)) return undefined;
      throw e;
    });
    if (!j) return undefined;
    this.migrationId = j.startedAt.toISOString();
    const { record: _r, ...spec } = this.spec(undefined);
    return await migrate.resume(this.store, spec);
  }

  /** A boot after a power cut or a reboot: what stratum-boot.service runs. */
  async boot(): Promise<node.BootResult | "crashed"> {
    return await untilCrash(
      this,
      node.boot({
        resume: () => this.#resume(),
        applied: () => {
          const s = this.slots.get(this.applied);
          return Promise.resolve(s ? { mode: s.mode, slot: this.applied } : undefined);
        },
        start: (ref) => this.backend(ref.mode, ref.slot === "a" ? "source" : "target").start(ref),
      }),
    );
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
        w.slots.set(spec.slot, { mode, built: false, running: false, failed: false });
        w.hostConfig = "host-config:target-prepared";
        if (!w.bundleInstalled) throw new Error("no bundle installed for the target");
        w.slots.get(spec.slot)!.built = true;
      });
      return { mode, slot: spec.slot };
    },
    async start(ref) {
      await w.call(role === "source" ? "start-source" : "start-target", () => {
        const s = w.slots.get(ref.slot);
        if (!s?.built) throw new Error(`slot ${ref.slot} is not built`);
        const other = w.slots.get(ref.slot === "a" ? "b" : "a");
        if (other?.running) throw new Error(`slot ${ref.slot}: ports taken by the other stack`);
        if (role === "target" && w.networkLeftovers) {
          s.failed = true;
          throw new Error(`slot ${ref.slot}: the source's links are still there`);
        }
        s.running = true;
        s.failed = false;
        if (ref.slot === "a") w.sourceStoppedByMigration = false;
      });
    },
    async stop(ref) {
      await w.call("stop-source", () => {
        const s = w.slots.get(ref.slot);
        if (s?.running) w.networkLeftovers = true;
        if (s) s.running = false;
        w.sourceStoppedByMigration = true;
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
    download: c("download", () => {
      w.bundleInstalled = true;
    }),
    snapshotConfig: c("snapshot-config", () => {
      w.snapshot = { owner: w.migrationId, content: w.hostConfig };
    }),
    restoreConfig: c("restore-config", () => {
      if (w.snapshot?.owner === w.migrationId) w.hostConfig = w.snapshot.content;
    }),
    discardConfig: c("discard-config", () => {
      w.snapshot = undefined;
    }),
    cleanupNetwork: c("cleanup-network", () => {
      w.networkLeftovers = false;
    }),
    persistTarget: (t) =>
      w.call("persist-target", () => {
        w.savedSource = true;
        w.applied = t.slot;
      }),
    restoreSource: c("restore-source", () => {
      if (w.savedSource) w.applied = "a";
      w.savedSource = false;
    }),
    waitReady: c("wait-ready", () => {
      if (!w.slots.get("b")?.running) throw new Error("target is not running");
    }),
    removeSourceConfig: c("remove-source-config", () => {
      w.savedSource = false;
    }),
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
