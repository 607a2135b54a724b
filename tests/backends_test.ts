// deno-lint-ignore-file no-console
// The host and nspawn backends against a real systemd, inside the sandbox.
import { join } from "node:path";
import { assert, assertEquals } from "./support/assert.ts";
import { type Behavior, makeBundle, makeWorkloadBundle } from "./support/bundle.ts";
import { nspawnUnavailable, repoRoot, Sandbox, sandboxUnavailable } from "./support/sandbox.ts";

if (sandboxUnavailable) console.error(`systemd sandbox tests are skipped: ${sandboxUnavailable}`);
if (nspawnUnavailable) console.error(`nspawn tests are skipped: ${nspawnUnavailable}`);

const driver = "tests/support/sandbox/drive_backend.ts";

/** Bundles this file made, removed when the test run ends. */
const made: string[] = [];
globalThis.addEventListener("unload", () => {
  for (const d of made) Deno.removeSync(d, { recursive: true });
});

/** A bundle inside the checkout, which the sandbox sees (its /tmp is private). */
async function bundle(
  behavior?: Partial<Record<"host" | "nspawn", Behavior>>,
  healthExec?: string[],
): Promise<string> {
  await Deno.mkdir(join(repoRoot, ".test-tmp"), { recursive: true });
  const dir = await Deno.makeTempDir({ dir: join(repoRoot, ".test-tmp"), prefix: "bundle-" });
  made.push(dir);
  return await makeBundle(dir, {
    ...(behavior ? { behavior } : {}),
    ...(healthExec ? { healthExec } : {}),
  });
}

async function workloadBundle(
  declare: boolean,
  runtime?: { state: string; declare: boolean },
): Promise<string> {
  await Deno.mkdir(join(repoRoot, ".test-tmp"), { recursive: true });
  const dir = await Deno.makeTempDir({ dir: join(repoRoot, ".test-tmp"), prefix: "bundle-" });
  made.push(dir);
  return await makeWorkloadBundle(dir, { declare, ...(runtime ? { runtime } : {}) });
}

// deno-lint-ignore no-explicit-any
async function drive(sb: Sandbox, args: string[]): Promise<Record<string, any>> {
  const r = await sb.deno(["run", "-A", driver, ...args]);
  assertEquals(r.code, 0, r.stderr);
  const doc = JSON.parse(r.stdout);
  assert(!doc.unexpected, JSON.stringify(doc.unexpected));
  return doc;
}

for (const mode of ["host", "nspawn"] as const) {
  const ignore = mode === "nspawn"
    ? nspawnUnavailable !== undefined
    : sandboxUnavailable !== undefined;

  Deno.test({
    name: `${mode} backend: prepare, start, healthy, stop, destroy; every call idempotent`,
    ignore,
    async fn() {
      await using sb = await Sandbox.start();
      const o = await drive(sb, ["lifecycle", mode, await bundle()]);
      assertEquals(o.prepared.active, false, "prepare never starts anything");
      assertEquals(o.prepared.health, "refused");
      assert(o.prepared.units.includes("stratum-a.target"), JSON.stringify(o.prepared.units));
      assertEquals(o.preparedTwice.units, o.prepared.units);
      assertEquals(o.started.active, true);
      assertEquals(o.started.health, `200 ok ${mode} node-1`);
      assertEquals(o.startedTwice.health, `200 ok ${mode} node-1`);
      assertEquals([o.stopped.active, o.stopped.health], [false, "refused"]);
      assertEquals([o.stoppedTwice.active, o.stoppedTwice.health], [false, "refused"]);
      assertEquals(o.restarted.health, `200 ok ${mode} node-1`);
      assertEquals([o.destroyed.units, o.destroyed.slotExists, o.destroyed.health], [
        [],
        false,
        "refused",
      ]);
      assertEquals([o.destroyedTwice.units, o.destroyedTwice.slotExists], [[], false]);
      assert(
        String(o.hostFile).includes(`stratum ${mode} mode`),
        "prepare writes the stack's host files",
      );
    },
  });

  Deno.test({
    name: `${mode} backend: a stack that cannot start is a typed error with systemd's message`,
    ignore,
    async fn() {
      await using sb = await Sandbox.start();
      const o = await drive(sb, ["fail-start", mode, await bundle({ [mode]: "fail-start" })]);
      assertEquals(o.error?.name, "UnitError", JSON.stringify(o));
      assert(o.error.message.includes("stratum-a.target"), o.error.message);
      assert(o.error.message.includes("exit status 3"), "names the failed service and its status");
      if (mode === "nspawn") {
        // What failed inside the machine, and its last words, from its console.
        assert(
          o.error.message.includes("inside the machine: stratum-node.service (Result=exit-code") &&
            o.error.message.includes("refusing to start (behavior=fail-start)"),
          o.error.message,
        );
      }
      assertEquals([o.after.active, o.after.health], [false, "refused"]);
      assertEquals([o.destroyed.units, o.destroyed.slotExists], [[], false]);
    },
  });
}

Deno.test({
  name: "nspawn backend: a command probe running in the machine does not hold up its stop",
  ignore: nspawnUnavailable !== undefined,
  async fn() {
    // Invariant: the machine goes down on its own when stopped (Result
    // success, not killed at its stop timeout) with a probe still inside,
    // and the probe fails rather than outliving it.
    await using sb = await Sandbox.start();
    const o = await drive(sb, [
      "probe-during-stop",
      "nspawn",
      await bundle(undefined, ["/bin/sleep", "47"]),
    ]);
    assertEquals(o.unexpected, undefined, JSON.stringify(o));
    assertEquals(o.machine, { Result: "success", ActiveState: "inactive" });
    assertEquals(o.probe.ok, false, JSON.stringify(o.probe));
  },
});

Deno.test({
  name: "host backend: stopping a slot stops the workloads its stack declares, outside its units",
  ignore: sandboxUnavailable !== undefined,
  async fn() {
    // Invariant: after stop, no process of the stack runs, also one that
    // left its unit's cgroup as runc's containers do. Undeclared, the same
    // process outlives the stop: what the declaration is for.
    await using sb = await Sandbox.start();
    const declared = await drive(sb, ["workloads", "host", await workloadBundle(true)]);
    assertEquals([declared.unexpected, declared.stopFailed], [undefined, undefined]);
    assertEquals([declared.running, declared.active, declared.leftAfterStop], [1, false, 0]);
    // A slot destroyed with its units already down (a rollback's failed
    // target) while the other slot is down: its workload dies too.
    assertEquals([declared.runningAfterUnitsStop, declared.leftAfterDestroy], [1, 0]);
    const undeclared = await drive(sb, ["workloads", "host", await workloadBundle(false)]);
    assertEquals(undeclared.unexpected, undefined, JSON.stringify(undeclared));
    assertEquals([undeclared.running, undeclared.leftAfterStop], [1, 1]);
  },
});

Deno.test({
  name:
    "host backend: stopping a slot stops every container of the runtime its stack names, in any namespace and cgroup",
  ignore: sandboxUnavailable !== undefined,
  async fn() {
    // Invariant: after a host-mode slot's stop (and a destroy with its
    // units already down, the other slot down), no process whose root is a
    // container's root file system under the stack's runtime state
    // directory runs, whatever its cgroup; the declared workloads
    // (another cgroup) do not cover it. Without the runtime named, the same
    // container outlives the stop: the bug (two runtimes' containers).
    await using sb = await Sandbox.start();
    const state = "/run/stratum-test-containerd";
    const named = await drive(sb, [
      "workloads",
      "host",
      await workloadBundle(true, { state, declare: true }),
      "--container",
    ]);
    assertEquals([named.stopFailed, named.destroyFailed], [undefined, undefined]);
    assertEquals([named.running, named.ctrRunning], [1, 1], "both run before the stop");
    assertEquals([named.leftAfterStop, named.ctrLeftAfterStop], [0, 0], "none after the stop");
    assertEquals([named.ctrRunningAfterUnitsStop, named.ctrLeftAfterDestroy], [1, 0]);
    const unnamed = await drive(sb, [
      "workloads",
      "host",
      await workloadBundle(true, { state, declare: false }),
      "--container",
    ]);
    assertEquals([unnamed.ctrRunning, unnamed.ctrLeftAfterStop], [1, 1]);
  },
});

for (const [from, to] of [["host", "nspawn"], ["nspawn", "host"]] as const) {
  Deno.test({
    name: `runInPlace drives the real backends ${from} → ${to} to completion`,
    ignore: nspawnUnavailable !== undefined,
    async fn() {
      await using sb = await Sandbox.start();
      const r = await sb.deno([
        "run",
        "-A",
        "tests/support/sandbox/drive_migrate.ts",
        from,
        to,
        await bundle(),
      ]);
      assertEquals(r.code, 0, r.stderr);
      const o = JSON.parse(r.stdout);
      assertEquals(o.before, `200 ok ${from} node-1`);
      assertEquals(o.result, {
        target: { mode: to, slot: "b" },
        rolledBack: false,
        error: null,
        rollbackFailed: false,
      });
      assertEquals(o.journal, "complete");
      assertEquals([o.node.mode, o.node.slot], [to, "b"]);
      assertEquals(o.active, { a: false, b: true });
      assertEquals(o.units.a, [], "the source's units are gone");
      assertEquals(o.slots, { a: false, b: true });
      assertEquals(o.health, `200 ok ${to} node-1`);
      assert(String(o.sysctl).includes(`stratum ${to} mode`));
      assertEquals(o.snapshot, false, "the snapshot is discarded");
      // Host mode pins nothing; nspawn mode what is not installed (kubelet at least).
      assertEquals(o.pins, to === "host" ? [] : ["stratum-nspawn.pref"]);
    },
  });
}

Deno.test({
  name: "a failing waitReady rolls back to a running, healthy source",
  ignore: nspawnUnavailable !== undefined,
  async fn() {
    await using sb = await Sandbox.start();
    const dir = await bundle({ nspawn: "unhealthy" });
    const r = await sb.deno([
      "run",
      "-A",
      "tests/support/sandbox/drive_migrate.ts",
      "host",
      "nspawn",
      dir,
      "2000",
    ]);
    assertEquals(r.code, 0, r.stderr);
    const o = JSON.parse(r.stdout);
    assertEquals(o.result.rolledBack, true);
    assert(o.result.error.includes("not ready"), o.result.error);
    assertEquals(o.journal, "rolled-back");
    assertEquals([o.node.mode, o.node.slot], ["host", "a"], "node.json names the source again");
    assertEquals(o.active, { a: true, b: false });
    assertEquals(o.units.b, []);
    assertEquals(o.slots, { a: true, b: false });
    assertEquals(o.health, "200 ok host node-1");
    assert(String(o.sysctl).includes("stratum host mode"), "the host config is the source's again");
    assertEquals(o.snapshot, false);
    assertEquals(o.pins, [], "host mode pins nothing; the target's pin is gone");
  },
});
