// `node upgrade|rollback|install --plan` (lib/node/plan_change.ts,
// lib/cli/node/plan.ts) through the real CLI: the checks the command would
// make before its first change, the versions from → to, the steps and the
// downtime; nothing on the node changes (files, units, the running stack,
// the journal), and the exit code is the one the command would give:
// 0 it would proceed (or has nothing to do), 2 it would refuse, 75 the lock
// is held, 3 the journal cannot be read.

import { join } from "node:path";
import { treeState } from "./support/tree_state.ts";
import { assert, assertEquals } from "./support/assert.ts";
import { makeBundle } from "./support/bundle.ts";
import { stratum } from "./support/cli.ts";
import { sampleJournal } from "./support/journal_sample.ts";
import { nspawnUnavailable } from "./support/sandbox.ts";
import { Node } from "./support/sandbox_node.ts";
import { scratchDir } from "./support/scratch.ts";
import * as migrate from "../lib/migrate/mod.ts";
import { lacking } from "../scripts/packages.ts";

const bundleDir = await makeBundle(await Deno.makeTempDir({ prefix: "stratum-plan-bundle-" }));

const plans: Record<string, string[]> = {
  "node install": ["node", "install", "--mode", "host", "--bundle", bundleDir, "--node", "n1"],
  "node upgrade": ["node", "upgrade", "--bundle", bundleDir],
  "node rollback": ["node", "rollback"],
};

async function scratchRoot(): Promise<string> {
  const root = await Deno.makeTempDir({ prefix: "stratum-plan-root-" });
  await Deno.mkdir(join(root, "etc/stratum"), { recursive: true });
  await Deno.mkdir(join(root, "var/lib/stratum"), { recursive: true });
  await Deno.mkdir(join(root, "run/stratum"), { recursive: true, mode: 0o700 });
  await Deno.chmod(join(root, "run/stratum"), 0o700);
  await Deno.writeTextFile(
    join(root, "etc/stratum/node.json"),
    JSON.stringify({ mode: "host", slot: "a", node: "n1" }),
  );
  return root;
}

Deno.test("--plan with a journal open: exit 2, refused with the journal's next action, nothing changed", async (t) => {
  for (const [name, args] of Object.entries(plans)) {
    await t.step(name, async () => {
      const root = await scratchRoot();
      try {
        await new migrate.JournalStore(join(root, "var/lib/stratum/migration.json"))
          .save(sampleJournal(migrate.StepRolledBack));
        const before = await treeState(root);
        const r = await stratum([...args, "--plan", "--root", root, "--json"]);
        assertEquals(r.code, 2, `${name}: ${r.stdout}${r.stderr}`);
        const doc = JSON.parse(r.stdout);
        assertEquals([doc.plan, doc.outcome, doc.exitCode], [true, "refused", 2], r.stdout);
        assert(/journal exists \(step rolled-back\)/.test(doc.message), r.stdout);
        assertEquals(await treeState(root), before, `${name} --plan changed the root`);
      } finally {
        await Deno.remove(root, { recursive: true });
      }
    });
  }
});

Deno.test("--plan with an unreadable journal: exit 3, as the command", async () => {
  const root = await scratchRoot();
  try {
    await Deno.writeTextFile(join(root, "var/lib/stratum/migration.json"), "{torn");
    for (const args of Object.values(plans)) {
      const r = await stratum([...args, "--plan", "--root", root, "--json"]);
      assertEquals(r.code, 3, `${args.join(" ")}: ${r.stdout}${r.stderr}`);
    }
  } finally {
    await Deno.remove(root, { recursive: true });
  }
});

const flockMissing = lacking("util-linux");

Deno.test({
  name: "--plan with the lock held: exit 75, outcome busy, and the plan never takes the lock",
  ignore: flockMissing !== undefined,
  async fn(t) {
    for (const [name, args] of Object.entries(plans)) {
      await t.step(name, async () => {
        const root = await scratchRoot();
        const lock = join(root, "run/stratum/migrate.lock");
        await Deno.writeTextFile(lock, "");
        const holder = new Deno.Command("flock", {
          args: ["-x", lock, "sh", "-c", "echo held; exec sleep 120"],
          stdout: "piped",
        }).spawn();
        const reader = holder.stdout.getReader();
        try {
          assertEquals(new TextDecoder().decode((await reader.read()).value).trim(), "held");
          const before = await treeState(root);
          const r = await stratum([...args, "--plan", "--root", root, "--json"]);
          assertEquals(r.code, 75, `${name}: ${r.stdout}${r.stderr}`);
          assertEquals(JSON.parse(r.stdout).outcome, "busy", r.stdout);
          assertEquals(await treeState(root), before, `${name} --plan changed the root`);
          assertEquals(await Deno.readTextFile(lock), "", "the plan wrote the lock's record");
        } finally {
          reader.releaseLock();
          holder.kill("SIGKILL");
          await holder.stdout.cancel().catch(() => {});
          await holder.status;
          await Deno.remove(root, { recursive: true });
        }
      });
    }
  },
});

const ignore = nspawnUnavailable !== undefined;

Deno.test({
  name:
    "upgrade, rollback and install --plan on a real node: versions from → to, steps, downtime; refusals as the run; nothing changes",
  ignore,
  async fn() {
    await using n = await Node.boot("host");
    const v2 = await makeBundle(await scratchDir("bundle-v2-"), { release: "2" });
    const before = await n.state();
    const unchanged = async (label: string) => {
      const now = await n.state();
      assertEquals(now.files, before.files, `${label}: files`);
      assertEquals([now.units, now.active, now.journal], [
        before.units,
        before.active,
        before.journal,
      ], `${label}: units, the running stack, the journal`);
    };

    const up = await n.stratum(["node", "upgrade", "--bundle", v2, "--plan", "--json"]);
    assertEquals([up.code, up.doc?.outcome, up.doc?.exitCode], [0, "planned", 0], up.stderr);
    assertEquals(
      [up.doc.from.version, up.doc.from.slot, up.doc.to.version, up.doc.to.slot],
      ["1", "a", "2", "b"],
      up.stdout,
    );
    // For docs/cli.md's example, not an assertion.
    // deno-lint-ignore no-console
    console.error(`node upgrade --plan --json: ${JSON.stringify(up.doc, null, 2)}`);
    assertEquals(up.doc.downtime.startsAt, "stopping-source");
    assertEquals(up.doc.downtime.healthWaitMs, 120_000);
    assert(up.doc.steps.some((s: { step: string }) => s.step === "awaiting-ready"), up.stdout);
    await unchanged("upgrade --plan");
    const human = await n.stratum(["node", "upgrade", "--bundle", v2, "--plan"]);
    assertEquals(human.code, 0, human.stderr);
    assert(
      human.stdout.includes("upgrade plan: 1 (host mode, slot a) → 2 (host mode, slot b)"),
      human.stdout,
    );
    assert(human.stdout.split("\n").filter(Boolean).length <= 5, `short: ${human.stdout}`);

    // Nothing kept yet: the rollback would refuse.
    const rb0 = await n.stratum(["node", "rollback", "--plan", "--json"]);
    assertEquals([rb0.code, rb0.doc?.outcome], [2, "refused"], rb0.stdout);
    assert(rb0.doc.message.includes("No earlier release is kept"), rb0.stdout);
    // The bundle that runs: nothing to do, as node upgrade's already-installed.
    const same = await n.stratum(["node", "upgrade", "--bundle", n.bundle, "--plan", "--json"]);
    assertEquals([same.code, same.doc?.outcome], [0, "nothing-to-do"], same.stdout);
    // Install: the node is installed from this bundle (nothing to do); another mode is refused.
    const inst = await n.stratum([
      "node",
      "install",
      "--mode",
      "host",
      "--bundle",
      n.bundle,
      "--plan",
      "--json",
    ]);
    assertEquals([inst.code, inst.doc?.outcome], [0, "nothing-to-do"], inst.stdout + inst.stderr);
    const other = await n.stratum([
      "node",
      "install",
      "--mode",
      "host",
      "--bundle",
      v2,
      "--plan",
      "--json",
    ]);
    assertEquals([other.code, other.doc?.outcome], [2, "refused"], other.stdout);
    assert(other.doc.message.includes("from another bundle"), other.stdout);
    await unchanged("rollback and install --plan");

    // After the upgrade: a downgrade is refused as the upgrade would refuse it, unless asked for.
    const r = await n.stratum(["node", "upgrade", "--bundle", v2, "--json"]);
    assertEquals([r.code, r.doc?.outcome], [0, "complete"], r.stderr);
    assertEquals((await n.stratum(["migrate", "ack"])).code, 0);
    const after = await n.state();
    const down = await n.stratum(["node", "upgrade", "--bundle", n.bundle, "--plan", "--json"]);
    assertEquals([down.code, down.doc?.outcome], [2, "refused"], down.stdout);
    assert(down.doc.message.includes("older than the 2 this node runs"), down.stdout);
    assertEquals([down.doc.from.version, down.doc.to.version], ["2", "1"], down.stdout);
    const run = await n.stratum(["node", "upgrade", "--bundle", n.bundle, "--json"]);
    assertEquals([run.code, run.doc?.outcome], [down.code, "refused"], "the run gives the same");
    const allowed = await n.stratum([
      "node",
      "upgrade",
      "--bundle",
      n.bundle,
      "--allow-downgrade",
      "--plan",
      "--json",
    ]);
    assertEquals([allowed.code, allowed.doc?.outcome], [0, "planned"], allowed.stdout);
    const rb = await n.stratum(["node", "rollback", "--plan", "--json"]);
    assertEquals([rb.code, rb.doc?.outcome], [0, "planned"], rb.stdout + rb.stderr);
    assertEquals([rb.doc.from.version, rb.doc.to.version], ["2", "1"], rb.stdout);
    assert(rb.doc.downtime.lastMs === null, "no rollback in the history yet");
    assert(typeof up.doc.downtime.lastMs === "object");
    const upAgain = await n.stratum(["node", "upgrade", "--bundle", v2, "--plan", "--json"]);
    assertEquals(upAgain.doc.outcome, "nothing-to-do", upAgain.stdout);
    const now = await n.state();
    assertEquals(now.files, after.files, "the plans after the upgrade changed files");
    assertEquals([now.units, now.active, now.journal], [after.units, after.active, after.journal]);

    // The lock held on the node (by a run that waits for its stack): 75, as the run.
    await n.sb.sh(
      "mkdir -p /run/stratum && chmod 700 /run/stratum && : > /run/stratum/migrate.lock && " +
        "(flock -x /run/stratum/migrate.lock sleep 60 >/dev/null 2>&1 &) && sleep 0.5",
    );
    const busy = await n.stratum(["node", "rollback", "--plan", "--json"]);
    assertEquals([busy.code, busy.doc?.outcome], [75, "busy"], busy.stdout + busy.stderr);
  },
});
