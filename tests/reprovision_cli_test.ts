// deno-lint-ignore-file no-console
// `stratum migrate run --strategy reprovision` end to end on real systemd:
// the run hands off to a transient unit and returns; the handoff resets the
// node and bootstraps it in the target mode. Invariants: after the handoff
// the node runs in the target mode, slot a, healthy, node.json naming it,
// the journal `bootstrapped`, and the transient unit gone; a handoff killed
// after any journal write is finished by the next boot with no command.

import { assert, assertEquals } from "./support/assert.ts";
import { nspawnUnavailable } from "./support/sandbox.ts";
import { Node } from "./support/sandbox_node.ts";

if (nspawnUnavailable) console.error(`reprovision tests are skipped: ${nspawnUnavailable}`);
const ignore = nspawnUnavailable !== undefined;
const unit = "stratum-reprovision.service";

/** Waits (bounded) until the handoff unit no longer runs; returns the journal's step. */
async function handoffEnded(n: Node): Promise<string> {
  const started = performance.now();
  for (;;) {
    const active = (await n.sb.exec(["systemctl", "is-active", unit])).stdout.trim();
    if (active !== "active" && active !== "activating") {
      return (await n.state()).journal?.step ?? "none";
    }
    if (performance.now() - started > 120_000) throw new Error("the handoff never ended");
    await new Promise((r) => setTimeout(r, 200));
  }
}

// deno-lint-ignore no-explicit-any
function assertRunsIn(s: any, mode: string, label: string): void {
  assertEquals(s.active, { a: true, b: false }, `${label}: slot a runs, alone`);
  assertEquals(s.health, `200 ok ${mode} node-1`, label);
  assertEquals([s.node?.mode, s.node?.slot, s.node?.node], [mode, "a", "node-1"], label);
  assertEquals(s.journal?.step, "bootstrapped", label);
}

for (const [from, to] of [["host", "nspawn"], ["nspawn", "host"]] as const) {
  Deno.test({
    name: `reprovision ${from} → ${to}: the run hands off and returns, the handoff bootstraps`,
    ignore,
    async fn() {
      await using n = await Node.boot(from);
      const r = await n.stratum([
        "migrate",
        "run",
        "--strategy",
        "reprovision",
        "--to",
        to,
        "--bundle",
        n.bundle,
        "--json",
      ]); // deno-fmt-ignore
      assertEquals(r.code, 0, r.stderr);
      assertEquals([r.doc.outcome, r.doc.unit], ["handed-off", unit]);
      assertEquals(r.doc.journal.strategy, "reprovision");
      // A second run while the reprovision is open changes nothing.
      const second = await n.stratum(["migrate", "run", "--to", to, "--bundle", n.bundle]);
      assert([2, 75].includes(second.code), `second run: ${second.code} ${second.stderr}`);
      assertEquals(await handoffEnded(n), "bootstrapped");
      const s = await n.state();
      assertRunsIn(s, to, "after the handoff");
      assertEquals([s.units.b, s.slots.b], [[], false], "nothing of the old stack is left");
      const gone = await n.sb.exec(["systemctl", "list-units", "--all", "--no-legend", unit]);
      assertEquals(gone.stdout.trim(), "", "the transient handoff unit is gone");
      const st = await n.stratum(["migrate", "status", "--json"]);
      assertEquals([st.doc.outcome, st.doc.journal.attempts], ["bootstrapped", 1]);
      const ack = await n.stratum(["migrate", "ack", "--json"]);
      assertEquals(ack.code, 0, ack.stderr);
      assertEquals((await n.state()).journal, null);
    },
  });
}

Deno.test({
  name: "a handoff SIGKILLed after each journal write is finished by the next boot",
  ignore,
  async fn(t) {
    for (const step of ["reprovisioning", "bootstrapping", "bootstrapped"]) {
      await t.step(step, async () => {
        await using n = await Node.boot("host", undefined, { persistent: true });
        const r = await n.stratum(
          ["migrate", "run", "--strategy", "reprovision", "--to", "nspawn", "--bundle", n.bundle],
          { STRATUM_FAILPOINT: `kill-after-record:${step}` },
        );
        assertEquals(r.code, 0, r.stderr);
        assertEquals(await handoffEnded(n), step, "the handoff died right after writing it");
        await n.powerCut();
        const b = await n.boot();
        assert(b.healthyMs !== undefined, "no stack came back after the boot");
        // The boot path may still be recording; wait for its unit to finish.
        const s = await n.state();
        assertRunsIn(s, "nspawn", `killed after ${step}, then a boot`);
      });
    }
  },
});

Deno.test({
  name:
    "a bootstrap that always fails ends failed at the third attempt; later resumes change nothing",
  ignore,
  async fn() {
    await using n = await Node.boot("host", { nspawn: "fail-start" });
    const r = await n.stratum([
      "migrate",
      "run",
      "--strategy",
      "reprovision",
      "--to",
      "nspawn",
      "--bundle",
      n.bundle,
      "--wait-ready",
      "10s",
    ]); // deno-fmt-ignore
    assertEquals(r.code, 0, r.stderr);
    assertEquals(await handoffEnded(n), "bootstrapping");
    const second = await n.stratum(["migrate", "resume", "--wait-ready", "10s", "--json"]);
    assertEquals([second.code, second.doc.outcome], [1, "retrying"], second.stderr);
    assertEquals(second.doc.journal.attempts, 2);
    const third = await n.stratum(["migrate", "resume", "--wait-ready", "10s", "--json"]);
    assertEquals([third.code, third.doc.outcome], [3, "failed"], third.stderr);
    assertEquals(third.doc.journal.attempts, 3);
    const before = (await n.state()).files;
    const again = await n.stratum(["migrate", "resume", "--json"]);
    assertEquals([again.code, again.doc.outcome], [3, "failed"]);
    assertEquals((await n.state()).files, before, "a resume over failed changed files");
  },
});
