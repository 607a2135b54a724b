// The reprovision handoff's logic (lib/migrate/reprovision.ts) on a real
// journal store with injected hooks. Invariants, from the seed and issue:
// every run is counted in `attempts` durably before it acts; reset runs only
// at `reprovisioning`, and `bootstrapping` is recorded only after it; a
// failure records its message and leaves the step for the next run; past the
// bound (3) the journal says `failed`; a terminal journal is never touched;
// a run killed at any point and run again ends `bootstrapped`.

import { join } from "node:path";
import * as migrate from "../lib/migrate/mod.ts";
import { assert, assertEquals } from "./support/assert.ts";

class Killed extends Error {}

async function world(opts: { failBootstrap?: number; failReset?: number; killAt?: string } = {}) {
  const dir = await Deno.makeTempDir({ prefix: "stratum-reprovision-" });
  const calls: string[] = [];
  let bootstrapFails = opts.failBootstrap ?? 0;
  let resetFails = opts.failReset ?? 0;
  let killAt = opts.killAt;
  // Once killed, the process does nothing more: every later write or action is refused.
  let dead = false;
  const kill = (point: string) => {
    if (dead) throw new Killed("dead");
    if (killAt === point) {
      killAt = undefined;
      dead = true;
      throw new Killed(point);
    }
  };
  // The store records every write; a kill may come right after one.
  class Store extends migrate.JournalStore {
    override async save(j: migrate.Journal): Promise<migrate.Journal> {
      if (dead) throw new Killed("dead");
      const saved = await super.save(j);
      calls.push(`save:${j.step}${j.attempts ? `#${j.attempts}` : ""}`);
      kill(`after-save:${j.step}:${j.attempts ?? 0}`);
      return saved;
    }
  }
  const store = new Store(join(dir, "migration.json"));
  await store.save({
    version: migrate.JournalVersion,
    strategy: "reprovision",
    from: "host",
    to: "nspawn",
    step: migrate.StepReprovisioning,
    startedAt: new Date(),
    updatedAt: new Date(),
  });
  calls.length = 0;
  const spec: migrate.ReprovisionSpec = {
    reset: () => {
      kill("in-reset");
      calls.push("reset");
      if (resetFails-- > 0) return Promise.reject(new Error("reset failed"));
      return Promise.resolve();
    },
    bootstrap: () => {
      kill("in-bootstrap");
      calls.push("bootstrap");
      if (bootstrapFails-- > 0) return Promise.reject(new Error("bootstrap failed"));
      return Promise.resolve();
    },
  };
  /** One handoff run; a kill ends it as SIGKILL would (nothing after it runs). */
  const run = async () => {
    dead = false;
    try {
      const o = await migrate.handoff(store, spec);
      return dead ? "killed" as const : o;
    } catch (e) {
      if (e instanceof Killed) return "killed" as const;
      throw e;
    }
  };
  return { store, calls, run };
}

Deno.test("a clean handoff: counted, reset, bootstrapping, bootstrap, bootstrapped", async () => {
  const w = await world();
  const o = await w.run();
  assert(o !== "killed" && o.acted && !o.error);
  assertEquals(w.calls, [
    "save:reprovisioning#1",
    "reset",
    "save:bootstrapping#1",
    "bootstrap",
    "save:bootstrapped#1",
  ]);
  assertEquals((await w.store.load()).step, migrate.StepBootstrapped);
});

Deno.test("a bootstrap that fails twice then succeeds ends bootstrapped with attempts 3", async () => {
  const w = await world({ failBootstrap: 2 });
  for (const n of [1, 2]) {
    const o = await w.run();
    assert(o !== "killed" && o.error && o.acted, `run ${n} should fail, having acted`);
    const j = await w.store.load();
    assertEquals([j.step, j.attempts], [migrate.StepBootstrapping, n]);
    assert(j.message?.includes("bootstrap failed"), j.message);
  }
  const o = await w.run();
  assert(o !== "killed" && !o.error, String(o !== "killed" && o.error));
  const j = await w.store.load();
  assertEquals([j.step, j.attempts, j.message], [migrate.StepBootstrapped, 3, undefined]);
  assertEquals(w.calls.filter((c) => c === "reset").length, 1, "reset runs once");
});

Deno.test("a bootstrap that always fails ends failed at the bound; further runs change nothing", async () => {
  const w = await world({ failBootstrap: 99 });
  for (let n = 1; n <= 3; n++) await w.run();
  const j = await w.store.load();
  assertEquals([j.step, j.attempts], [migrate.StepFailed, 3]);
  assert(j.message?.includes("giving up"), j.message);
  const before = w.calls.length;
  const o = await w.run();
  assert(o !== "killed" && !o.acted);
  assertEquals(w.calls.length, before, "a run over a failed journal acted");
  assertEquals(await w.store.load(), j);
});

Deno.test("a handoff killed during its last attempt: the next run records failed without acting", async () => {
  const w = await world({ failBootstrap: 2, killAt: "in-bootstrap" });
  // Attempt 1 is killed in bootstrap (the kill comes first), attempts 2 and 3 fail.
  assertEquals(await w.run(), "killed");
  await w.run();
  const third = await w.run();
  assert(third !== "killed" && third.acted && third.error, "the third attempt failed");
  const j = await w.store.load();
  assertEquals([j.step, j.attempts], [migrate.StepFailed, 3]);
  // A journal whose attempts are used up, not yet failed: recorded failed, nothing run.
  await w.store.save({ ...j, step: migrate.StepBootstrapping, message: "killed" });
  const before = w.calls.filter((c) => !c.startsWith("save:")).length;
  const o = await w.run();
  assert(o !== "killed" && o.acted && o.error);
  assertEquals((await w.store.load()).step, migrate.StepFailed);
  assertEquals(w.calls.filter((c) => !c.startsWith("save:")).length, before, "it acted");
});

Deno.test("a failing run whose message cannot be written still returns its error", async () => {
  const w = await world({ failBootstrap: 99 });
  const flaky = new (class extends migrate.JournalStore {
    override save(j: migrate.Journal): Promise<migrate.Journal> {
      return j.message ? Promise.reject(new Error("disk full")) : super.save(j);
    }
  })(w.store.path);
  const o = await migrate.handoff(flaky, {
    reset: () => Promise.resolve(),
    bootstrap: () => Promise.reject(new Error("bootstrap failed")),
  });
  assert(o.acted && o.error?.message.includes("bootstrap failed"), String(o.error));
});

Deno.test("a reset that fails stays at reprovisioning and is retried by the next run", async () => {
  const w = await world({ failReset: 1 });
  const first = await w.run();
  assert(first !== "killed" && first.error);
  assertEquals((await w.store.load()).step, migrate.StepReprovisioning);
  const second = await w.run();
  assert(second !== "killed" && !second.error);
  assertEquals(w.calls.filter((c) => c === "reset").length, 2);
  assertEquals((await w.store.load()).step, migrate.StepBootstrapped);
});

Deno.test("a handoff killed at any point and run again ends bootstrapped", async (t) => {
  const points = [
    "after-save:reprovisioning:1",
    "in-reset",
    "after-save:bootstrapping:1",
    "in-bootstrap",
    "after-save:bootstrapped:1",
  ];
  for (const point of points) {
    await t.step(point, async () => {
      const w = await world({ killAt: point });
      assertEquals(await w.run(), "killed");
      const o = await w.run();
      assert(o !== "killed");
      const j = await w.store.load();
      assertEquals(j.step, migrate.StepBootstrapped);
      // Killed after bootstrapped was written: the second run finds it terminal.
      assertEquals(j.attempts, point === "after-save:bootstrapped:1" ? 1 : 2);
      // Reset ran to its end exactly once: never again after bootstrapping was recorded.
      assertEquals(w.calls.filter((c) => c === "reset").length, 1);
    });
  }
});

Deno.test("a run whose count cannot be written does not act", async () => {
  const w = await world();
  const failing = new (class extends migrate.JournalStore {
    override save(): Promise<migrate.Journal> {
      return Promise.reject(new Error("disk full"));
    }
  })(w.store.path);
  const o = await migrate.handoff(failing, {
    reset: () => Promise.reject(new Error("must not run")),
    bootstrap: () => Promise.reject(new Error("must not run")),
  });
  assertEquals(o.acted, false);
  // The journal write (record) at the recorded step, caused by the write's failure.
  const e = migrate.find(o.error, migrate.ActionError);
  assertEquals([e?.action, e?.step], ["record", migrate.StepReprovisioning]);
  assertEquals((e?.cause as Error)?.message, "disk full");
  assertEquals((await w.store.load()).step, migrate.StepReprovisioning);
});

Deno.test("an in-place journal is not handed off", async () => {
  const w = await world();
  const j = await w.store.load();
  await w.store.save({ ...j, strategy: "in-place", sourceSlot: "a", targetSlot: "b" });
  const o = await w.run();
  assert(o !== "killed" && !o.acted && migrate.is(o.error, migrate.ErrInvalidSpec));
});
