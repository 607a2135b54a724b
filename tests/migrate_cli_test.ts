// deno-lint-ignore-file no-console
// `stratum migrate` end to end: the real CLI (the artifact under test, or
// `deno run main.ts`; tests/support/stratum_bin.ts) inside the
// systemd sandbox, driving real units, with crashes by SIGKILL.
//
// THE invariant, checked after every command that ends a migration: exactly
// one slot's stack runs and answers its health check, and either the journal
// says complete (the target runs, the source's units and slot are gone,
// node.json names the target) or rolled-back (the source runs, the target's
// units and slot are gone, node.json names the source) — or it says failed
// and the command exited 3.

import { assert, assertEquals } from "./support/assert.ts";
import { join } from "node:path";
import { nspawnUnavailable, repoRoot } from "./support/sandbox.ts";
import { bundle, Node } from "./support/sandbox_node.ts";
import { stratumArgv, stratumEnv } from "./support/stratum_bin.ts";

if (nspawnUnavailable) console.error(`migrate CLI tests are skipped: ${nspawnUnavailable}`);
const ignore = nspawnUnavailable !== undefined;

for (const [from, to] of [["host", "nspawn"], ["nspawn", "host"]] as const) {
  Deno.test({
    name: `migrate run ${from} → ${to} completes; status reports it; ack removes the journal`,
    ignore,
    async fn() {
      await using n = await Node.boot(from);
      const r = await n.stratum(["migrate", "run", "--to", to, "--bundle", n.bundle, "--json"]);
      assertEquals(r.code, 0, r.stderr);
      assertEquals([r.doc.outcome, r.doc.rollback, r.doc.failedStep], [
        "complete",
        "not-needed",
        null,
      ]);
      assertEquals(await n.assertInvariant("after run"), "complete");
      const st = await n.stratum(["migrate", "status", "--json"]);
      assertEquals([st.code, st.doc.outcome, st.doc.applied.mode, st.doc.journal.step], [
        0,
        "complete",
        to,
        "complete",
      ]);
      const resume = await n.stratum(["migrate", "resume", "--json"]);
      assertEquals([resume.code, resume.doc.outcome], [0, "nothing-to-do"]);
      const ack = await n.stratum(["migrate", "ack", "--json"]);
      assertEquals([ack.code, ack.doc.outcome], [0, "acknowledged"]);
      assertEquals((await n.state()).journal, null);
      // The journal is gone; the node's history still says what happened.
      const h = await n.stratum(["node", "history", "--json"]);
      assertEquals(h.code, 0, h.stderr);
      const last = h.doc.events.at(-1);
      assertEquals(
        [last.event, last.from.mode, last.from.slot, last.to.mode, last.outcome],
        ["migrate", from, "a", to, "complete"],
      );
      assertEquals(last.to.digest.length, 64, "the target's bundle named by its digest");
      const s = await n.state();
      assert(
        s.files["/etc/systemd/system/stratum-boot.service"],
        "the boot unit is installed",
      );
      assert(s.files["/etc/systemd/system/stratum-firewall-flush.service"]);
      assertEquals(
        Object.keys(s.files).filter((f) => f.startsWith("/etc/apt/preferences.d/stratum")),
        to === "host" ? [] : ["/etc/apt/preferences.d/stratum-nspawn.pref"],
        "host prepared for the target mode (host mode pins nothing)",
      );
    },
  });
}

// SIGKILL right after each journal write, then resume (twice: the second
// changes nothing), both directions: tests/node_state_test.ts, with etcd's
// keys checked too.

Deno.test({
  name: "SIGKILL at random instants of a run, then resume: one stack runs",
  ignore,
  async fn(t) {
    const seed = Number(Deno.env.get("STRATUM_TEST_SEED") ?? Date.now() % 100000);
    console.log(`random kill instants seeded with STRATUM_TEST_SEED=${seed}`);
    let x = seed;
    const rand = () => (x = (x * 1103515245 + 12345) % 2147483648) / 2147483648;
    for (let i = 0; i < 4; i++) {
      const delay = Math.round(300 + rand() * 2200);
      await t.step(`kill after ${delay} ms`, async () => {
        await using n = await Node.boot(i % 2 === 0 ? "host" : "nspawn");
        const child = n.sb.spawn(
          stratumArgv(["migrate", "run", "--to", n.to, "--bundle", n.bundle]),
          stratumEnv(),
        );
        await new Promise((r) => setTimeout(r, delay));
        // nsenter forks into the PID namespace: the stratum process is its child.
        const ps = new Deno.Command("ps", { args: ["-o", "pid=", "--ppid", String(child.pid)] })
          .outputSync();
        const pid = Number(new TextDecoder().decode(ps.stdout).trim());
        if (pid) Deno.kill(pid, "SIGKILL");
        await child.status;
        await child.stdout.cancel();
        await child.stderr.cancel();
        await n.stratum(["migrate", "resume"]);
        const s = await n.state();
        if (s.journal === null) {
          // Killed before the first journal write: nothing may have changed.
          assertEquals([s.active, s.health], [{ a: true, b: false }, `200 ok ${n.from} node-1`]);
          assertEquals(s.units.b, []);
        } else {
          await n.assertInvariant(`random kill after ${delay} ms`);
        }
      });
    }
  },
});

Deno.test({
  name: "a target that cannot start rolls back: exit 1, the failed step named, the source healthy",
  ignore,
  async fn() {
    await using n = await Node.boot("host", { nspawn: "fail-start" });
    const r = await n.stratum(["migrate", "run", "--to", "nspawn", "--bundle", n.bundle, "--json"]);
    assertEquals(r.code, 1, r.stderr);
    assertEquals([r.doc.outcome, r.doc.rollback, r.doc.failedStep.action], [
      "rolled-back",
      "done",
      "start-target",
    ]);
    assert(r.doc.message.includes("exit status 3"), r.doc.message);
    assertEquals(await n.assertInvariant("after a failed start"), "rolled-back");
    const h = await n.stratum(["node", "history", "--json"]);
    const last = h.doc.events.at(-1);
    assertEquals([last.event, last.outcome, last.failedStep], [
      "migrate",
      "rolled-back",
      "start-target",
    ]);
    assert(last.message.includes("exit status 3"), last.message);
  },
});

// The target's kernel settings (a sysctl its host file asks for, per
// network namespace: the sandbox's own) are applied before it starts and
// kept when it runs; a rollback puts the value from before back.
const portKey = "net.ipv4.ip_unprivileged_port_start";
const sysctl = { nspawn: `${portKey} = 900` };
for (const fails of [false, true]) {
  Deno.test({
    name: fails
      ? "a rollback puts back the kernel settings the target applied"
      : "a migration applies the target's kernel settings before it starts, and keeps them",
    ignore,
    async fn() {
      await using n = await Node.boot("host", fails ? { nspawn: "fail-start" } : undefined, {
        sysctl,
      });
      const before = (await n.sb.sh(`sysctl -n ${portKey}`)).trim();
      assert(before !== "900", `the sandbox starts with another value: ${before}`);
      const r = await n.stratum(["migrate", "run", "--to", "nspawn", "--bundle", n.bundle]);
      assertEquals(r.code, fails ? 1 : 0, r.stderr);
      assertEquals((await n.sb.sh(`sysctl -n ${portKey}`)).trim(), fails ? before : "900");
      // The values recorded for the rollback are gone once it is kept or undone.
      const record = await n.sb.exec(["test", "-e", "/var/lib/stratum/kernel-before.json"]);
      assertEquals(record.code, 1, "no record of values before is left");
    },
  });
}

Deno.test({
  name: "a health endpoint that never answers rolls back at --wait-ready",
  ignore,
  async fn() {
    await using n = await Node.boot("nspawn", { host: "unhealthy" });
    const r = await n.stratum([
      "migrate",
      "run",
      "--to",
      "host",
      "--bundle",
      n.bundle,
      "--wait-ready",
      "2s",
      "--json",
    ]);
    assertEquals(r.code, 1, r.stderr);
    assertEquals([r.doc.outcome, r.doc.failedStep.action], ["rolled-back", "wait-ready"]);
    assert(r.stderr.includes("wait-ready:"), "progress on stderr");
    assertEquals(await n.assertInvariant("after unhealthy"), "rolled-back");
  },
});

Deno.test({
  name: "no space for the slot is refused before anything changes (exit 2)",
  ignore,
  async fn() {
    await using n = await Node.boot("host");
    await n.sb.sh(
      "mkdir -p /var/lib/stratum/slots && mount -t tmpfs -o size=64k tmpfs /var/lib/stratum/slots && cp -a /proc/1/root/dev/null /dev/null 2>/dev/null; true",
    );
    const before = await n.state();
    const r = await n.stratum(["migrate", "run", "--to", "nspawn", "--bundle", n.bundle, "--json"]);
    assertEquals([r.code, r.doc.outcome, r.doc.failedStep.action], [2, "refused", "preflight"]);
    assert(r.doc.message.includes("Not enough space"), r.doc.message);
    // The slot a under the tmpfs is hidden, so compare what the refused run could have touched.
    assertEquals((await n.state()).files, before.files);
  },
});

Deno.test({
  name: "a rollback that cannot restart the source ends failed: exit 3, and status says what to do",
  ignore,
  async fn() {
    await using n = await Node.boot("host", { nspawn: "fail-start" });
    // Once stopped, the source refuses to start again.
    await n.sb.sh(`mkdir -p /etc/systemd/system/stratum-a-node.service.d
cat > /etc/systemd/system/stratum-a-node.service.d/once.conf <<'EOF'
[Service]
ExecStartPre=/bin/sh -c 'test ! -e /run/stopped-once'
ExecStopPost=/bin/touch /run/stopped-once
UNIT
systemctl daemon-reload`);
    const r = await n.stratum(["migrate", "run", "--to", "nspawn", "--bundle", n.bundle, "--json"]);
    assertEquals(r.code, 3, r.stderr);
    assertEquals([r.doc.outcome, r.doc.rollback], ["failed", "failed"]);
    assert(r.doc.message.includes("Rollback to the source failed"), r.doc.message);
    const st = await n.stratum(["migrate", "status", "--json"]);
    assertEquals(st.doc.outcome, "failed");
    assert(st.doc.nextAction.includes("needs attention"), st.doc.nextAction);
    const resume = await n.stratum(["migrate", "resume", "--json"]);
    assertEquals(
      [resume.code, resume.doc.outcome],
      [3, "failed"],
      "resume leaves a failed journal to a person",
    );
    const ack = await n.stratum(["migrate", "ack", "--json"]);
    assertEquals(ack.code, 0);
  },
});

Deno.test({
  name: "bad input exits 2 (3 for a corrupt journal) and leaves every unit and file unchanged",
  ignore,
  async fn(t) {
    await using n = await Node.boot("host");
    const tampered = await bundle();
    await Deno.writeTextFile(join(tampered, "nspawn/stack/stack.py"), "print('tampered')\n");
    const cases: [string, string[], number, () => Promise<void>][] = [
      ["unknown mode", ["--to", "docker", "--bundle", n.bundle], 2, async () => {}],
      ["same mode", ["--to", "host", "--bundle", n.bundle], 2, async () => {}],
      ["missing bundle", ["--to", "nspawn", "--bundle", "/nonexistent"], 2, async () => {}],
      [
        "bundle without the mode",
        ["--to", "nspawn", "--bundle", join(repoRoot, "docs")],
        2,
        async () => {},
      ],
      ["tampered bundle", ["--to", "nspawn", "--bundle", tampered], 2, async () => {}],
      [
        "unknown strategy",
        ["--to", "nspawn", "--strategy", "yolo", "--bundle", n.bundle],
        2,
        async () => {},
      ],
      [
        "bad --wait-ready",
        ["--to", "nspawn", "--wait-ready", "soon", "--bundle", n.bundle],
        2,
        async () => {},
      ],
      ["journal in progress", ["--to", "nspawn", "--bundle", n.bundle], 2, async () => {
        await n.sb.sh(`cat > /var/lib/stratum/migration.json <<'JOURNAL'
{"version":1,"strategy":"in-place","from":"host","to":"nspawn","sourceSlot":"a","targetSlot":"b","step":"stopping-source","startedAt":"2026-11-30T10:00:00Z","updatedAt":"2026-11-30T10:00:01Z"}
JOURNAL`);
      }],
      ["corrupt journal", ["--to", "nspawn", "--bundle", n.bundle], 3, async () => {
        await n.sb.sh(`printf '{"version":1,"strat' > /var/lib/stratum/migration.json`);
      }],
    ];
    for (const [name, args, code, setup] of cases) {
      await t.step(name, async () => {
        await setup();
        const before = await n.state();
        const r = await n.stratum(["migrate", "run", ...args, "--json"]);
        assertEquals(r.code, code, r.stderr);
        assert(r.doc?.outcome, `a JSON document names the outcome: ${r.stdout}`);
        assertEquals(
          r.stderr.trim().split("\n").filter((l) => l.startsWith("stratum:")).length,
          1,
          r.stderr,
        );
        assertEquals(await n.state(), before, "nothing changed");
        await n.sb.sh("rm -f /var/lib/stratum/migration.json");
      });
    }
  },
});

Deno.test({
  name: "a second run while one holds the lock exits 75 naming the holder, and changes nothing",
  ignore,
  async fn() {
    await using n = await Node.boot("host", { nspawn: "unhealthy" });
    const first = n.sb.spawn(
      stratumArgv(["migrate", "run", "--to", "nspawn", "--bundle", n.bundle, "--wait-ready", "8s"]),
      stratumEnv(),
    );
    // Wait until the first run has recorded its first step (it holds the lock by then).
    for (let i = 0; i < 100; i++) {
      if ((await n.sb.exec(["test", "-e", "/var/lib/stratum/migration.json"])).code === 0) break;
      await new Promise((r) => setTimeout(r, 100));
    }
    const r = await n.stratum(["migrate", "run", "--to", "nspawn", "--bundle", n.bundle, "--json"]);
    assertEquals(r.code, 75, r.stderr);
    assertEquals(r.doc.outcome, "busy");
    assert(r.doc.holder?.command?.includes("migrate run"), JSON.stringify(r.doc));
    assert(r.stderr.includes(`pid ${r.doc.holder.pid}`), r.stderr);
    const status = await first.status;
    await first.stdout.cancel();
    await first.stderr.cancel();
    assertEquals(status.code, 1, "the first run rolls back on its own");
    assertEquals(await n.assertInvariant("after the first run"), "rolled-back");
  },
});

Deno.test({
  name:
    "a first journal write that fails changes nothing: refused, exit 2, no journal, no rollback",
  ignore,
  async fn() {
    await using n = await Node.boot("host");
    const before = await n.state();
    const r = await n.stratum(
      ["migrate", "run", "--to", "nspawn", "--bundle", n.bundle, "--json"],
      {
        STRATUM_FAILPOINT: "fail-record:preparing",
      },
    );
    assertEquals([r.code, r.doc.outcome, r.doc.rollback], [2, "refused", "not-needed"], r.stderr);
    const after = await n.state();
    assertEquals(after.journal, null, "no journal is left");
    // Only what a refused run may leave: the boot unit and the verified bundle copy.
    const changed = Object.keys(after.files).filter((f) =>
      after.files[f] !== before.files[f] && !f.includes("/bundles/") &&
      !f.endsWith("stratum-boot.service")
    );
    assertEquals(changed, [], "no file of the node changed");
    assertEquals([after.active, after.health], [{ a: true, b: false }, "200 ok host node-1"]);
  },
});

Deno.test({
  name:
    "a rolled-back record that cannot be written is still reported as a finished rollback (exit 1)",
  ignore,
  async fn() {
    await using n = await Node.boot("host", { nspawn: "fail-start" });
    const r = await n.stratum(
      ["migrate", "run", "--to", "nspawn", "--bundle", n.bundle, "--json"],
      {
        STRATUM_FAILPOINT: "fail-record:rolled-back",
      },
    );
    assertEquals([r.code, r.doc.outcome, r.doc.rollback], [1, "rolled-back", "done"], r.stderr);
    assert(/could not record it/.test(r.doc.message), r.doc.message);
    const s = await n.state();
    assertEquals([s.active, s.health], [{ a: true, b: false }, "200 ok host node-1"]);
    // The next resume records what happened.
    const again = await n.stratum(["migrate", "resume", "--json"]);
    assertEquals([again.code, again.doc.journal.step], [1, "rolled-back"], again.stderr);
    assertEquals(await n.assertInvariant("after the resume"), "rolled-back");
  },
});

Deno.test({
  name:
    "a step that never ends still honours SIGTERM: the process exits 143, the lock is free, and resume rolls back",
  ignore,
  async fn() {
    await using n = await Node.boot("host");
    const child = n.sb.spawn(
      stratumArgv(["migrate", "run", "--to", n.to, "--bundle", n.bundle]),
      { ...stratumEnv(), STRATUM_FAILPOINT: "hang-after-record:starting-target" },
    );
    // Wait (bounded) until the run is stuck right after the journal says starting-target.
    let step: string | undefined;
    for (let i = 0; i < 600 && step !== "starting-target"; i++) {
      step = (await n.state()).journal?.step;
      if (step !== "starting-target") await new Promise((r) => setTimeout(r, 100));
    }
    assertEquals(step, "starting-target");
    const ps = new Deno.Command("ps", { args: ["-o", "pid=", "--ppid", String(child.pid)] })
      .outputSync();
    const pid = Number(new TextDecoder().decode(ps.stdout).trim());
    assert(pid > 0, "the stratum process");
    // A first SIGTERM stops the forward path, which is stuck; a second one
    // ends the process. Signals sent together may arrive as one: repeat
    // (bounded) until the process is gone.
    const status = child.status;
    let done = false;
    status.then(() => (done = true));
    for (let i = 0; i < 100 && !done; i++) {
      try {
        Deno.kill(pid, "SIGTERM");
      } catch { /* already gone */ }
      await new Promise((r) => setTimeout(r, 100));
    }
    const st = await status;
    const stderr = new TextDecoder().decode(await new Response(child.stderr).arrayBuffer());
    await child.stdout.cancel();
    assertEquals(st.code, 143, stderr);
    assert(stderr.includes("stopped by SIGTERM"), stderr);
    // The lock is free (resume takes it) and the journal said where it stopped.
    const r = await n.stratum(["migrate", "resume", "--json"]);
    assertEquals(r.doc.outcome, "rolled-back", r.stderr);
    assertEquals(await n.assertInvariant("after the SIGTERM backstop"), "rolled-back");
  },
});
