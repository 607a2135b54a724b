// deno-lint-ignore-file no-console
// Real power cuts: a node with its own kernel (tests/support/vm.ts) runs the
// artifact and Debian's etcd; SIGKILL of qemu loses the guest's page cache,
// and the next boot has no human command. After every boot:
// - the stack comes back healthy with no command (stratum-boot.service);
// - the journal is resolved: complete or rolled back, as the step allows;
// - exactly one slot target is active, and node.json names it;
// - the installed bundle verifies, and the running slot matches its manifest;
// - every etcd key acknowledged before the cut is there.
//
// STRATUM_VM_TESTS=all (`deno task test:vm`) cuts after each of the 7
// journal writes in both directions, and once during each of install's
// steps; install (`deno task test`'s default) makes only the cut right after
// `node install` returns; off skips them. CI (ci) does not run this file:
// tests/node_stack_vm_test.ts makes CI's real power cuts (right after
// install, and after `stopping-source` is recorded) on the real node stack
// in one VM (tests/vm_suites.ts). The sandbox's reboot harness cuts after
// every step in every CI run; the page cache's loss is what only a VM shows.

import { join } from "node:path";
import { assert, assertEquals } from "./support/assert.ts";
import { makeEtcdBundle } from "./support/bundle.ts";
import { getKeys, keyBatches } from "./support/etcd.ts";
import { crashChain, finishesAfter, journalSteps, readStepTable } from "./support/step_table.ts";
import { stratumBin } from "./support/stratum_bin.ts";
import { assertOnDisk, buildImage, type Vm, vmUnavailable, vmWithArtifact } from "./support/vm.ts";
import { installSteps } from "../lib/node/mod.ts";

const which = Deno.env.get("STRATUM_VM_TESTS") ?? "ci";
const skip = which === "off" ? "STRATUM_VM_TESTS=off" : vmUnavailable ??
  (stratumBin ? undefined : "the VM runs the artifact: set STRATUM_BIN (CI builds it)");
if (skip) console.error(`VM power-cut tests are skipped: ${skip}`);

type Mode = "host" | "nspawn";
const steps = journalSteps(await readStepTable());
const finishes = finishesAfter(steps);

/** The cuts to make, in an order that chains on one node: each starts in the mode the last left. */
function plan(): { from: Mode; step: string }[] {
  return which === "all" ? crashChain(steps, "host") : [];
}

const stratum = "/srv/payload/stratum";
const bundle = "/srv/payload/bundle";
/** Power-on to etcd healthy after each cut after a journal write, ms. */
const healthy: number[] = [];

Deno.test({
  name: `real power cuts in a VM (${which}): after node install, then after journal writes`,
  ignore: skip !== undefined,
  sanitizeOps: false,
  sanitizeResources: false,
  async fn(t) {
    const image = await buildImage();
    console.error(`vm image ready in ${(image.builtMs / 1000).toFixed(1)} s (${image.dir})`);
    await using vm = await vmWithArtifact(image.dir, stratumBin!, async (payload) => {
      await makeEtcdBundle(join(payload, "bundle"));
    });
    await vm.boot();
    const { write, written } = keyBatches(vm, 50);
    /** Cuts the power, boots with no command, and returns ms from power-on to etcd healthy. */
    const cutAndBoot = async (label: string) => {
      await vm.powerCut();
      const t0 = performance.now();
      await vm.boot();
      await waitHealthy(vm, label);
      const ms = performance.now() - t0;
      // The stack answers before stratum-boot.service has finished (a resume
      // may still clean up): the node is settled once the unit is done.
      await waitBootUnit(vm, label);
      return ms;
    };
    // As cloud-init runs it: waiting for a boot that still holds the lock.
    const install = (env: Record<string, string> = {}) =>
      vm.exec(
        [
          stratum,
          "node",
          "install",
          "--mode",
          "host",
          "--bundle",
          bundle,
          "--node",
          "node-1",
          "--wait-lock",
          "5m",
        ],
        { env },
      );

    if (which === "all") {
      // An install cut short at each of its steps is finished by running it
      // again, as cloud-init does when the power went out before its runcmd
      // ended. Chained: each run starts over what the last cut left.
      for (const step of installSteps) {
        await t.step(`power cut during node install, after ${step}`, async () => {
          const r = await install({ STRATUM_FAILPOINT: `kill-after-install:${step}` });
          // Once committed, a run finds the node installed and has no step left to die at.
          assert([137, 0].includes(r.code), `${step}: ${r.code} ${r.stderr}`);
          await vm.powerCut();
          await vm.boot();
          await waitBootUnit(vm, `after a cut during install at ${step}`);
        });
      }
    }

    await t.step("power cut right after node install returns", async () => {
      const r = await install();
      assertEquals(r.code, 0, r.stderr);
      // Right then: whatever install left only in the page cache is lost.
      const ms = await cutAndBoot("after install");
      console.error(`vm: after install, power-on to healthy ${Math.round(ms)} ms`);
      await write();
      await assertNode(vm, written, "host", "after a power cut right after install");
    });

    for (const { from, step } of plan()) {
      const to: Mode = from === "host" ? "nspawn" : "host";
      await t.step(`${from} → ${to}: power cut after ${step} is recorded`, async () => {
        await write();
        const r = await vm.exec([stratum, "migrate", "run", "--to", to, "--bundle", bundle], {
          env: { STRATUM_FAILPOINT: `kill-after-record:${step}` },
        });
        assertEquals(r.code, 137, `the failpoint killed it after ${step}: ${r.stderr}`);
        healthy.push(await cutAndBoot(step));
        const outcome = finishes(step) ? "complete" : "rolled-back";
        const status = JSON.parse(
          (await vm.exec([stratum, "migrate", "status", "--json"])).stdout,
        );
        assertEquals(status.journal?.step, outcome, `${step}: ${JSON.stringify(status)}`);
        await assertNode(vm, written, finishes(step) ? to : from, `power cut after ${step}`);
        const ack = await vm.exec([stratum, "migrate", "ack"]);
        assertEquals(ack.code, 0, ack.stderr);
      });
    }
    // A plain reboot: `deno task test:vm` (all); CI's subset leaves it out for time.
    if (which === "all") {
      await t.step("a plain reboot (clean shutdown) brings the node back whole", async () => {
        await write();
        await vm.shutdown();
        await vm.boot();
        await waitHealthy(vm, "after a reboot");
        await waitBootUnit(vm, "after a reboot");
        const node = JSON.parse(await vm.sh("cat /etc/stratum/node.json"));
        await assertNode(vm, written, node.mode, "after a plain reboot");
      });
    }
    if (healthy.length > 0) {
      const sorted = [...healthy].sort((a, b) => a - b);
      console.error(
        `vm: ${healthy.length} power cuts after journal writes; power-on to etcd healthy median ${
          Math.round(sorted[Math.floor(sorted.length / 2)]!)
        } ms, max ${Math.round(sorted[sorted.length - 1]!)} ms`,
      );
    }
  },
});

/** Waits until stratum-boot.service is no longer running (done, failed, or not installed). */
async function waitBootUnit(vm: Vm, label: string): Promise<void> {
  const t0 = performance.now();
  for (;;) {
    const r = await vm.exec(["systemctl", "is-active", "stratum-boot.service"]);
    if (!["activating", "deactivating", "reloading"].includes(r.stdout.trim())) return;
    if (performance.now() - t0 > 240_000) {
      throw new Error(`${label}: stratum-boot.service never ended`);
    }
    await new Promise((r) => setTimeout(r, 1000));
  }
}

/** Waits until etcd answers healthy, with no command but the boot's own. */
async function waitHealthy(vm: Vm, label: string): Promise<void> {
  const probe =
    "import urllib.request;urllib.request.urlopen('http://127.0.0.1:2379/health',timeout=2)";
  const t0 = performance.now();
  for (;;) {
    if ((await vm.exec(["python3", "-c", probe])).code === 0) return;
    if (performance.now() - t0 > 240_000) {
      const why = await vm.exec([
        "sh",
        "-c",
        "systemctl status 'stratum-*' --no-pager 2>&1 | tail -40",
      ]);
      throw new Error(`${label}: etcd never came back: ${why.stdout}`);
    }
    await new Promise((r) => setTimeout(r, 1000));
  }
}

/** The node is whole: one slot running in `mode`, node.json naming it, bundle and slot intact, keys kept. */
async function assertNode(vm: Vm, keys: string[], mode: Mode, label: string): Promise<void> {
  const node = JSON.parse(await vm.sh("cat /etc/stratum/node.json"));
  assertEquals(node.mode, mode, `${label}: node.json`);
  const active = await vm.exec([
    "sh",
    "-c",
    "for s in a b; do systemctl is-active stratum-$s.target; done",
  ]);
  assertEquals(
    active.stdout.trim().split("\n"),
    node.slot === "a" ? ["active", "inactive"] : ["inactive", "active"],
    `${label}: exactly the slot node.json names runs`,
  );
  const boot = await vm.exec(["systemctl", "is-active", "stratum-boot.service"]);
  assertEquals(boot.stdout.trim(), "active", `${label}: stratum-boot.service`);
  await assertOnDisk(vm, mode, label);
  const got = await getKeys(vm, "k");
  const missing = keys.filter((k) => !got.keys.includes(k));
  assertEquals(missing, [], `${label}: acknowledged keys lost`);
  assert(got.keys.length >= keys.length);
}
