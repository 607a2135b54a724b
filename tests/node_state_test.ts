// deno-lint-ignore-file no-console
// A node's data survives every move, shown with a real stateful stack:
// Debian's etcd (etcd-server) on a declared state directory, installed and
// migrated with the real CLI on real systemd in the sandbox.
//
// Invariants each case checks:
// - every key etcd acknowledged before the step is there after it, and
//   etcd's revision never goes back (an empty or stale data directory would
//   start again at a lower revision);
// - at no instant did two etcd processes run (a watcher samples the process
//   table every 5 ms), so two stacks never had the node's data open at once;
// - exactly one stack runs afterwards (Node.assertInvariant), and node.json
//   names it.

import { assert, assertEquals } from "./support/assert.ts";
import { etcdData, makeBundle, stackState } from "./support/bundle.ts";
import { EtcdWatch, getKeys, keyNames, putKeys } from "./support/etcd.ts";
import { nspawnUnavailable } from "./support/sandbox.ts";
import { type Mode, Node } from "./support/sandbox_node.ts";
import { journalSteps, readStepTable } from "./support/step_table.ts";
import { lacking } from "../scripts/packages.ts";

const etcdMissing = lacking("etcd-server") ?? lacking("etcd-client");
const skip = nspawnUnavailable ?? etcdMissing;
if (skip) console.error(`node state (etcd) tests are skipped: ${skip}`);
const ignore = skip !== undefined;

const steps = journalSteps(await readStepTable());
const finishes = (step: string) => steps.indexOf(step as never) >= steps.indexOf("awaiting-ready");
/** Power-on to systemd's boot done, and to etcd healthy, after each cut (for docs/performance.md). */
const booted: number[] = [];
const healthy: number[] = [];
const other = (m: Mode): Mode => (m === "host" ? "nspawn" : "host");

/** Writes n keys and returns what must survive: the keys and the revision after them. */
async function write(n: Node, prefix: string, count = 100) {
  const r = await putKeys(n.sb, prefix, count);
  assertEquals(r.acked, count);
  return { prefix, keys: keyNames(prefix, count), revision: r.revision };
}

/** Every acknowledged key is there and the revision did not go back. */
async function assertKept(
  n: Node,
  written: { prefix: string; keys: string[]; revision: number }[],
  label: string,
) {
  for (const w of written) {
    const got = await getKeys(n.sb, w.prefix);
    assertEquals(
      got.keys.length,
      w.keys.length,
      `${label}: ${got.keys.length}/${w.keys.length} keys of ${w.prefix} (revision ${got.revision})`,
    );
    assertEquals(got.keys, w.keys, label);
    assert(
      got.revision >= w.revision,
      `${label}: revision went back ${w.revision} → ${got.revision}`,
    );
  }
}

for (const mode of ["host", "nspawn"] as const) {
  Deno.test({
    name: `etcd in ${mode} mode keeps every key through a restart of the stack and a power cut`,
    ignore,
    async fn() {
      await using n = await Node.boot(mode, undefined, { persistent: true, stack: "etcd" });
      const w1 = await write(n, "restart/");
      await n.sb.sh("systemctl restart stratum-a.target");
      await waitHealthy(n);
      await assertKept(n, [w1], "after a restart of stratum-a.target");
      const w2 = await write(n, "cut/");
      await n.powerCut();
      const t = await n.boot();
      assert(t.healthyMs !== undefined, "etcd did not come back after the power cut");
      await assertKept(n, [w1, w2], "after a power cut and a boot");
    },
  });

  Deno.test({
    name: `etcd migrated ${mode} → ${
      other(mode)
    } → ${mode}: every key kept, never two etcd at once`,
    ignore,
    async fn() {
      await using n = await Node.boot(mode, undefined, { stack: "etcd" });
      await using watch = await EtcdWatch.start(n.sb);
      const w1 = await write(n, "before/");
      const there = await migrateRun(n, other(mode));
      assertEquals([there.code, there.doc?.outcome], [0, "complete"], there.stderr);
      await assertKept(n, [w1], `after ${mode} → ${other(mode)}`);
      const w2 = await write(n, "between/");
      assertEquals((await n.stratum(["migrate", "ack"])).code, 0);
      const back = await migrateRun(n, mode);
      assertEquals([back.code, back.doc?.outcome], [0, "complete"], back.stderr);
      await assertKept(n, [w1, w2], `after ${other(mode)} → ${mode}`);
      assertEquals(await watch.max(), 1, "two etcd processes ran at once");
      // The data directory stayed where it was, marked, and was never copied into a slot.
      const s = await n.sb.sh(
        `ls -A ${etcdData}; ls -A /var/lib/stratum/slots/*/var/lib 2>/dev/null || true`,
      );
      assertEquals(s.trim().split("\n"), [".stratum-state.json", "member"]);
    },
  });

  Deno.test({
    name: `a ${mode} → ${
      other(mode)
    } migration that rolls back after the target ran keeps every key`,
    ignore,
    async fn() {
      await using n = await Node.boot(mode, undefined, { stack: "etcd" });
      await using watch = await EtcdWatch.start(n.sb);
      const w1 = await write(n, "before/");
      // The journal write after the target was started and recorded fails,
      // as a full disk would: the target ran on the data, then the source
      // is started again on it.
      const r = await migrateRun(n, other(mode), {
        STRATUM_FAILPOINT: "fail-record:awaiting-ready",
      });
      assertEquals([r.code, r.doc?.outcome], [1, "rolled-back"], r.stderr);
      assertEquals(await n.assertInvariant("after the rollback"), "rolled-back");
      await assertKept(n, [w1], "after the rollback");
      assertEquals(await watch.max(), 1, "two etcd processes ran at once");
    },
  });

  Deno.test({
    name: `SIGKILL after each journal write of ${mode} → ${
      other(mode)
    }, then resume: every key kept`,
    ignore,
    async fn(t) {
      for (const step of steps) {
        await t.step(step, async () => {
          await using n = await Node.boot(mode, undefined, { stack: "etcd" });
          await using watch = await EtcdWatch.start(n.sb);
          const w1 = await write(n, "before/");
          const r = await migrateRun(n, other(mode), {
            STRATUM_FAILPOINT: `kill-after-record:${step}`,
          });
          assertEquals(r.code, 137, `the failpoint killed it after ${step}: ${r.stderr}`);
          assertEquals(
            (await n.state()).journal.step,
            step,
            "the journal says what may have happened",
          );
          const first = await n.stratum(["migrate", "resume", "--json"]);
          const outcome = await n.assertInvariant(`resume after a kill at ${step}`);
          assertEquals(outcome, finishes(step) ? "complete" : "rolled-back");
          assertEquals(first.code, finishes(step) ? 0 : 1, first.stderr);
          await assertKept(n, [w1], `resume after a kill at ${step}`);
          const before = await n.state();
          const second = await n.stratum(["migrate", "resume", "--json"]);
          assertEquals([second.code, second.doc.outcome], [0, "nothing-to-do"]);
          assertEquals(await n.state(), before, "a second resume changes nothing");
          assertEquals(await watch.max(), 1, `two etcd processes ran at once (kill at ${step})`);
        });
      }
    },
  });

  Deno.test({
    name: `a power cut after each journal write of ${mode} → ${
      other(mode)
    }, then a boot: every key kept`,
    ignore,
    async fn(t) {
      for (const step of steps) {
        await t.step(step, async () => {
          await using n = await Node.boot(mode, undefined, { persistent: true, stack: "etcd" });
          const w1 = await write(n, "before/");
          const r = await migrateRun(n, other(mode), {
            STRATUM_FAILPOINT: `kill-after-record:${step}`,
          });
          assertEquals(r.code, 137, `the failpoint killed it after ${step}: ${r.stderr}`);
          await n.powerCut();
          const time = await n.boot();
          assert(time.healthyMs !== undefined, `etcd did not come back after a cut at ${step}`);
          booted.push(time.bootedMs);
          healthy.push(time.healthyMs);
          const outcome = await n.assertInvariant(`boot after a power cut at ${step}`);
          assertEquals(outcome, finishes(step) ? "complete" : "rolled-back");
          const unit = await n.sb.exec(["systemctl", "is-failed", "stratum-boot.service"]);
          assertEquals(unit.stdout.trim(), "active", "stratum-boot.service did not fail");
          // node.json names the running slot, so the next plain reboot keeps it.
          const s = await n.state();
          assertEquals(s.active[s.node.slot], true);
          await assertKept(n, [w1], `boot after a power cut at ${step}`);
        });
      }
    },
  });
}

Deno.test({
  name: "reprovision keeps the node's data; --wipe-state starts it empty, on purpose",
  ignore,
  async fn() {
    await using n = await Node.boot("host", undefined, { stack: "etcd" });
    const w1 = await write(n, "before/");
    const r = await n.stratum([
      "migrate",
      "run",
      "--to",
      "nspawn",
      "--strategy",
      "reprovision",
      "--bundle",
      n.bundle,
      "--json",
    ]);
    assertEquals(r.code, 0, r.stderr);
    await waitJournal(n, "bootstrapped");
    await waitHealthy(n);
    await assertKept(n, [w1], "after a reprovision");
    assertEquals((await n.stratum(["migrate", "ack"])).code, 0);

    const wiped = await n.stratum([
      "migrate",
      "run",
      "--to",
      "host",
      "--strategy",
      "reprovision",
      "--wipe-state",
      "--json",
    ]);
    assertEquals(wiped.code, 0, wiped.stderr);
    await waitJournal(n, "bootstrapped");
    await waitHealthy(n);
    const after = await getKeys(n.sb, "before/");
    assertEquals(after.keys, [], "--wipe-state starts the node's data empty");
  },
});

/** `stratum migrate run --to TO --bundle B --json` on the node, with env (failpoints). */
function migrateRun(n: Node, to: Mode, env: Record<string, string> = {}) {
  return n.stratum(["migrate", "run", "--to", to, "--bundle", n.bundle, "--json"], env);
}

async function waitHealthy(n: Node) {
  for (let i = 0; i < 300; i++) {
    const r = await n.sb.exec(["python3", "-c", probe]);
    if (r.code === 0) return;
    await new Promise((r) => setTimeout(r, 100));
  }
  throw new Error("etcd never became healthy");
}
const probe =
  "import urllib.request;urllib.request.urlopen('http://127.0.0.1:2379/health',timeout=1)";

async function waitJournal(n: Node, step: string) {
  for (let i = 0; i < 600; i++) {
    const s = await n.stratum(["migrate", "status", "--json"]);
    if (s.doc?.journal?.step === step) return;
    if (s.doc?.journal?.step === "failed") throw new Error(`reprovision failed: ${s.stdout}`);
    await new Promise((r) => setTimeout(r, 200));
  }
  throw new Error(`the journal never reached ${step}`);
}

Deno.test({
  name:
    "a state directory that is not the node's: plan and run refuse with exit 2 naming it, nothing changes; a boot does not start etcd on it",
  ignore,
  async fn() {
    await using n = await Node.boot("host", undefined, { persistent: true, stack: "etcd" });
    const w1 = await write(n, "before/");
    const before = await n.state();
    // Another node's marker (a data disk moved between nodes).
    const marker = `${etcdData}/.stratum-state.json`;
    const own = await n.sb.sh(`cat ${marker}`);
    await n.sb.sh(
      `printf '%s\\n' '{"id":"00000000000000000000000000000000","node":"node-9","path":"${etcdData}"}' > ${marker}`,
    );
    for (const cmd of ["plan", "run"]) {
      const r = await n.stratum(["migrate", cmd, "--to", "nspawn", "--bundle", n.bundle, "--json"]);
      assertEquals(r.code, 2, `${cmd}: ${r.stderr}`);
      assert(r.stdout.includes(etcdData), `${cmd} names the path: ${r.stdout}`);
    }
    const after = await n.state();
    assertEquals([after.files, after.active, after.journal], [
      before.files,
      before.active,
      null,
    ]);
    await n.sb.sh(`printf '%s' '${own.trim()}' > ${marker}`);
    // A data directory that is gone (an unmounted disk shows an empty mount
    // point): the boot refuses to start etcd on it, and says which path.
    await n.sb.sh(`mv ${etcdData} /var/lib/etcd-moved && mkdir -m 700 ${etcdData}`);
    // The running stack's data directory is empty: a migration would start
    // the target on nothing, so plan refuses (an empty directory only the
    // target declared would be claimed instead).
    const empty = await n.stratum(["migrate", "plan", "--to", "nspawn", "--bundle", n.bundle]);
    assertEquals(empty.code, 2, empty.stderr);
    assert(
      empty.stdout.includes(`${etcdData}, which the running stack uses, is empty`),
      empty.stdout,
    );
    await n.powerCut();
    const t = await n.boot(5_000);
    assertEquals(t.healthyMs, undefined, "etcd must not start on an empty data directory");
    assertEquals((await n.state()).active, { a: false, b: false });
    const why = await n.stratum(["node", "boot"]);
    assert(why.code !== 0 && why.stderr.includes(etcdData), why.stderr);
    // Put back, the next boot brings the node's data up whole.
    await n.sb.sh(`rmdir ${etcdData} && mv /var/lib/etcd-moved ${etcdData}`);
    const ok = await n.stratum(["node", "boot"]);
    assertEquals(ok.code, 0, ok.stderr);
    await waitHealthy(n);
    await assertKept(n, [w1], "after the data came back");
  },
});

Deno.test({
  name:
    "a stack of two services runs in both modes: plan passes, run completes, each service's state kept",
  ignore: nspawnUnavailable !== undefined,
  async fn() {
    await using n = await Node.fresh("nspawn");
    await Deno.remove(n.bundle, { recursive: true });
    await makeBundle(n.bundle, { twoServices: true });
    const inst = await n.stratum([
      "node",
      "install",
      "--mode",
      "nspawn",
      "--bundle",
      n.bundle,
      "--node",
      "node-1",
    ]);
    assertEquals(inst.code, 0, inst.stderr);
    // One booted machine, both services units inside it (docs/nspawn.md).
    assertEquals((await n.sb.sh("systemctl is-active stratum-a-machine.service")).trim(), "active");
    const inner = await n.inMachine(
      "a",
      "systemctl is-active stratum-node.service stratum-aux.service",
    );
    assertEquals(inner.trim().split("\n"), ["active", "active"]);
    const plan = await n.stratum(["migrate", "plan", "--to", "host", "--bundle", n.bundle]);
    assertEquals(plan.code, 0, plan.stderr);
    const run = await n.stratum(["migrate", "run", "--to", "host", "--bundle", n.bundle, "--json"]);
    assertEquals([run.code, run.doc?.outcome], [0, "complete"], run.stderr);
    assertEquals(await n.assertInvariant("two services, nspawn → host"), "complete");
    // Each service counted its starts in the node's state: one in nspawn mode, one in host mode.
    const starts = await n.sb.sh(
      `cat ${stackState}/starts-node; echo; cat ${stackState}/starts-aux`,
    );
    assertEquals(starts.trim().split("\n"), ["2", "2"]);
  },
});

Deno.test({
  name: "boot-to-healthy after a power cut at each journal write (figures)",
  ignore,
  fn() {
    if (healthy.length === 0) return;
    const med = (xs: number[]) => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)]!;
    console.log(
      `power cut at each step, ${healthy.length} boots: systemd boot done median ${
        Math.round(med(booted))
      } ms (max ${Math.round(Math.max(...booted))}); etcd healthy median ${
        Math.round(med(healthy))
      } ms (max ${Math.round(Math.max(...healthy))})`,
    );
    assertEquals(healthy.length, 14);
  },
});
