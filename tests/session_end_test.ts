// An operator's session that ends mid-change: a dropped SSH session (the
// terminal hangs up: SIGHUP), SIGQUIT (Ctrl-\), SIGPIPE, and output whose
// reader is gone, during `migrate run`, `node upgrade` and `node rollback`,
// through the artifact in the systemd sandbox, with a target that never gets
// healthy so the run is waiting (journal `awaiting-ready`) when the session
// ends. A change run without --detach does not outlive its session; one run
// with --detach runs in its own unit, which a session's end never reaches
// (tests/detach_test.ts).
//
// Invariant: each ends as SIGTERM does — the run rolls back on its own, the
// journal says `rolled-back`, exactly one stack runs (the source), and the
// command exits 1 (rolled back, the node safe; docs/cli.md) — never killed
// mid-migration with the journal left open and the unhealthy target running.

import { assert, assertEquals } from "./support/assert.ts";
import { makeBundle } from "./support/bundle.ts";
import { nspawnUnavailable, repoRoot } from "./support/sandbox.ts";
import { Node } from "./support/sandbox_node.ts";
import { scratchDir } from "./support/scratch.ts";
import { stratumArgv, stratumEnv } from "./support/stratum_bin.ts";

// deno-lint-ignore no-console
if (nspawnUnavailable) console.error(`session-end tests are skipped: ${nspawnUnavailable}`);
const ignore = nspawnUnavailable !== undefined;

/** Runs `stratum ARGS` in the sandbox, ends its session HOW once the journal says awaiting-ready. */
async function endSession(
  n: Node,
  how: string,
  args: string[],
  extraEnv: Record<string, string> = {},
) {
  const env = Object.entries({ NO_COLOR: "1", ...stratumEnv(), ...extraEnv }).map(([k, v]) =>
    `${k}=${v}`
  );
  const r = await n.sb.exec([
    "python3",
    "tests/support/sandbox/session_end.py",
    how,
    "awaiting-ready",
    "--",
    "env",
    ...env,
    ...stratumArgv(args),
  ], { cwd: repoRoot });
  assertEquals(r.code, 0, r.stderr);
  return JSON.parse(r.stdout) as { exit: number | null; reached: boolean; before: string };
}

Deno.test({
  name:
    "migrate run: a hung-up terminal, a dropped SSH login, a killed login shell, SIGQUIT, SIGPIPE and closed output each roll back as SIGTERM does (exit 1, one stack runs)",
  ignore,
  async fn(t) {
    await using n = await Node.boot("host", { nspawn: "unhealthy" });
    // SIGTERM first: the behaviour the others must match.
    const cases: [string, string][] = [
      ["signal:SIGTERM", "60s"],
      ["pty-close", "60s"],
      // Two SIGHUPs (the shell's and the kernel's): not "a second signal, exit at once".
      ["ssh-drop", "60s"],
      ["leader-kill", "60s"],
      ["signal:SIGQUIT", "60s"],
      ["signal:SIGPIPE", "60s"],
      // Nothing stops it: it times out and rolls back, writing to pipes nobody reads.
      ["pipes-close", "3s"],
    ];
    for (const [how, wait] of cases) {
      await t.step(how, async () => {
        const t0 = performance.now();
        const r = await endSession(n, how, [
          "migrate",
          "run",
          "--to",
          "nspawn",
          "--bundle",
          n.bundle,
          "--wait-ready",
          wait,
        ]);
        assert(r.reached, `the run reached awaiting-ready: ${r.before}`);
        assertEquals(r.exit, 1, `${how}: exit as a rollback: ${JSON.stringify(r)}`);
        assertEquals(await n.assertInvariant(how), "rolled-back");
        const s = await n.state();
        assertEquals(s.node.mode, "host", "the source is what runs");
        if (how.startsWith("signal:")) {
          assert(
            s.journal.message.includes(how.slice(7)),
            `the journal names it: ${s.journal.message}`,
          );
        } else if (how !== "pipes-close") {
          assert(
            s.journal.message.includes("SIGHUP"),
            `the journal names it: ${s.journal.message}`,
          );
        }
        if (wait === "60s") {
          assert(performance.now() - t0 < 50_000, `${how}: stopped by the signal, not the timeout`);
        }
        const ack = await n.stratum(["migrate", "ack", "--json"]);
        assertEquals(ack.code, 0, ack.stderr);
      });
    }
  },
});

Deno.test({
  name: "node upgrade: a hung-up terminal rolls the upgrade back (exit 1, the old release runs)",
  ignore,
  async fn() {
    await using n = await Node.boot("host");
    const v2 = await makeBundle(await scratchDir("bundle-v2-"), {
      release: "2",
      behavior: { host: "unhealthy" },
    });
    const r = await endSession(n, "pty-close", [
      "node",
      "upgrade",
      "--bundle",
      v2,
      "--wait-ready",
      "60s",
    ]);
    assert(r.reached, r.before);
    assertEquals(r.exit, 1, JSON.stringify(r));
    const s = await n.state();
    assertEquals(s.journal?.step, "rolled-back");
    assertEquals(s.active, { a: true, b: false }, "exactly one slot runs: the old release's");
    assertEquals(s.health, "200 ok host node-1");
  },
});

Deno.test({
  name:
    "a stuck run whose stderr is gone still ends at a second SIGTERM with exit 143, and resume finishes it",
  ignore,
  async fn() {
    // Invariant: the backstop's one line cannot be written (EPIPE), and the
    // process still exits 143 at once, never an uncaught error's exit 1.
    await using n = await Node.boot("host");
    const r = await endSession(
      n,
      "pipes-close+repeat:SIGTERM",
      ["migrate", "run", "--to", "nspawn", "--bundle", n.bundle],
      { STRATUM_FAILPOINT: "hang-after-record:awaiting-ready" },
    );
    assert(r.reached, r.before);
    assertEquals(r.exit, 143, JSON.stringify(r));
    // The journal said awaiting-ready and the target is healthy: resume finishes (docs/migration.md).
    const resume = await n.stratum(["migrate", "resume", "--json"]);
    assertEquals(resume.doc?.outcome, "complete", resume.stderr);
    assertEquals(await n.assertInvariant("after the backstop"), "complete");
  },
});

Deno.test({
  name:
    "node rollback: a hung-up terminal rolls the rollback back (exit 1, the release it left runs)",
  ignore,
  async fn() {
    // Release 1 answers its command probe only while /run/stratum-test-sick
    // is absent; release 2 has no such probe. Upgraded to 2, then made sick,
    // the rollback to 1 waits at awaiting-ready when the terminal hangs up.
    const probe = ["/bin/sh", "-c", "test ! -e /run/stratum-test-sick"];
    const v1 = await makeBundle(await scratchDir("bundle-v1-"), { healthExec: probe });
    await using n = await Node.boot("host", undefined, { bundleDir: v1 });
    const v2 = await makeBundle(await scratchDir("bundle-v2-"), { release: "2" });
    const up = await n.stratum(["node", "upgrade", "--bundle", v2]);
    assertEquals(up.code, 0, up.stderr);
    assertEquals((await n.stratum(["migrate", "ack"])).code, 0);
    await n.sb.sh("touch /run/stratum-test-sick");
    const r = await endSession(n, "pty-close", ["node", "rollback", "--wait-ready", "60s"]);
    assert(r.reached, r.before);
    assertEquals(r.exit, 1, JSON.stringify(r));
    const s = await n.state();
    assertEquals(s.journal?.step, "rolled-back");
    assert(s.journal.message.includes("SIGHUP"), s.journal.message);
    assertEquals(s.active, { a: false, b: true }, "exactly one slot runs: release 2's");
    assertEquals(
      (await n.sb.sh(
        "python3 -c \"import urllib.request;print(urllib.request.urlopen('http://127.0.0.1:18080/release').read().decode().strip())\"",
      )).trim(),
      "2",
    );
  },
});
