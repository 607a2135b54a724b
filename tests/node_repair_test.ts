// deno-lint-ignore-file no-console
// `stratum node repair` on real systemd (the sandbox), through the shipped
// artifact: a release whose installed files no longer match what was signed
// (one byte changed, as bit rot or a hand edit does) is rebuilt from the
// operator's copy of the same release through the other slot, with the
// upgrade's journal, rollback, resume and boot path (docs/migration.md,
// "Repairing a damaged release"), and `node boot` never retries starting a
// damaged release.
//
// Invariant after every repair, resume or boot: either the repaired release
// runs (exactly one slot, node.json names it, every file verifies, no other
// slot or staged copy left, the kept release unchanged), or the journal
// says failed, no stack runs and `migrate ack` then the same `node repair`
// brings the repaired release up. A damaged release is never started.

import { createHash } from "node:crypto";
import { join } from "node:path";
import { assert, assertEquals } from "./support/assert.ts";
import { makeBundle } from "./support/bundle.ts";
import { nspawnUnavailable } from "./support/sandbox.ts";
import { type Mode, Node } from "./support/sandbox_node.ts";
import { journalSteps, readStepTable } from "./support/step_table.ts";
import { scratchDir } from "./support/scratch.ts";

if (nspawnUnavailable) console.error(`repair tests are skipped: ${nspawnUnavailable}`);
const ignore = nspawnUnavailable !== undefined;
const steps = journalSteps(await readStepTable());
const finishes = (step: string) => steps.indexOf(step as never) >= steps.indexOf("awaiting-ready");

/** The manifest digest that names a bundle's mode directory, as node status reports it. */
async function digest(bundleDir: string, mode: Mode): Promise<string> {
  const data = await Deno.readFile(join(bundleDir, mode, "SHA256SUMS"));
  return createHash("sha256").update(data).digest("hex");
}

/**
 * The defect's damage: one byte of a file of the installed release changed
 * in place (same size, so only a hash finds it). The running slot holds the
 * same inode (a slot is hard-linked from the copy that was installed), so
 * the release that would start at the next boot is damaged too. The byte
 * becomes a space (BUNDLE.json stays JSON; stack.py's last newline).
 */
async function damage(n: Node, mode: Mode, file = "stack/stack.py"): Promise<void> {
  await n.sb.sh(
    `python3 -c "
p='/var/lib/stratum/bundles/${mode}/${file}'
b=bytearray(open(p,'rb').read()); assert b[-1]!=32; b[-1]=32
f=open(p,'r+b'); f.write(b); f.close()"`,
  );
}

/** The repaired release runs, verified whole, nothing else left; returns node status's document. */
async function assertRepaired(n: Node, mode: Mode, label: string) {
  const want = await digest(n.bundle, mode);
  const s = await n.state();
  const slot = s.node.slot;
  assertEquals(s.node.mode, mode, `${label}: node.json`);
  assertEquals(s.active, { a: slot === "a", b: slot === "b" }, `${label}: exactly one slot runs`);
  assertEquals(s.health, `200 ok ${mode} node-1`, label);
  const st = await n.stratum(["node", "status", "--verify", "--json"]);
  assertEquals(st.code, 0, `${label}: ${st.stderr}`);
  assertEquals(st.doc.bundle.verified, true, `${label}: every file of the release verifies`);
  assertEquals(st.doc.running.digest, want, `${label}: the same release runs`);
  assertEquals(st.doc.bundle.digest, want, `${label}: the installed bundle is what runs`);
  if (["complete", undefined].includes(s.journal?.step)) {
    assertEquals(st.doc.previous, null, `${label}: the other slot is gone`);
    const staged = await n.sb.exec(["test", "-e", `/var/lib/stratum/bundles/.${mode}.next`]);
    assertEquals(staged.code, 1, `${label}: no staged bundle is left`);
  }
  return st.doc;
}

/** stratum-boot.service's state, and its restarts so far. */
async function bootUnit(n: Node): Promise<string> {
  return (await n.sb.sh(
    "systemctl show -P ActiveState stratum-boot.service; systemctl show -P NRestarts stratum-boot.service; systemctl show -P ExecMainStatus stratum-boot.service",
  )).trim().split("\n").join(" ");
}

/**
 * stratum-boot.service's state once it has settled: not activating (a unit
 * that will retry sits in activating/auto-restart between runs, so a retry
 * shows as NRestarts > 0 or as never settling within the minute).
 */
async function settledBootUnit(n: Node): Promise<string> {
  const deadline = Date.now() + 60_000;
  for (;;) {
    const s = await bootUnit(n);
    if (!s.startsWith("activating") && !s.startsWith("deactivating")) return s;
    if (Date.now() > deadline) return `never settled: ${s}`;
    await new Promise((r) => setTimeout(r, 200));
  }
}

// The defect as reported: a byte changes in the installed bundle; node
// status says NOT verified; upgrade (and install) of the same bundle have
// nothing to do; node boot said nothing-to-start (exit 1) and its unit
// retried what could not succeed. Here: status and boot name node repair,
// the boot unit stops at exit 3, and one repair (one restart of the stack)
// brings the node back, with no release kept.
Deno.test({
  name:
    "a damaged release (host mode, no release kept): status and boot name node repair, the boot unit does not retry, one repair fixes it",
  ignore,
  async fn() {
    await using n = await Node.boot("host", undefined, { persistent: true });
    await damage(n, "host");
    const st = await n.stratum(["node", "status", "--verify", "--json"]);
    assertEquals([st.code, st.doc?.outcome], [3, "needs-attention"], st.stderr);
    assert(
      st.doc.nextAction.includes("stratum node repair --bundle DIR"),
      `status names repair: ${st.doc.nextAction}`,
    );
    assertEquals(st.doc.kept, null, "no release is kept");
    // The same bundle is still "already installed" to an upgrade: repair is the way.
    const up = await n.stratum(["node", "upgrade", "--bundle", n.bundle, "--json"]);
    assertEquals([up.code, up.doc?.outcome], [0, "already-installed"], up.stderr);

    await n.powerCut();
    await n.boot(0);
    assertEquals(
      await settledBootUnit(n),
      "failed 0 3",
      "stratum-boot.service: exit 3, no restart",
    );
    const s = await n.state();
    assertEquals(s.active, { a: false, b: false }, "nothing runs");
    const boot = await n.stratum(["node", "boot", "--json"]);
    assertEquals([boot.code, boot.doc?.outcome], [3, "damaged"], boot.stderr);
    assert(boot.doc.nextAction.includes("stratum node repair --bundle DIR"), boot.doc.nextAction);
    assertEquals(boot.stderr.trim().split("\n").length, 1, `one line: ${boot.stderr}`);

    const r = await n.stratum(["node", "repair", "--bundle", n.bundle, "--json"]);
    assertEquals([r.code, r.doc?.outcome], [0, "complete"], r.stderr);
    assertEquals([r.doc.journal.sourceSlot, r.doc.journal.targetSlot], ["a", "b"]);
    const after = await assertRepaired(n, "host", "after the repair");
    assertEquals(after.kept, null, "the damaged copy is not kept as a release to go back to");
    const h = await n.stratum(["node", "history", "--json"]);
    const last = h.doc.events.at(-1);
    assertEquals([last.event, last.asked, last.outcome], ["repair", "node repair", "complete"]);
    assertEquals((await n.stratum(["migrate", "ack"])).code, 0);

    // Idempotent: the release is whole, a second repair changes nothing.
    const before = await n.state();
    const again = await n.stratum(["node", "repair", "--bundle", n.bundle, "--json"]);
    assertEquals([again.code, again.doc?.outcome], [0, "nothing-to-repair"], again.stderr);
    assertEquals(await n.state(), before, "a repair of a whole release changed nothing");

    // And it boots.
    await n.powerCut();
    const t2 = await n.boot();
    assert(t2.healthyMs !== undefined, "the repaired release did not come up at boot");
    await assertRepaired(n, "host", "after a boot");
    assertEquals((await bootUnit(n)).split(" ").slice(0, 2), ["active", "0"]);
  },
});

Deno.test({
  name:
    "repair in nspawn mode after an upgrade: the release kept for rollback stays kept, and rollback works",
  ignore,
  async fn() {
    await using n = await Node.boot("nspawn");
    const v1 = await digest(n.bundle, "nspawn");
    // n.bundle becomes release 2's: the node runs it, and release 1 is kept.
    const v2dir = await makeBundle(await scratchDir("bundle-v2-"), { release: "2" });
    const up = await n.stratum(["node", "upgrade", "--bundle", v2dir, "--json"]);
    assertEquals([up.code, up.doc?.outcome], [0, "complete"], up.stderr);
    assertEquals((await n.stratum(["migrate", "ack"])).code, 0);
    // A file of release 2 alone: stack.py is the same bytes in both releases,
    // so the kept copy holds the very inode (linked, not written again:
    // lib/bundle/_held.ts) and a byte changed there damages both.
    await damage(n, "nspawn", "BUNDLE.json");
    const r = await n.stratum(["node", "repair", "--bundle", v2dir, "--json"]);
    assertEquals([r.code, r.doc?.outcome], [0, "complete"], r.stderr);
    const st = await n.stratum(["node", "status", "--verify", "--json"]);
    assertEquals(st.code, 0, st.stderr);
    assertEquals(st.doc.running.digest, await digest(v2dir, "nspawn"), "release 2 runs");
    assertEquals(st.doc.kept, { digest: v1, version: "1", trusted: true }, "release 1 stays kept");
    assertEquals((await n.stratum(["migrate", "ack"])).code, 0);
    const back = await n.stratum(["node", "rollback", "--json"]);
    assertEquals([back.code, back.doc?.outcome], [0, "complete"], back.stderr);
    assertEquals(
      (await n.stratum(["node", "status", "--verify", "--json"])).doc.running.digest,
      v1,
      "rollback went to release 1",
    );
    await Deno.remove(v2dir, { recursive: true });
  },
});

// A refusal changes nothing (files, units, journal, history): a bundle of
// another release (that is an upgrade: the message names it), a bundle
// that does not verify, no such directory. Each is exit 2 and one line.
Deno.test({
  name:
    "node repair refuses another release or a bundle that does not verify: exit 2, nothing changed",
  ignore,
  async fn(t) {
    await using n = await Node.boot("host");
    await damage(n, "host");
    const v2 = await makeBundle(await scratchDir("bundle-v2-"), { release: "2" });
    const tampered = await scratchDir("bundle-tampered-");
    await n.sb.sh(`cp -a ${n.bundle}/. ${tampered}/`);
    await Deno.writeTextFile(join(tampered, "host/stack/stack.py"), "print('tampered')\n");
    const before = await n.state();
    for (
      const [what, args, says] of [
        ["another release", ["--bundle", v2], "stratum node upgrade --bundle"],
        ["a tampered copy of the release", ["--bundle", tampered], "does not match"],
        ["no such directory", ["--bundle", "/nonexistent"], "not a directory"],
      ] as const
    ) {
      await t.step(what, async () => {
        const r = await n.stratum(["node", "repair", ...args, "--json"]);
        assertEquals(r.code, 2, `${what}: ${r.stderr}`);
        assertEquals(r.stderr.trim().split("\n").length, 1, `one line: ${r.stderr}`);
        assert(r.stderr.includes(says), `${what}: ${r.stderr}`);
        assertEquals(await n.state(), before, `${what}: nothing changed`);
      });
    }
    await Deno.remove(v2, { recursive: true });
    await Deno.remove(tampered, { recursive: true });
  },
});

// Crash safety: SIGKILL of the repair after each journal write, then
// `migrate resume`; and a power cut after each, then a boot. Past
// awaiting-ready the repaired release runs. Before it, the rollback cannot
// start the source (its release is damaged, and a damaged release is never
// started): the journal says failed, nothing runs, the boot unit does not
// retry, and the next action names the repair, which then brings the
// repaired release up.
for (const cut of ["kill", "power"] as const) {
  Deno.test({
    name: `${cut === "kill" ? "SIGKILL" : "a power cut"} after each journal write of a repair ` +
      `(host mode), then ${cut === "kill" ? "resume" : "a boot"}: the repaired release runs or ` +
      "the node says failed and the repair brings it up",
    ignore,
    async fn(t) {
      for (const step of steps) {
        await t.step(step, async () => {
          await using n = await Node.boot("host", undefined, { persistent: cut === "power" });
          await damage(n, "host");
          const r = await n.stratum(["node", "repair", "--bundle", n.bundle], {
            STRATUM_FAILPOINT: `kill-after-record:${step}`,
          });
          assertEquals(r.code, 137, `killed after ${step}: ${r.stderr}`);
          let next: string;
          if (cut === "kill") {
            const resumed = await n.stratum(["migrate", "resume", "--json"]);
            next = resumed.doc?.nextAction ?? "";
            assertEquals(resumed.code, finishes(step) ? 0 : 3, resumed.stderr);
          } else {
            await n.powerCut();
            const time = await n.boot(finishes(step) ? 60_000 : 0);
            if (finishes(step)) assert(time.healthyMs !== undefined, `boot after ${step}`);
            else {
              assertEquals(
                await settledBootUnit(n),
                "failed 0 3",
                "the boot unit does not retry",
              );
            }
            next = "";
            if (!finishes(step)) {
              const h = await n.stratum(["node", "history", "--json"]);
              const boot = h.doc.events.at(-1);
              assertEquals([boot.event, boot.outcome], ["boot", "failed"], JSON.stringify(boot));
            }
          }
          if (finishes(step)) {
            await assertRepaired(n, "host", `${cut} at ${step}`);
            return;
          }
          const s = await n.state();
          assertEquals(s.journal?.step, "failed", `${cut} at ${step}`);
          // A power cut stopped everything and nothing damaged was started
          // again; after a kill, the damaged stack the repair had not stopped
          // yet may still run (stratum did not start it), never the target.
          if (cut === "power") {
            assertEquals(s.active, { a: false, b: false }, `${cut} at ${step}: nothing runs`);
          } else assertEquals(s.active.b, false, `${cut} at ${step}: the target is gone`);
          if (cut === "kill") assert(next.includes("stratum node repair --bundle DIR"), next);
          assertEquals((await n.stratum(["migrate", "ack"])).code, 0);
          const again = await n.stratum(["node", "repair", "--bundle", n.bundle, "--json"]);
          assertEquals([again.code, again.doc?.outcome], [0, "complete"], again.stderr);
          await assertRepaired(n, "host", `the repair after ${cut} at ${step}`);
        });
      }
    },
  });
}
