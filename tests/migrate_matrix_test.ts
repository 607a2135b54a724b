// The fault matrix of the in-place migration. The calls of a clean run, and
// the step each must follow, come from the step table in docs/migration.md
// (the specification), not from a recording of the code; each call is then
// made to fail, fail after taking effect, hang, crash before or after, or
// lose power before or after.
//
// Checked at EVERY call (tests/support/fake_node.ts): never two stacks
// running; the source stopped by the migration only while the journal says
// stopping-source or later; every forward call only after its step's record.
//
// Checked at the end (THE invariant), after the last run, resume or boot:
//   - journal complete: the target runs, the source slot is gone, node.json
//     names the target, the source's saved config and the snapshot are gone,
//     the host config is the target's;
//   - journal rolled-back: the source runs, the target slot is gone,
//     node.json and the host config are the source's again;
//   - journal failed, and an error said why (ErrRollbackFailed,
//     ErrTooManyAttempts or ErrTargetLost);
//   - no journal only when nothing changed;
//   - Result.rolledBack and Result.target agree with the journal;
//   - after a power cut, the stack that runs is the one node.json names.
// And a further resume is a no-op.

import { sampleJournal } from "./support/journal_sample.ts";
import { assert, assertEquals, fail } from "./support/assert.ts";
import * as migrate from "../lib/migrate/mod.ts";
import { type Call, type Fault, originalHostConfig, World } from "./support/fake_node.ts";
import { expectedCalls, readStepTable, writeAheadRule } from "./support/step_table.ts";

const tmpRoot = await Deno.stat("/dev/shm").then(() => "/dev/shm", () => undefined);
const table = await readStepTable();
const calls = countNth(expectedCalls(table));
const rule = writeAheadRule(table);

async function newWorld(): Promise<World> {
  const dir = await Deno.makeTempDir({
    prefix: "stratum-matrix-",
    ...(tmpRoot ? { dir: tmpRoot } : {}),
  });
  const w = new World(`${dir}/migration.json`, "host", "nspawn");
  w.writeAhead = rule;
  return w;
}

async function journalOf(w: World): Promise<migrate.Journal | undefined> {
  return await w.store.load().catch((e) => {
    if (migrate.is(e, migrate.ErrNoJournal)) return undefined;
    throw e;
  });
}

type Ended = migrate.Result | migrate.ResumeOutcome;

/** Checks the invariant; returns the outcome's name. */
async function checkInvariant(
  w: World,
  errors: Error[],
  last: Ended | undefined,
  label: string,
): Promise<string> {
  assertEquals(w.violations, [], `${label}: invariants broken along the way`);
  const j = await journalOf(w);
  const src = w.slot("a");
  const tgt = w.slot("b");
  assert(!(src?.running && tgt?.running), `${label}: both stacks run`);
  if (j === undefined) {
    assert(src?.running && !tgt, `${label}: no journal, but the slots changed`);
    assertEquals([w.applied, w.hostConfig, w.savedSource], ["a", originalHostConfig, false], label);
    // A boot after a power cut starts the applied stack: that is not a change.
    const allowed = ["preflight", "download", "start-source"];
    assert(
      !w.log.some((c) => !c.startsWith("save:") && !allowed.includes(c)),
      `${label}: no journal, but the host was changed`,
    );
    assertEquals(last?.rolledBack ?? false, false, `${label}: rolledBack with nothing changed`);
    return "nothing-changed";
  }
  if (last && j.step !== migrate.StepFailed) {
    assertEquals(last.rolledBack, j.step === migrate.StepRolledBack, `${label}: rolledBack`);
    assertEquals(
      last.target !== undefined,
      j.step === migrate.StepComplete || j.step === migrate.StepReady,
      `${label}: target`,
    );
  }
  switch (j.step) {
    case migrate.StepComplete:
      assert(tgt?.built && tgt.running, `${label}: complete, but the target does not run`);
      assert(!src, `${label}: complete, but the source slot is left`);
      assertEquals(w.applied, "b", `${label}: complete, but the applied config is the source's`);
      assertEquals(w.savedSource, false, `${label}: complete, but the source's config is left`);
      assertEquals(w.snapshot, undefined, `${label}: complete, but the snapshot is left`);
      assertEquals(w.hostConfig, "host-config:target", `${label}: host not prepared`);
      return "complete";
    case migrate.StepRolledBack:
      assert(src?.built && src.running, `${label}: rolled-back, but the source does not run`);
      assert(!tgt, `${label}: rolled-back, but the target slot is left`);
      assertEquals(w.applied, "a", `${label}: rolled-back, but the applied config is the target's`);
      assertEquals(
        w.hostConfig,
        originalHostConfig,
        `${label}: rolled-back, host config not restored`,
      );
      assert(
        w.snapshot === undefined || /warning/.test(j.message ?? ""),
        `${label}: rolled-back, snapshot left without a warning`,
      );
      assert(j.message, `${label}: rolled-back without a message`);
      return "rolled-back";
    case migrate.StepFailed:
      assert(
        errors.some((e) =>
          migrate.is(e, migrate.ErrRollbackFailed) || migrate.is(e, migrate.ErrTooManyAttempts) ||
          migrate.is(e, migrate.ErrTargetLost)
        ),
        `${label}: failed, but no error said why: ${errors.map((e) => e.message).join(" | ")}`,
      );
      assert(j.message, `${label}: failed without a message`);
      return "failed";
    default:
      fail(`${label}: journal left at ${j.step}`);
  }
}

const power = (f: Fault) => f.kind === "power-before" || f.kind === "power-after";

/**
 * Runs with `runFaults`, then resumes (or, after a power cut, boots) with
 * `resumeFaults[i]` until the journal is terminal, checks the invariant, and
 * checks that one more resume does nothing.
 */
async function scenario(
  runFaults: Fault[],
  resumeFaults: Fault[][] = [],
  world?: World,
): Promise<{ w: World; outcome: string; errors: Error[]; resumeLogs: Call[][] }> {
  const w = world ?? await newWorld();
  const errors: Error[] = [];
  const resumeLogs: Call[][] = [];
  const label = JSON.stringify({ runFaults, resumeFaults });
  w.reboot(runFaults);
  const r = await w.run();
  let last: Ended | undefined = r === "crashed" ? undefined : r;
  if (last?.error) errors.push(last.error);
  let poweredOff = runFaults.some(power) && r === "crashed";
  let j = await journalOf(w);
  let i = 0;
  while (r === "crashed" && i === 0 || (j && !migrate.isTerminal(j.step)) || poweredOff) {
    assert(i < 8, `${label}: does not converge`);
    const faults = resumeFaults[i] ?? [];
    w.reboot(faults);
    const start = w.log.length;
    if (poweredOff) {
      // The node boots: stratum-boot.service resumes, then starts node.json's slot.
      // A boot that dies is run again by the unit's Restart=on-failure.
      const b = await w.boot();
      poweredOff = b === "crashed" || b.error !== undefined;
      if (b !== "crashed" && !b.error) {
        if (b.resumed) last = b.resumed;
        if (b.resumed?.error) errors.push(b.resumed.error);
        const applied = w.slot(w.applied);
        const jj = await journalOf(w);
        if (jj?.step !== migrate.StepFailed) {
          assert(applied?.running, `${label}: after the boot, node.json's slot does not run`);
        }
      }
    } else {
      const o = await w.resume();
      if (o === "no-journal") break;
      if (o !== "crashed") {
        last = o;
        if (o.error) errors.push(o.error);
      } else poweredOff = faults.some(power);
    }
    resumeLogs.push(w.log.slice(start));
    j = await journalOf(w);
    i++;
  }
  const outcome = await checkInvariant(w, errors, last, label);
  const before = JSON.stringify([...w.slots, w.applied, w.hostConfig, w.snapshot]);
  w.reboot();
  if (j) {
    const again = await w.resume();
    assert(
      again !== "crashed" && again !== "no-journal" && !again.acted,
      `${label}: resume after the end acted`,
    );
  }
  assertEquals(JSON.stringify([...w.slots, w.applied, w.hostConfig, w.snapshot]), before);
  return { w, outcome, errors, resumeLogs };
}

const at = (call: Call, nth = 1) => calls.findIndex((c) => c.call === call && c.nth === nth);

/** The outcome the specification gives for a fault at position i of a clean run. */
function expected(i: number, kind: Fault["kind"]): string {
  const reached = (step: migrate.Step) => {
    const s = at(`save:${step}`);
    return i > s || (i === s && /after/.test(kind));
  };
  if (kind === "fail" || kind === "hang" || kind === "fail-after") {
    // A failure before the first record changes nothing; up to ready it rolls
    // back; after ready the target is kept and a resume finishes the cleanup.
    if (i < at("save:preparing") || (i === at("save:preparing") && kind !== "fail-after")) {
      return "nothing-changed";
    }
    return i <= at("save:ready") ? "rolled-back" : "complete";
  }
  // A crash or power cut: once the target is recorded running, finish; before, undo.
  if (reached(migrate.StepAwaitingReady)) return "complete";
  if (reached(migrate.StepPreparing)) return "rolled-back";
  return "nothing-changed";
}

Deno.test("a clean run makes exactly the calls of the step table, in order", async () => {
  const { w, outcome } = await scenario([]);
  assertEquals(outcome, "complete");
  assertEquals(w.log, calls.map((c) => c.call));
});

const kinds: Fault["kind"][] = [
  "fail",
  "fail-after",
  "hang",
  "crash-before",
  "crash-after",
  "power-before",
  "power-after",
];

for (const kind of kinds) {
  Deno.test(`each call: ${kind}, then resume or boot, ends as the specification says`, async (t) => {
    for (const [i, { call, nth }] of calls.entries()) {
      await t.step(`${kind} ${call} #${nth}`, async () => {
        const { outcome } = await scenario([{ call, nth, kind }]);
        assertEquals(outcome, expected(i, kind));
      });
    }
  });
}

Deno.test("a crash or power cut at each call, then again at each call of the recovery", async (t) => {
  // A second fault inside the resume (or boot) that follows the first, then
  // a third recovery: every combination must still end in the invariant.
  let n = 0;
  for (const { call, nth } of calls) {
    for (const kind of ["crash-after", "power-after"] as const) {
      const first = await scenario([{ call, nth, kind }]);
      for (const rc of countNth(first.resumeLogs[0] ?? [])) {
        for (const kind2 of ["crash-before", "power-before", "fail"] as const) {
          n++;
          await scenario([{ call, nth, kind }], [[{ call: rc.call, nth: rc.nth, kind: kind2 }]]);
        }
      }
    }
  }
  await t.step(`${n} recovery faults`, () => assert(n > calls.length * 6));
});

Deno.test("a journal write that fails stops its step from running", async (t) => {
  for (const [i, { call, nth }] of calls.entries()) {
    if (!call.startsWith("save:")) continue;
    const next = calls[i + 1]?.call;
    if (next === undefined || next.startsWith("save:")) continue;
    await t.step(`${call} fails: ${next} does not run`, async () => {
      const w = await newWorld();
      w.reboot([{ call, nth, kind: "fail" }]);
      await w.run();
      assert(
        !w.log.slice(w.log.indexOf(call)).includes(next),
        `${next} ran after its record failed`,
      );
    });
  }
});

const restoring: Call[] = ["destroy-target", "restore-source", "restore-config", "start-source"];

Deno.test("resume after a crash before ready rolls back as docs/migration.md's resume table says", async (t) => {
  // preparing: destroy, restore config, start the source, rolled-back;
  // stopping-source, starting-target: roll back; persisting: including RestoreSource.
  for (
    const step of [
      migrate.StepPreparing,
      migrate.StepStoppingSource,
      migrate.StepStartingTarget,
      migrate.StepPersisting,
    ]
  ) {
    await t.step(step, async () => {
      const w = await newWorld();
      w.reboot([{ call: `save:${step}` as Call, kind: "crash-after" }]);
      assertEquals(await w.run(), "crashed");
      w.reboot();
      const before = w.log.length;
      const o = ended(await w.resume());
      assert(o.rolledBack && o.journal.step === migrate.StepRolledBack, String(o.error));
      assertEquals(w.log.slice(before), [
        `save:${step}`, // the resume's count, before it acts
        "destroy-target",
        ...(step === migrate.StepPersisting ? ["restore-source" as const] : []),
        "restore-config",
        "start-source",
        "discard-config",
        "save:rolled-back",
      ]);
      assertEquals(w.violations, []);
    });
  }
});

Deno.test("runInPlace needs no targetRoot (only resume does), and a resume rejects a step it does not know", async () => {
  const w = await newWorld();
  const { targetRoot: _t, ...spec } = w.spec(undefined);
  const r = await migrate.runInPlace(spec);
  assert(!r.error, String(r.error));
  assertEquals(r.target, { mode: "nspawn", slot: "b" });
  const w2 = await newWorld();
  const { record: _r, ...spec2 } = w2.spec(undefined);
  const odd = await migrate.resumeInPlace(
    { ...spec2, record: () => Promise.resolve() },
    migrate.StepReprovisioning,
  );
  assertEquals(odd.rolledBack, false);
  assert(migrate.is(odd.error, migrate.ErrInvalidSpec), String(odd.error));
  assertEquals(w2.log, []);
});

Deno.test("resume at awaiting-ready records ready after WaitReady and before the source is cleaned up", async () => {
  // docs/migration.md: start the target, WaitReady; ready → finish as step 9.
  const table = await readStepTable();
  const finishCalls = table.filter((r) => r.step === migrate.StepReady).flatMap((r) => r.calls);
  const w = await newWorld();
  w.reboot([{ call: "save:awaiting-ready", kind: "crash-after" }]);
  assertEquals(await w.run(), "crashed");
  w.reboot();
  const before = w.log.length;
  const o = ended(await w.resume());
  assert(!o.error, String(o.error));
  const log = w.log.slice(before);
  const ready = log.indexOf("save:ready");
  assert(
    ready > log.indexOf("wait-ready") && log.indexOf("wait-ready") > log.indexOf("start-target"),
    log.join(" "),
  );
  for (const c of finishCalls) {
    assert(log.indexOf(c) > ready, `${c} ran before ready was recorded: ${log.join(" ")}`);
  }
});

Deno.test("resumeInPlace over a terminal step does nothing and reports the node as the step says", async () => {
  const w = await newWorld();
  const { record: _r, ...spec } = w.spec(undefined);
  const noop = { ...spec, record: () => Promise.resolve() };
  const done = await migrate.resumeInPlace(noop, migrate.StepComplete);
  assertEquals([done.rolledBack, done.target, done.error], [false, spec.targetRoot, undefined]);
  const back = await migrate.resumeInPlace(noop, migrate.StepRolledBack);
  assertEquals([back.rolledBack, back.target, back.error], [true, undefined, undefined]);
  const failed = await migrate.resumeInPlace(noop, migrate.StepFailed);
  assertEquals([failed.rolledBack, failed.target, failed.error], [false, undefined, undefined]);
  const { waitReady: _w, ...lacking } = noop;
  const invalid = await migrate.resumeInPlace(lacking, migrate.StepReady);
  assertEquals(invalid.rolledBack, false);
  assertEquals(w.log, []);
});

Deno.test("a failure at each forward call rolls back in the order docs/migration.md gives", async (t) => {
  // docs/migration.md: destroy the target → RestoreSource (only if persisting
  // was reached) → RestoreConfig → start the source (only if stopping-source
  // was recorded) → DiscardConfig → record rolled-back.
  for (const [i, { call, nth }] of calls.entries()) {
    if (i <= at("save:preparing") || i > at("save:ready")) continue;
    await t.step(`${call}${nth > 1 ? ` #${nth}` : ""} fails`, async () => {
      const w = await newWorld();
      w.reboot([{ call, nth, kind: "fail" }]);
      const r = await w.run();
      assert(r !== "crashed" && r.rolledBack, String(r !== "crashed" && r.error));
      const expected: Call[] = [
        "destroy-target",
        ...(i > at("save:persisting") ? ["restore-source" as const] : []),
        "restore-config",
        ...(i > at("save:stopping-source") ? ["start-source" as const] : []),
        "discard-config",
        "save:rolled-back",
      ];
      let from = -1;
      for (let k = 0, seen = 0; k < w.log.length; k++) {
        if (w.log[k] === call && ++seen === nth) from = k;
      }
      assertEquals(w.log.slice(from + 1), expected);
      assertEquals(w.violations, []);
    });
  }
});

Deno.test("a rollback action failing ends in failed with ErrRollbackFailed; discard is a warning", async (t) => {
  for (const [i, { call, nth }] of calls.entries()) {
    if (i <= at("save:preparing") || i > at("save:ready")) continue;
    const probe = await scenario([{ call, nth, kind: "fail" }]);
    const rolled = probe.w.log.slice(probe.w.log.indexOf(call) + 1).filter((c) =>
      restoring.includes(c) || c === "discard-config"
    );
    for (const r of rolled) {
      await t.step(`${call} fails, then ${r} fails`, async () => {
        const w = await newWorld();
        w.reboot([{ call, nth, kind: "fail" }, { call: r, kind: "fail" }]);
        const res = await w.run();
        assert(res !== "crashed");
        assertEquals(w.violations, []);
        const j = await w.store.load();
        if (r === "discard-config") {
          // The source runs again: the rollback is done, with a warning.
          assertEquals([j.step, res.rolledBack], [migrate.StepRolledBack, true]);
          assert(!migrate.is(res.error, migrate.ErrRollbackFailed), res.error?.message);
          assert(/warning/.test(j.message ?? ""), j.message);
          assert(w.slot("a")?.running && !w.slot("b"));
          return;
        }
        assert(migrate.is(res.error, migrate.ErrRollbackFailed), res.error?.message);
        assertEquals([j.step, res.rolledBack], [migrate.StepFailed, false]);
        assert(!(w.slot("a")?.running && w.slot("b")?.running));
        if (r === "restore-config" && call !== "snapshot-config" && i > at("snapshot-config")) {
          assert(w.snapshot !== undefined, "the snapshot is kept when restoreConfig fails");
        }
        // The actions after the failed one did not run.
        const after = w.log.slice(w.log.lastIndexOf(r) + 1).filter((c) => restoring.includes(c));
        assertEquals(after, []);
      });
    }
  }
});

Deno.test("rollback restores the config after the target is gone and before the source starts", async () => {
  const { w } = await scenario([{ call: "wait-ready", kind: "fail" }]);
  assertEquals(w.log.slice(w.log.indexOf("wait-ready") + 1), [
    "destroy-target",
    "restore-source",
    "restore-config",
    "start-source",
    "discard-config",
    "save:rolled-back",
  ]);
});

Deno.test("a failing rolled-back write still reports the rollback done; resume records it", async () => {
  const w = await newWorld();
  w.reboot([{ call: "wait-ready", kind: "fail" }, { call: "save:rolled-back", kind: "fail" }]);
  const r = await w.run();
  assert(r !== "crashed");
  assertEquals(r.rolledBack, true, "the source runs again: that is a rollback");
  assert(!migrate.is(r.error, migrate.ErrRollbackFailed));
  assertEquals((await w.store.load()).step, migrate.StepAwaitingReady);
  assert(w.slot("a")?.running && !w.slot("b"));
  w.reboot();
  const o = ended(await w.resume());
  assertEquals(o.journal.step, migrate.StepRolledBack);
  assert(w.slot("a")?.running && !w.slot("b"));
  assertEquals(w.violations, []);
});

Deno.test("a failing failed write still reports ErrRollbackFailed", async () => {
  const w = await newWorld();
  w.reboot([
    { call: "wait-ready", kind: "fail" },
    { call: "start-source", kind: "fail" },
    { call: "save:failed", kind: "fail" },
  ]);
  const r = await w.run();
  assert(r !== "crashed");
  assert(migrate.is(r.error, migrate.ErrRollbackFailed), r.error?.message);
  assertEquals(r.rolledBack, false);
});

Deno.test("a run failure followed by a crash or power cut inside its rollback ends in the invariant", async (t) => {
  for (const r of [...restoring, "discard-config", "save:rolled-back"] as Call[]) {
    for (const kind of ["crash-before", "crash-after", "power-before", "power-after"] as const) {
      await t.step(`wait-ready fails, then ${kind} ${r}`, async () => {
        const { outcome } = await scenario([
          { call: "wait-ready", kind: "fail" },
          { call: r, kind },
        ]);
        // The journal still says awaiting-ready: recovery retries the target
        // (whatever the rollback left of it) and ends either way, in one state.
        assert(outcome === "rolled-back" || outcome === "complete", outcome);
      });
    }
  }
});

Deno.test("an abort before the first step changes nothing and leaves no journal", async () => {
  const w = await newWorld();
  const ac = new AbortController();
  ac.abort(new Error("SIGTERM"));
  const r = await w.run({ signal: ac.signal });
  assert(r !== "crashed");
  assert(migrate.is(r.error, migrate.ErrAborted), r.error?.message);
  assertEquals(r.rolledBack, false);
  assertEquals(await journalOf(w), undefined);
  assertEquals(w.log.filter((c) => c !== "preflight" && c !== "download"), []);
});

Deno.test("an abort at any forward call rolls back, and the rollback is not aborted", async (t) => {
  const first = at("save:preparing") + 1;
  for (const { call } of calls.slice(first, at("save:ready"))) {
    if (call.startsWith("save:")) continue;
    await t.step(`abort at ${call}`, async () => {
      const w = await newWorld();
      const ac = new AbortController();
      const spec = w.spec(
        migrate.recorder(w.store, { strategy: "in-place", from: "host", to: "nspawn" }),
      );
      // The abort arrives while `call` runs; the next forward step sees it.
      const orig = w.call.bind(w);
      w.call = (name, effect) => {
        if (name === call) ac.abort(new Error("SIGINT"));
        return orig(name, effect);
      };
      const r = await migrate.runInPlace(spec, { signal: ac.signal });
      const j = await w.store.load();
      assertEquals(w.violations, []);
      if (j.step === migrate.StepComplete) return; // the last forward call had run
      assertEquals([j.step, r.rolledBack], [migrate.StepRolledBack, true]);
      assert(w.slot("a")?.running && !w.slot("b"));
    });
  }
});

Deno.test("a stale snapshot of an earlier migration is never restored", async (t) => {
  // The earlier migration's discard failed (or it crashed before it): its
  // snapshot is still there when the next migration runs and rolls back.
  for (
    const faults of [
      [{ call: "save:preparing", kind: "fail" }],
      [{ call: "snapshot-config", kind: "crash-before" }],
      [{ call: "snapshot-config", kind: "power-before" }],
      [{ call: "snapshot-config", kind: "fail" }],
    ] as Fault[][]
  ) {
    await t.step(JSON.stringify(faults), async () => {
      const w = await newWorld();
      w.snapshot = { owner: "2025-01-01T00:00:00.000Z", content: "host-config:stale" };
      const { outcome } = await scenario(faults, [], w);
      assert(outcome === "rolled-back" || outcome === "nothing-changed", outcome);
      assertEquals(w.hostConfig, originalHostConfig, "the operator's config is untouched");
    });
  }
});

Deno.test("resume at ready with a target that will not start records failed (ErrTargetLost)", async () => {
  const w = await newWorld();
  w.reboot([{ call: "save:ready", kind: "power-after" }]);
  assertEquals(await w.run(), "crashed");
  w.reboot([{ call: "start-target", kind: "fail" }]);
  const o = ended(await w.resume());
  assert(migrate.is(o.error, migrate.ErrTargetLost), o.error?.message);
  assertEquals([o.journal.step, o.target, o.rolledBack], [migrate.StepFailed, undefined, false]);
  // A boot after that starts nothing: which stack may run is a person's call.
  w.reboot();
  const b = await w.boot();
  assert(b !== "crashed" && b.attention && b.started === undefined);
});

Deno.test("prepareHost failing at ready is retried by every resume, never a crash loop", async () => {
  const w = await newWorld();
  w.reboot([{ call: "prepare-host", kind: "fail" }]);
  const r = await w.run();
  assert(r !== "crashed");
  assertEquals(r.target, { mode: "nspawn", slot: "b" });
  assertEquals((await w.store.load()).step, migrate.StepReady);
  for (let i = 0; i < migrate.defaultMaxAttempts + 2; i++) {
    w.reboot([{ call: "prepare-host", kind: "fail" }]);
    const o = ended(await w.resume());
    assertEquals(o.journal.step, migrate.StepReady, `resume ${i + 1} failed cleanly`);
    assertEquals(o.journal.attempts, undefined, "a resume that returned is not counted");
    assert(w.slot("b")?.running);
  }
  w.reboot();
  const o = ended(await w.resume());
  assert(!o.error, o.error?.message);
  assertEquals(o.journal.step, migrate.StepComplete);
});

Deno.test("the loop guard gives up on a recovery that keeps dying at one step", async () => {
  const w = await newWorld();
  w.reboot([{ call: "save:starting-target", kind: "crash-after" }]);
  assertEquals(await w.run(), "crashed");
  // docs/migration.md: resumed a 4th time at the same step, it records failed.
  for (let i = 1; i <= 3; i++) {
    w.reboot([{ call: "start-source", kind: "power-before" }]);
    assertEquals(await w.resume(), "crashed");
    const j = await w.store.load();
    assertEquals([j.step, j.attempts], [migrate.StepStartingTarget, i]);
  }
  w.reboot();
  const o = ended(await w.resume());
  assert(migrate.is(o.error, migrate.ErrTooManyAttempts));
  // It says where it gave up and after how many resumes, here and in the journal.
  const gaveUp = migrate.find(o.error, migrate.ErrTooManyAttempts)!;
  assertEquals(gaveUp.attempts, 3);
  assert(gaveUp.message.includes(migrate.StepStartingTarget), gaveUp.message);
  assertEquals(o.journal.message, gaveUp.message);
  assertEquals([o.acted, o.rolledBack], [true, false], "it recorded failed; nothing was undone");
  assertEquals(o.journal.step, migrate.StepFailed);
  assert(!w.log.slice(-2).includes("start-source"), "gave up without acting");
});

Deno.test("a resume whose count cannot be written does not act, and the next one finishes", async () => {
  const w = await newWorld();
  w.reboot([{ call: "save:starting-target", kind: "crash-after" }]);
  assertEquals(await w.run(), "crashed");
  w.reboot([{ call: "save:starting-target", kind: "fail" }]);
  const before = w.log.length;
  const o = ended(await w.resume());
  assertEquals([o.acted, o.rolledBack], [false, false]);
  // The error is the journal write (record) at the recorded step, caused by
  // the write's own failure.
  const e = migrate.find(o.error, migrate.ActionError);
  assertEquals([e?.action, e?.step], ["record", migrate.StepStartingTarget], String(o.error));
  assert(String((e?.cause as Error)?.message).includes("injected failure"), String(e?.cause));
  assertEquals(w.log.slice(before).filter((c) => !c.startsWith("save:")), [], "it acted");
  w.reboot();
  // Interrupted before persisting: the next resume acts, and rolls back.
  const again = ended(await w.resume());
  assert(again.acted && again.rolledBack, String(again.error));
  assertEquals(again.journal.step, migrate.StepRolledBack);
});

Deno.test("resume of a reprovision journal refuses in place, acting on nothing", async () => {
  const w = await newWorld();
  await w.store.save({ ...sampleJournal(migrate.StepReprovisioning), strategy: "reprovision" });
  const before = w.log.length;
  const o = ended(await w.resume());
  assertEquals([o.acted, o.rolledBack], [false, false]);
  assert(migrate.is(o.error, migrate.ErrInvalidSpec), String(o.error));
  assertEquals(w.log.slice(before).filter((c) => !c.startsWith("save:")), []);
  assertEquals((await w.store.load()).step, migrate.StepReprovisioning);
});

Deno.test("the loop guard does not fire on a migration that progresses across boots", async () => {
  const w = await newWorld();
  w.reboot([{ call: "save:awaiting-ready", kind: "power-after" }]);
  assertEquals(await w.run(), "crashed");
  w.reboot([{ call: "save:ready", kind: "power-after" }]);
  assertEquals(await w.boot(), "crashed");
  assertEquals((await w.store.load()).attempts, undefined, "recording ready reset the count");
  w.reboot([{ call: "destroy-source", kind: "power-after" }]);
  assertEquals(await w.boot(), "crashed");
  w.reboot([{ call: "save:complete", kind: "power-before" }]);
  assertEquals(await w.boot(), "crashed");
  w.reboot();
  const b = await w.boot();
  assert(b !== "crashed" && !b.attention, "the last boot brought the node up");
  assertEquals((await w.store.load()).step, migrate.StepComplete);
  assert(w.slot("b")?.running && !w.slot("a"));
  assertEquals(w.violations, []);
});

Deno.test("a boot with no journal starts the applied stack; a power cut stops it first", async () => {
  const w = await newWorld();
  w.powerCut();
  assert(!w.slot("a")?.running);
  const b = await w.boot();
  assert(b !== "crashed" && b.resumed === undefined);
  assertEquals(b.started, { mode: "host", slot: "a" });
  assert(w.slot("a")?.running);
});

Deno.test("runInPlace reports missing hooks before anything happens", async () => {
  const w = await newWorld();
  const { waitReady: _w, restoreSource: _r, ...spec } = w.spec(undefined);
  const r = await migrate.runInPlace(spec);
  assert(migrate.is(r.error, migrate.ErrInvalidSpec));
  assert(r.error?.message.includes("waitReady") && r.error.message.includes("restoreSource"));
  assertEquals(w.log, []);
});

Deno.test("each hook the seed requires, missing alone, is named and nothing happens", async (t) => {
  // The seed's required hooks, and those a set hook makes required.
  const required: [keyof migrate.InPlaceSpec, string, boolean][] = [
    ["source", "source", false],
    ["target", "target", false],
    ["sourceRoot", "sourceRoot", false],
    ["targetSpec", "targetSpec", false],
    ["preflight", "preflight", false],
    ["cleanupNetwork", "cleanupNetwork", false],
    ["waitReady", "waitReady", false],
    ["removeSourceConfig", "removeSourceConfig", false],
    ["restoreSource", "restoreSource", false],
    ["restoreConfig", "restoreConfig", false],
    ["discardConfig", "discardConfig", false],
    ["targetRoot", "targetRoot", true],
  ];
  for (const [hook, named, resumeOnly] of required) {
    await t.step(hook, async () => {
      const w = await newWorld();
      const spec = { ...w.spec(undefined) } as Record<string, unknown>;
      delete spec[hook];
      const r = resumeOnly
        ? await migrate.resumeInPlace(
          spec as unknown as migrate.InPlaceSpec,
          migrate.StepPersisting,
        )
        : await migrate.runInPlace(spec as unknown as migrate.InPlaceSpec);
      assert(migrate.is(r.error, migrate.ErrInvalidSpec), String(r.error));
      assert(r.error!.message.includes(named), r.error!.message);
      assertEquals(r.rolledBack, false, "nothing ran, so nothing was rolled back");
      assertEquals(w.log, []);
    });
  }
});

/** The outcome of a resume that neither crashed nor found no journal. */
function ended(o: migrate.ResumeOutcome | "crashed" | "no-journal"): migrate.ResumeOutcome {
  assert(typeof o === "object", `resume ended with ${o}`);
  return o;
}

function countNth(log: Call[]): { call: Call; nth: number }[] {
  const seen = new Map<Call, number>();
  return log.map((call) => {
    const nth = (seen.get(call) ?? 0) + 1;
    seen.set(call, nth);
    return { call, nth };
  });
}

Deno.test("a failing call is reported as an ActionError naming it and the step recorded before it", async (t) => {
  // The report's failedStep (docs/cli.md) comes from here: the operator must
  // be told which call failed and how far the journal got.
  for (const r of table) {
    for (const call of r.calls) {
      await t.step(call, async () => {
        const w = await newWorld();
        w.faults = [{ call, kind: "fail", nth: 1 }];
        const o = await w.run();
        assert(o !== "crashed" && o.error, `${call}: the run reported no error`);
        const first = migrate.find(o.error, migrate.ActionError);
        assertEquals(first?.action, call, String(o.error));
        assertEquals(first?.step, r.step, `${call}: the step recorded before it`);
        // The call's own error is kept as the cause, for the message.
        assert(
          first?.cause instanceof Error && first.cause.message === `injected failure in ${call}`,
          `${call}: cause ${String(first?.cause)}`,
        );
      });
    }
  }
});
