// deno-lint-ignore-file no-console
// The fault matrix of the in-place migration, generated from the calls a
// clean run makes, so a new step gets its cases without editing this file.
//
// Every case ends by checking THE invariant: after the last run or resume,
//   - journal complete: the target runs, the source slot is gone, the applied
//     config names the target, no snapshot is left; or
//   - journal rolled-back: the source runs, the target slot is gone, the
//     applied config and host config are the source's again, no snapshot; or
//   - journal failed, and an error that said so is ErrRollbackFailed (or
//     ErrTooManyAttempts from the loop guard);
//   - never both stacks running; no journal at all only when nothing changed.
// And a further resume is a no-op.

import { assert, assertEquals, fail } from "./support/assert.ts";
import * as migrate from "../lib/migrate/mod.ts";
import { type Call, type Fault, originalHostConfig, World } from "./support/fake_node.ts";

const tmpRoot = await Deno.stat("/dev/shm").then(() => "/dev/shm", () => undefined);

async function newWorld(): Promise<World> {
  const dir = await Deno.makeTempDir({
    prefix: "stratum-matrix-",
    ...(tmpRoot ? { dir: tmpRoot } : {}),
  });
  return new World(`${dir}/migration.json`, "host", "nspawn");
}

async function journalOf(w: World): Promise<migrate.Journal | undefined> {
  return await w.store.load().catch((e) => {
    if (migrate.is(e, migrate.ErrNoJournal)) return undefined;
    throw e;
  });
}

/** Checks the invariant; returns the outcome's name. */
async function checkInvariant(w: World, errors: Error[], label: string): Promise<string> {
  const j = await journalOf(w);
  const src = w.slot("a");
  const tgt = w.slot("b");
  assert(!(src?.running && tgt?.running), `${label}: both stacks run`);
  if (j === undefined) {
    // No journal: the node must be exactly as before the run.
    assert(src?.running && !tgt, `${label}: no journal, but the slots changed`);
    assertEquals(
      [w.applied, w.hostConfig, w.snapshot],
      ["a", originalHostConfig, undefined],
      label,
    );
    assert(
      !w.log.some((c) => !c.startsWith("save:") && c !== "preflight" && c !== "download"),
      `${label}: no journal, but the host was changed`,
    );
    return "nothing-changed";
  }
  switch (j.step) {
    case migrate.StepComplete:
      assert(tgt?.built && tgt.running, `${label}: complete, but the target does not run`);
      assert(!src, `${label}: complete, but the source slot is left`);
      assertEquals(w.applied, "b", `${label}: complete, but the applied config is the source's`);
      assertEquals(w.snapshot, undefined, `${label}: complete, but the snapshot is left`);
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
      assertEquals(w.snapshot, undefined, `${label}: rolled-back, but the snapshot is left`);
      assert(j.message, `${label}: rolled-back without a message`);
      return "rolled-back";
    case migrate.StepFailed:
      assert(
        errors.some((e) =>
          migrate.is(e, migrate.ErrRollbackFailed) || migrate.is(e, migrate.ErrTooManyAttempts)
        ),
        `${label}: failed, but no error was ErrRollbackFailed: ${
          errors.map((e) => e.message).join(" | ")
        }`,
      );
      assert(j.message, `${label}: failed without a message`);
      return "failed";
    default:
      fail(`${label}: journal left at ${j.step}`);
  }
}

/** Runs `first` faults in the run, then resumes (with `second` faults) until a resume ends. */
async function scenario(
  runFaults: Fault[],
  resumeFaults: Fault[][] = [],
): Promise<{ w: World; outcome: string; errors: Error[]; resumeLogs: Call[][] }> {
  const w = await newWorld();
  const errors: Error[] = [];
  const resumeLogs: Call[][] = [];
  w.reboot(runFaults);
  const r = await w.run();
  let ended = r !== "crashed";
  if (r !== "crashed" && r.error) errors.push(r.error);
  const label = JSON.stringify({ runFaults, resumeFaults });
  let j = await journalOf(w);
  // A crash, or a run that stopped short of a terminal step, is resumed.
  let i = 0;
  while (!ended || (j && !migrate.isTerminal(j.step))) {
    assert(i < 6, `${label}: resume does not converge`);
    w.reboot(resumeFaults[i] ?? []);
    const start = w.log.length;
    const o = await w.resume();
    resumeLogs.push(w.log.slice(start));
    if (o === "no-journal") break;
    ended = o !== "crashed";
    if (o !== "crashed" && o.error) errors.push(o.error);
    j = await journalOf(w);
    i++;
  }
  const outcome = await checkInvariant(w, errors, label);
  // Resume after the end changes nothing.
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

/** The calls of a clean run, each with its occurrence number. */
async function cleanCalls(): Promise<{ call: Call; nth: number }[]> {
  const { w, outcome } = await scenario([]);
  assertEquals(outcome, "complete");
  const seen = new Map<Call, number>();
  return w.log.map((call) => {
    const nth = (seen.get(call) ?? 0) + 1;
    seen.set(call, nth);
    return { call, nth };
  });
}

const calls = await cleanCalls();
let cases = 0;

Deno.test("a clean run records every in-place step in order", async () => {
  const { w } = await scenario([]);
  assertEquals(
    w.log.filter((c) => c.startsWith("save:")),
    migrate.inPlaceSteps.map((s) => `save:${s}`),
  );
  // The source slot is retained until waitReady succeeds.
  assert(w.log.indexOf("destroy-source") > w.log.indexOf("wait-ready"));
});

Deno.test("each call failing ends in an invariant state", async (t) => {
  for (const { call, nth } of calls) {
    await t.step(`${call} #${nth} fails`, async () => {
      cases++;
      const { outcome } = await scenario([{ call, nth, kind: "fail" }]);
      const i = calls.findIndex((c) => c.call === call && c.nth === nth);
      const recordedPreparing = calls.findIndex((c) => c.call === "save:preparing");
      const ready = calls.findIndex((c) => c.call === "save:ready");
      if (i < recordedPreparing) assertEquals(outcome, "nothing-changed");
      else if (i <= ready) assertEquals(outcome, "rolled-back");
      else assertEquals(outcome, "complete", "a failure after ready is finished by resume");
    });
  }
});

Deno.test("a journal write that fails stops its step from running", async (t) => {
  const saves = calls.map((c, i) => ({ ...c, i })).filter((c) => c.call.startsWith("save:"));
  for (const { call, nth, i } of saves) {
    const step = calls[i + 1]?.call;
    if (step === undefined || step.startsWith("save:")) continue;
    await t.step(`${call} fails: ${step} does not run`, async () => {
      cases++;
      const w = await newWorld();
      w.reboot([{ call, nth, kind: "fail" }]);
      await w.run();
      assert(
        !w.log.slice(w.log.indexOf(call)).includes(step),
        `${step} ran after its record failed`,
      );
    });
  }
});

Deno.test("a crash at each instant, then resume, ends in an invariant state", async (t) => {
  for (const { call, nth } of calls) {
    for (const kind of ["crash-before", "crash-after"] as const) {
      await t.step(`${kind} ${call} #${nth}`, async () => {
        cases++;
        const { outcome, resumeLogs } = await scenario([{ call, nth, kind }]);
        const i = calls.findIndex((c) => c.call === call && c.nth === nth);
        const reached = (step: migrate.Step) => {
          const at = calls.findIndex((c) => c.call === `save:${step}`);
          return i > at || (i === at && kind === "crash-after");
        };
        // Once the target is recorded as running, resume finishes; before, it rolls back.
        if (reached(migrate.StepAwaitingReady)) assertEquals(outcome, "complete");
        else if (reached(migrate.StepPreparing)) assertEquals(outcome, "rolled-back");
        else assertEquals(outcome, "nothing-changed");

        // A second crash at each instant of that resume, then a third resume.
        const resumeCalls = countNth(resumeLogs[0] ?? []);
        for (const rc of resumeCalls) {
          for (const kind2 of ["crash-before", "crash-after"] as const) {
            cases++;
            await scenario([{ call, nth, kind }], [[{ call: rc.call, nth: rc.nth, kind: kind2 }]]);
          }
        }
      });
    }
  }
});

Deno.test("each rollback action failing ends in failed with ErrRollbackFailed", async (t) => {
  const rollbackActions = new Set<Call>([
    "destroy-target",
    "restore-source",
    "restore-config",
    "start-source",
    "discard-config",
  ]);
  const ready = calls.findIndex((c) => c.call === "save:ready");
  for (const { call, nth } of calls.slice(0, ready + 1)) {
    if (
      !call.startsWith("save:") &&
      calls.findIndex((c) => c.call === call) < calls.findIndex((c) => c.call === "save:preparing")
    ) continue;
    // Find the rollback this failure triggers, then fail each of its actions.
    const probe = await scenario([{ call, nth, kind: "fail" }]);
    const rolled = probe.w.log.slice(probe.w.log.indexOf(call) + 1).filter((c) =>
      rollbackActions.has(c)
    );
    for (const r of rolled) {
      await t.step(`${call} fails, then ${r} fails`, async () => {
        cases++;
        const w = await newWorld();
        w.reboot([{ call, nth, kind: "fail" }, { call: r, kind: "fail" }]);
        const res = await w.run();
        assert(res !== "crashed");
        assert(migrate.is(res.error, migrate.ErrRollbackFailed), res.error?.message);
        assertEquals((await w.store.load()).step, migrate.StepFailed);
        assert(!(w.slot("a")?.running && w.slot("b")?.running));
        const snapshotTaken = w.log.includes("snapshot-config") && call !== "snapshot-config";
        if (r === "restore-config" && snapshotTaken) {
          assert(w.snapshot !== undefined, "the snapshot is kept when restoreConfig fails");
        }
        // The actions after the failed one did not run.
        const after = w.log.slice(w.log.lastIndexOf(r) + 1).filter((c) => rollbackActions.has(c));
        assertEquals(after, []);
      });
    }
  }
});

Deno.test("rollback restores the config after the target is gone and before the source starts", async () => {
  const { w } = await scenario([{ call: "wait-ready", kind: "fail" }]);
  const order = w.log.slice(w.log.indexOf("wait-ready") + 1);
  assertEquals(order, [
    "destroy-target",
    "restore-source",
    "restore-config",
    "start-source",
    "discard-config",
    "save:rolled-back",
  ]);
});

Deno.test("nothing is mutated when preflight or download fail", async () => {
  for (const call of ["preflight", "download"] as const) {
    const w = await newWorld();
    w.reboot([{ call, kind: "fail" }]);
    const r = await w.run();
    assert(r !== "crashed" && r.error);
    assertEquals(w.log.filter((c) => c !== "preflight" && c !== "download"), []);
    assertEquals(await journalOf(w), undefined);
  }
});

Deno.test("prepareHost failing leaves the journal at ready and a resume finishes it", async () => {
  const w = await newWorld();
  w.reboot([{ call: "prepare-host", kind: "fail" }]);
  const r = await w.run();
  assert(r !== "crashed");
  assertEquals(r.target, { mode: "nspawn", slot: "b" });
  assertEquals((await w.store.load()).step, migrate.StepReady);
  assert(w.slot("b")?.running);
  w.reboot();
  const o = ended(await w.resume());
  assert(!o.error);
  assertEquals(o.journal.step, migrate.StepComplete);
});

Deno.test("the loop guard gives up on a recovery that keeps crashing at one step", async () => {
  // The crash sits in the rollback's source start, so every resume dies there.
  const w = await newWorld();
  w.reboot([{ call: "save:starting-target", kind: "crash-after" }]);
  assertEquals(await w.run(), "crashed");
  for (let i = 1; i <= migrate.defaultMaxAttempts; i++) {
    w.reboot([{ call: "start-source", kind: "crash-before" }]);
    assertEquals(await w.resume(), "crashed");
    const j = await w.store.load();
    assertEquals(j.step, migrate.StepStartingTarget);
    assertEquals(j.attempts, i);
  }
  w.reboot();
  const o = ended(await w.resume());
  assert(migrate.is(o.error, migrate.ErrTooManyAttempts));
  assertEquals(o.journal.step, migrate.StepFailed);
  assert(!w.log.slice(-2).includes("start-source"), "gave up without acting");
});

Deno.test("the loop guard does not fire on a migration that progresses across resumes", async () => {
  // Crash once per "boot" at a later step each time: attempts never pile up.
  const w = await newWorld();
  w.reboot([{ call: "save:awaiting-ready", kind: "crash-after" }]);
  assertEquals(await w.run(), "crashed");
  w.reboot([{ call: "save:ready", kind: "crash-after" }]);
  assertEquals(await w.resume(), "crashed");
  assertEquals((await w.store.load()).attempts, undefined, "recording ready reset the count");
  w.reboot([{ call: "destroy-source", kind: "crash-after" }]);
  assertEquals(await w.resume(), "crashed");
  w.reboot([{ call: "save:complete", kind: "crash-before" }]);
  assertEquals(await w.resume(), "crashed");
  w.reboot();
  const o = ended(await w.resume());
  assert(!o.error, o.error?.message);
  assertEquals(o.journal.step, migrate.StepComplete);
});

Deno.test("runInPlace reports missing hooks before anything happens", async () => {
  const w = await newWorld();
  const { waitReady: _w, restoreSource: _r, ...spec } = w.spec(undefined);
  const r = await migrate.runInPlace(spec);
  assert(migrate.is(r.error, migrate.ErrInvalidSpec));
  assert(r.error?.message.includes("waitReady") && r.error.message.includes("restoreSource"));
  assertEquals(w.log, []);
});

Deno.test("an aborted run rolls back, and the rollback is not aborted", async () => {
  const w = await newWorld();
  const ac = new AbortController();
  const spec = w.spec(
    migrate.recorder(w.store, { strategy: "in-place", from: "host", to: "nspawn" }),
  );
  const r = await migrate.runInPlace({
    ...spec,
    waitReady: (signal) => {
      ac.abort(new Error("operator interrupted"));
      signal.throwIfAborted();
      return Promise.resolve();
    },
  }, { signal: ac.signal });
  assertEquals(r.rolledBack, true);
  assertEquals((await w.store.load()).step, migrate.StepRolledBack);
  assert(w.slot("a")?.running && !w.slot("b"));
});

Deno.test("matrix size", () => {
  // Printed for the issue note; asserts the matrix was generated at all.
  console.log(`fault matrix: ${calls.length} calls in a clean run, ${cases} cases`);
  assert(cases > calls.length * 3);
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
