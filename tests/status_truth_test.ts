// What the status commands say on a live node (the sandbox, through the
// artifact) is the truth an operator and a playbook act on:
//
// - a `failed` journal (a rollback failed: neither stack is known to run)
//   is exit 3 from `node status` and `migrate status` (docs/cli.md), and
//   `node status` never calls that node `healthy`, even while a stack
//   happens to answer;
// - while a run holds the migration lock, `migrate status` names the holder
//   (pid, command, since when) and says to wait, never to run `migrate
//   resume` (which would only find the lock busy: 75).

import { assert, assertEquals } from "./support/assert.ts";
import { nspawnUnavailable } from "./support/sandbox.ts";
import { Node } from "./support/sandbox_node.ts";
import { stratumArgv, stratumEnv } from "./support/stratum_bin.ts";

// deno-lint-ignore no-console
if (nspawnUnavailable) console.error(`status tests are skipped: ${nspawnUnavailable}`);
const ignore = nspawnUnavailable !== undefined;

Deno.test({
  name: "a failed journal on a node whose stack answers: node status and migrate status exit 3",
  ignore,
  async fn() {
    await using n = await Node.boot("host");
    // What a rollback that could not restart the source leaves (migrate_cli_test makes one for real).
    await n.sb.sh(`cat > /var/lib/stratum/migration.json <<'JOURNAL'
{"version":1,"strategy":"in-place","from":"host","to":"nspawn","sourceSlot":"a","targetSlot":"b","step":"failed","startedAt":"2026-11-30T10:00:00Z","updatedAt":"2026-11-30T10:00:09Z","message":"Rollback to the source failed: start-source: exit 1"}
JOURNAL`);
    assertEquals((await n.state()).health, "200 ok host node-1", "a stack answers all the same");
    const ns = await n.stratum(["node", "status", "--json"]);
    assertEquals([ns.code, ns.doc?.outcome], [3, "needs-attention"], ns.stdout + ns.stderr);
    assert(/failed/.test(ns.doc.nextAction), ns.doc.nextAction);
    const human = await n.stratum(["node", "status"]);
    assertEquals(human.code, 3, human.stdout);
    const ms = await n.stratum(["migrate", "status", "--json"]);
    assertEquals([ms.code, ms.doc?.outcome], [3, "failed"], ms.stdout + ms.stderr);
    assert(ms.doc.nextAction.startsWith("needs attention"), ms.doc.nextAction);
    // Acknowledged, the node is healthy again by both.
    assertEquals((await n.stratum(["migrate", "ack"])).code, 0);
    const after = await n.stratum(["node", "status", "--json"]);
    assertEquals([after.code, after.doc?.outcome], [0, "healthy"], after.stdout);
    assertEquals((await n.stratum(["migrate", "status"])).code, 0);
  },
});

Deno.test({
  name: "migrate status while a run holds the lock names the holder and says wait",
  ignore,
  async fn() {
    await using n = await Node.boot("host", { nspawn: "unhealthy" });
    const run = n.sb.spawn(
      stratumArgv(["migrate", "run", "--to", "nspawn", "--bundle", n.bundle, "--wait-ready", "8s"]),
      stratumEnv(),
    );
    try {
      let step: string | undefined;
      for (let i = 0; i < 300 && step !== "awaiting-ready"; i++) {
        step = (await n.state()).journal?.step;
        if (step !== "awaiting-ready") await new Promise((r) => setTimeout(r, 100));
      }
      assertEquals(step, "awaiting-ready");
      const st = await n.stratum(["migrate", "status", "--json"]);
      assertEquals([st.code, st.doc?.outcome], [0, "in-progress"], st.stdout + st.stderr);
      assert(st.doc.holder?.command?.includes("migrate run"), JSON.stringify(st.doc));
      assert(typeof st.doc.holder.pid === "number" && st.doc.holder.startedAt, st.stdout);
      assert(st.doc.nextAction.startsWith("wait"), st.doc.nextAction);
      assert(st.doc.nextAction.includes(`pid ${st.doc.holder.pid}`), st.doc.nextAction);
      assert(!st.doc.nextAction.includes("resume"), st.doc.nextAction);
      const human = await n.stratum(["migrate", "status"]);
      assert(human.stdout.includes(`lock: held by pid ${st.doc.holder.pid}`), human.stdout);
      assert(/next: wait/.test(human.stdout), human.stdout);
    } finally {
      await run.status;
      await run.stdout.cancel();
      await run.stderr.cancel();
    }
    // The run has ended (rolled back): the lock file's record is gone and so is the holder.
    const after = await n.stratum(["migrate", "status", "--json"]);
    assertEquals([after.doc?.outcome, after.doc?.holder], ["rolled-back", null], after.stdout);
  },
});

Deno.test({
  name: "a lock record a killed holder left is not a running holder: status says resume",
  ignore,
  async fn() {
    await using n = await Node.boot("host");
    // A run SIGKILLed after starting-target: the journal is open, the lock
    // file still names it, and the kernel has dropped its flock.
    const r = await n.stratum(
      ["migrate", "run", "--to", "nspawn", "--bundle", n.bundle],
      { STRATUM_FAILPOINT: "kill-after-record:starting-target" },
    );
    assertEquals(r.code, 137, r.stderr);
    assert((await n.sb.sh("cat /run/stratum/migrate.lock")).includes("migrate run"));
    const st = await n.stratum(["migrate", "status", "--json"]);
    assertEquals([st.doc?.outcome, st.doc?.holder], ["in-progress", null], st.stdout);
    assert(st.doc.nextAction.includes("stratum migrate resume"), st.doc.nextAction);
  },
});
