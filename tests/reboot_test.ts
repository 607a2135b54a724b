// deno-lint-ignore-file no-console
// Power cuts and the boot that follows, on real systemd: the sandbox keeps
// /etc and /var on disk, a power cut is SIGKILL of its systemd (every
// process dies at once, nothing stops cleanly), and the next boot goes to
// multi-user.target as a node does, with no human command. Invariant after
// that boot: exactly one stack is active and healthy, it is the one
// node.json names, the journal is terminal (rolled-back before the target
// was recorded running, complete from then on), and stratum-boot.service
// did not fail. Boot-to-healthy times are printed for the README.

import { assert, assertEquals } from "./support/assert.ts";
import { nspawnUnavailable } from "./support/sandbox.ts";
import { Node } from "./support/sandbox_node.ts";
import { journalSteps, readStepTable } from "./support/step_table.ts";

if (nspawnUnavailable) console.error(`reboot tests are skipped: ${nspawnUnavailable}`);
const ignore = nspawnUnavailable !== undefined;

const steps = journalSteps(await readStepTable());

const healthy: number[] = [];
const booted: number[] = [];

Deno.test({
  name: "a plain reboot with no migration brings the applied stack back",
  ignore,
  async fn() {
    await using n = await Node.boot("host", undefined, { persistent: true });
    await n.powerCut();
    const t = await n.boot();
    assert(t.healthyMs !== undefined, "the stack did not come back");
    const s = await n.state();
    assertEquals([s.active, s.health, s.journal], [
      { a: true, b: false },
      "200 ok host node-1",
      null,
    ]);
    assertEquals(
      (await n.sb.exec(["systemctl", "is-active", "stratum-boot.service"])).stdout.trim(),
      "active",
    );
    // A second reboot does the same: the boot path is idempotent.
    await n.powerCut();
    assert((await n.boot()).healthyMs !== undefined);
    assertEquals((await n.state()).active, { a: true, b: false });
  },
});

for (const [from, to] of [["host", "nspawn"], ["nspawn", "host"]] as const) {
  Deno.test({
    name:
      `a power cut right after each journal write, then a boot: one stack runs (${from} → ${to})`,
    ignore,
    async fn(t) {
      for (const step of steps) {
        await t.step(step, async () => {
          await using n = await Node.boot(from, undefined, { persistent: true });
          const r = await n.stratum(["migrate", "run", "--to", to, "--bundle", n.bundle], {
            STRATUM_FAILPOINT: `kill-after-record:${step}`,
          });
          assertEquals(r.code, 137, `the failpoint killed it after ${step}: ${r.stderr}`);
          await n.powerCut();
          const time = await n.boot();
          assert(time.healthyMs !== undefined, `no stack came up after a power cut at ${step}`);
          booted.push(time.bootedMs);
          healthy.push(time.healthyMs);
          const outcome = await n.assertInvariant(`boot after a power cut at ${step}`);
          const finishes = steps.indexOf(step) >= steps.indexOf("awaiting-ready");
          assertEquals(outcome, finishes ? "complete" : "rolled-back");
          const unit = await n.sb.exec(["systemctl", "is-failed", "stratum-boot.service"]);
          assertEquals(unit.stdout.trim(), "active", "stratum-boot.service did not fail");
          // node.json names the running slot, so the next plain reboot keeps it.
          const s = await n.state();
          assertEquals(s.active[s.node.slot], true);
        });
      }
    },
  });
}

Deno.test({
  name: "boot-to-healthy after a power cut (figures)",
  ignore,
  fn() {
    if (healthy.length === 0) return;
    const med = (xs: number[]) => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)]!;
    console.log(
      `power cut at each step, ${healthy.length} boots: systemd boot done median ${
        Math.round(med(booted))
      } ms (max ${Math.round(Math.max(...booted))}); healthy median ${
        Math.round(med(healthy))
      } ms (max ${Math.round(Math.max(...healthy))})`,
    );
    assertEquals(healthy.length, 14);
  },
});
