// deno-lint-ignore-file no-console
// `--detach` on `migrate run`, `node upgrade` and `node rollback`, through
// the artifact on real systemd (the sandbox), as docs/cli.md ("Running a
// change detached") says:
//
// - bad input and whatever the command's plan would refuse are refused in
//   the foreground (2, or 75 while another change holds the lock), and no
//   `stratum-change-*` unit is started;
// - otherwise the command returns 0 at once with the unit's name and the
//   commands that follow it; the change runs in that unit, whatever becomes
//   of the terminal that started it;
// - while it runs, `migrate status` and `node status` name the unit (and
//   exit as they do for a change run in a terminal); once it has ended,
//   they show its outcome as for a change run in a terminal.

import { assert, assertEquals } from "./support/assert.ts";
import { makeBundle } from "./support/bundle.ts";
import { nspawnUnavailable, repoRoot } from "./support/sandbox.ts";
import { Node } from "./support/sandbox_node.ts";
import { scratchDir } from "./support/scratch.ts";
import { stratumArgv, stratumEnv } from "./support/stratum_bin.ts";

if (nspawnUnavailable) console.error(`detach tests are skipped: ${nspawnUnavailable}`);
const ignore = nspawnUnavailable !== undefined;

/** The `stratum-change-*` units systemd has loaded, running or not. */
async function changeUnits(n: Node): Promise<string[]> {
  const r = await n.sb.exec([
    "systemctl",
    "list-units",
    "--all",
    "--no-legend",
    "--plain",
    "stratum-change-*",
  ]); // deno-fmt-ignore
  return r.stdout.split("\n").map((l) => l.trim().split(/\s+/)[0]!).filter((u) => u);
}

/** Waits (bounded) until `unit` no longer runs. */
async function ended(n: Node, unit: string): Promise<void> {
  const t0 = performance.now();
  for (;;) {
    const s = (await n.sb.exec(["systemctl", "is-active", unit])).stdout.trim();
    if (s !== "active" && s !== "activating" && s !== "deactivating") return;
    if (performance.now() - t0 > 120_000) throw new Error(`${unit} never ended`);
    await new Promise((r) => setTimeout(r, 250));
  }
}

/** A refused --detach: exit `code`, one line on stderr, no unit started. */
async function refusedInForeground(n: Node, args: string[], code: number, label: string) {
  const r = await n.stratum(args);
  assertEquals(r.code, code, `${label}: ${r.stdout}${r.stderr}`);
  assertEquals(r.stderr.trim().split("\n").length, 1, `${label}: one line: ${r.stderr}`);
  assertEquals(await changeUnits(n), [], `${label}: no unit started`);
  return r;
}

Deno.test({
  name:
    "migrate run --detach: refused in the foreground as the run would be; detached, it outlives its terminal and status names its unit",
  ignore,
  async fn() {
    await using n = await Node.boot("host");
    const run = ["migrate", "run", "--bundle", n.bundle, "--detach"];
    // Bad input: the flags, before anything is looked at.
    await refusedInForeground(
      n,
      [...run, "--to", "nspawn", "--wait-ready", "soon"],
      2,
      "bad duration",
    ); // deno-fmt-ignore
    await refusedInForeground(n, [...run, "--to", "nspawn", "--strategy", "reprovision"], 2, "reprovision"); // deno-fmt-ignore
    // What the plan refuses: the mode the node runs already.
    const same = await refusedInForeground(n, [...run, "--to", "host", "--json"], 2, "same mode");
    assertEquals(same.doc?.outcome, "refused", same.stdout);
    assert(same.doc.message.includes("already runs in host mode"), same.doc.message);
    assertEquals((await n.state()).journal, null, "nothing was changed");

    // Detached from an operator's terminal (a pty it leads), with the run
    // made to hang once it is waiting for the target (a test aid passed on
    // to the unit): the command returns on its own, exit 0, before the
    // terminal is hung up; the change goes on in its unit.
    const env = Object.entries({
      NO_COLOR: "1",
      STRATUM_FAILPOINT: "hang-after-record:awaiting-ready",
      ...stratumEnv(),
    }).map(([k, v]) => `${k}=${v}`);
    const t = await n.sb.exec([
      "python3",
      "tests/support/sandbox/session_end.py",
      "pty-close",
      "awaiting-ready",
      "--",
      "env",
      ...env,
      ...stratumArgv([...run, "--to", "nspawn"]),
    ], { cwd: repoRoot });
    assertEquals(t.code, 0, t.stderr);
    const session = JSON.parse(t.stdout) as { exit: number; reached: boolean; before: string };
    assertEquals([session.exit, session.reached], [0, true], session.before);
    const unit = /detached as (stratum-change-\S+\.service)/.exec(session.before)?.[1];
    assert(/^stratum-change-migrate-to-nspawn-\d{8}T\d{6}Z\.service$/.test(unit ?? ""), unit ?? "");
    assert(session.before.includes(`follow: journalctl -u ${unit} -f`), session.before);
    assert(session.before.includes("follow: stratum migrate status"), session.before);
    await new Promise((r) => setTimeout(r, 1000));
    assertEquals(
      (await n.sb.exec(["systemctl", "is-active", unit!])).stdout.trim(),
      "active",
      "the hang-up did not reach the unit",
    ); // deno-fmt-ignore
    assertEquals((await n.state()).journal?.step, "awaiting-ready");

    // Status names the unit; it exits as for a change run in a terminal (0).
    const st = await n.stratum(["migrate", "status", "--json"]);
    assertEquals([st.code, st.doc?.outcome], [0, "in-progress"], st.stdout + st.stderr);
    assertEquals([st.doc.holder?.unit, st.doc.holder?.detached], [unit, true], st.stdout);
    assert(st.doc.holder.command.includes("migrate run --to nspawn"), st.stdout);
    assert(st.doc.nextAction.startsWith("wait"), st.doc.nextAction);
    assert(st.doc.nextAction.includes(`journalctl -u ${unit} -f`), st.doc.nextAction);
    const human = await n.stratum(["migrate", "status"]);
    assert(
      human.stdout.includes(`running detached as ${unit} (pid ${st.doc.holder.pid}`),
      human.stdout,
    ); // deno-fmt-ignore
    const ns = await n.stratum(["node", "status", "--json"]);
    assertEquals(ns.doc?.holder?.unit, unit, ns.stdout);
    assert(ns.doc.nextAction.includes(`journalctl -u ${unit} -f`), ns.doc.nextAction);
    // The failpoint reached the unit because the caller had it (a test aid).
    const unitEnv = await n.sb.exec(["systemctl", "show", "-P", "Environment", unit!]);
    assert(
      unitEnv.stdout.includes("STRATUM_FAILPOINT=hang-after-record:awaiting-ready"),
      unitEnv.stdout,
    ); // deno-fmt-ignore

    // A second change while it runs: busy (75), in the foreground, no second unit.
    const busy = await n.stratum([...run, "--to", "nspawn", "--json"]);
    assertEquals([busy.code, busy.doc?.outcome], [75, "busy"], busy.stdout + busy.stderr);
    assertEquals(await changeUnits(n), [unit], "still the one unit");

    // The hung change is killed (a crash); resume finishes it, and status
    // says so as for a change run in a terminal.
    await n.sb.exec(["systemctl", "kill", "--signal=SIGKILL", unit!]);
    await ended(n, unit!);
    const after = await n.stratum(["migrate", "status", "--json"]);
    assertEquals([after.doc?.holder, after.doc?.outcome], [null, "in-progress"], after.stdout);
    const resumed = await n.stratum(["migrate", "resume", "--json"]);
    assertEquals([resumed.code, resumed.doc?.outcome], [0, "complete"], resumed.stderr);
    assertEquals(await n.assertInvariant("after resume"), "complete");
  },
});

Deno.test({
  name:
    "node upgrade --detach to release 2 ends on its own: status shows it complete, release 2 runs; a downgrade is refused in the foreground; rollback --detach goes back",
  ignore,
  async fn() {
    await using n = await Node.boot("host");
    // Nothing kept yet: the rollback's plan refuses.
    const none = await refusedInForeground(n, ["node", "rollback", "--detach"], 2, "nothing kept");
    assert(none.stderr.includes("No earlier release is kept"), none.stderr);
    const v2 = await makeBundle(await scratchDir("bundle-v2-"), { release: "2" });
    const r = await n.stratum(["node", "upgrade", "--bundle", v2, "--detach", "--json"]);
    assertEquals([r.code, r.doc?.outcome, r.doc?.exitCode], [0, "detached", 0], r.stderr);
    assert(/^stratum-change-upgrade-\d{8}T\d{6}Z\.service$/.test(r.doc.unit), r.doc.unit);
    assertEquals(r.doc.follow, [`journalctl -u ${r.doc.unit} -f`, "stratum migrate status"]);
    assert(!r.doc.runs.includes("--detach") && !r.doc.runs.includes("--json"), r.doc.runs);
    // No failpoint was set: none reaches the unit.
    const unitEnv = await n.sb.exec(["systemctl", "show", "-P", "Environment", r.doc.unit]);
    assert(!unitEnv.stdout.includes("STRATUM_FAILPOINT"), unitEnv.stdout);
    await ended(n, r.doc.unit);
    assertEquals(await changeUnits(n), [], "the unit is collected once it ended");
    // What it wrote is the unit's journal, for the operator who follows it.
    const said = await n.sb.exec(["journalctl", "-u", r.doc.unit, "--no-pager", "-o", "cat"]);
    assert(said.stdout.includes("upgrade") && said.stdout.includes("complete"), said.stdout);
    const st = await n.stratum(["migrate", "status", "--json"]);
    assertEquals([st.code, st.doc?.outcome, st.doc?.holder], [0, "complete", null], st.stdout);
    const s = await n.state();
    assertEquals([s.node.mode, s.node.slot, s.health], ["host", "b", "200 ok host node-1"]);
    const release = await n.sb.sh(
      "python3 -c \"import urllib.request;print(urllib.request.urlopen('http://127.0.0.1:18080/release').read().decode().strip())\"",
    );
    assertEquals(release.trim(), "2", "release 2 runs");
    const h = await n.stratum(["node", "history", "--json"]);
    const last = h.doc.events.at(-1);
    assertEquals([last?.event, last?.outcome], ["upgrade", "complete"], h.stdout);
    assertEquals((await n.stratum(["migrate", "ack"])).code, 0);

    // Back to release 1 is a downgrade: the plan refuses it, in the foreground.
    const down = await refusedInForeground(
      n,
      ["node", "upgrade", "--bundle", n.bundle, "--detach"],
      2,
      "downgrade",
    ); // deno-fmt-ignore
    assert(down.stderr.includes("older than the 2 this node runs"), down.stderr);
    // The rollback, detached, goes back to release 1.
    const back = await n.stratum(["node", "rollback", "--detach", "--json"]);
    assertEquals([back.code, back.doc?.outcome], [0, "detached"], back.stderr);
    assert(/^stratum-change-rollback-\d{8}T\d{6}Z\.service$/.test(back.doc.unit), back.doc.unit);
    await ended(n, back.doc.unit);
    const after = await n.stratum(["migrate", "status", "--json"]);
    assertEquals([after.doc?.outcome, after.doc?.journal?.to], ["complete", "host"], after.stdout);
    assertEquals((await n.state()).node.slot, "a", "release 1 runs again, in slot a");
  },
});
