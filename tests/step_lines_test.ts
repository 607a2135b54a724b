// deno-lint-ignore-file no-console
// Issue 38, item 7: each journal step a run records is one line on stderr
// with the time since the command started, the run ends with one verdict
// line (the versions from → to and the downtime), --json says the same as
// `downtimeMs` and `versions`, and `node status` starts with a one-word
// verdict and names the running and kept releases. Through the artifact in
// the systemd sandbox. The expected lines are the wording, not a
// recording of the output.

import { assert, assertEquals } from "./support/assert.ts";
import { makeBundle } from "./support/bundle.ts";
import { nspawnUnavailable } from "./support/sandbox.ts";
import { Node } from "./support/sandbox_node.ts";
import { scratchDir } from "./support/scratch.ts";

if (nspawnUnavailable) console.error(`step line tests are skipped: ${nspawnUnavailable}`);

/** Each journal step, and the line the issue gives it. */
const stepPatterns: readonly [string, RegExp][] = [
  ["preparing", /^preparing slot [ab] \((host|nspawn)\)$/],
  ["stopping-source", /^stopping source: downtime starts$/],
  ["starting-target", /^starting target$/],
  ["persisting", /^persisting\b/],
  ["awaiting-ready", /^waiting up to (\S+) for health$/],
  ["ready", /^ready(: down (\d+\.\d) s)?$/],
  ["complete", /^complete$/],
  ["rolled-back", /^rolled back(: down (\d+\.\d) s)?$/],
  ["failed", /^failed\b/],
];

interface Said {
  /** Seconds since the command started, as the line says. */
  readonly at: number;
  readonly text: string;
  /** The journal step the line is for; undefined for another stamped line. */
  readonly step: string | undefined;
}

/** The stamped lines of `stderr` (`[  1.2 s] text`), in order. */
function stamped(stderr: string): Said[] {
  return stderr.split("\n").flatMap((l) => {
    const m = /^\[\s*(\d+\.\d) s\] (.+)$/.exec(l);
    if (!m) return [];
    const text = m[2]!;
    return [{ at: Number(m[1]), text, step: stepPatterns.find(([, re]) => re.test(text))?.[0] }];
  });
}

/**
 * Checks that the steps said are `steps`, each once and in that order, with
 * times that never go back; returns the lines.
 */
function assertSteps(label: string, stderr: string, steps: readonly string[]): Said[] {
  const said = stamped(stderr);
  assertEquals(said.flatMap((s) => s.step ? [s.step] : []), [...steps], `${label}:\n${stderr}`);
  for (let i = 1; i < said.length; i++) {
    assert(said[i]!.at >= said[i - 1]!.at, `${label}: time went back:\n${stderr}`);
  }
  return said;
}

/** The line said for `step`. */
function lineOf(said: Said[], step: string): Said {
  const s = said.find((s) => s.step === step);
  assert(s, `no ${step} line in ${JSON.stringify(said)}`);
  return s;
}

/**
 * The downtime (seconds) is at most the time between the stopping-source
 * line and the line the stack was back at; the two stamps are rounded to
 * 0.1 s each, so their difference may be 0.1 s short.
 */
function assertDowntimeWithin(label: string, downS: number, said: Said[], back: string) {
  const span = lineOf(said, back).at - lineOf(said, "stopping-source").at;
  assert(downS > 0, `${label}: a downtime of ${downS} s`);
  assert(downS <= span + 0.1 + 1e-9, `${label}: down ${downS} s, but ${span} s between the lines`);
}

/** The last line of stdout. */
function lastLine(stdout: string): string {
  return stdout.trimEnd().split("\n").at(-1) ?? "";
}

const inPlace = [
  "preparing",
  "stopping-source",
  "starting-target",
  "persisting",
  "awaiting-ready",
  "ready",
  "complete",
];

Deno.test({
  name: "runs say one timed line per step and end with a verdict; node status starts with one",
  ignore: nspawnUnavailable !== undefined,
  async fn() {
    const v1 = await makeBundle(await scratchDir("bundle-v1-"), { release: "1.0.0" });
    const v2 = await makeBundle(await scratchDir("bundle-v2-"), { release: "2.0.0" });
    await using n = await Node.boot("host", undefined, { bundleDir: v1 });

    // A mode change, human output: the real --wait-ready in its line.
    const run = await n.stratum([
      "migrate",
      "run",
      "--to",
      "nspawn",
      "--bundle",
      n.bundle,
      "--wait-ready",
      "1m30s",
    ]);
    assertEquals(run.code, 0, run.stderr);
    const runSaid = assertSteps("migrate run", run.stderr, inPlace);
    assertEquals(lineOf(runSaid, "preparing").text, "preparing slot b (nspawn)");
    assertEquals(lineOf(runSaid, "awaiting-ready").text, "waiting up to 1m30s for health");
    const runReady = /^ready: down (\d+\.\d) s$/.exec(lineOf(runSaid, "ready").text);
    assert(runReady, `ready names the downtime: ${run.stderr}`);
    const runVerdict = /^migrate complete: host → nspawn \(1\.0\.0\), down (\d+\.\d) s$/.exec(
      lastLine(run.stdout),
    );
    assert(runVerdict, `the verdict is last: ${run.stdout}`);
    assertEquals(runVerdict[1], runReady[1], "the verdict's downtime is the ready line's");
    assertDowntimeWithin("migrate run", Number(runVerdict[1]), runSaid, "ready");
    assertEquals((await n.stratum(["migrate", "ack"])).code, 0);

    const before = await n.stratum(["node", "status"]);
    assertEquals(before.code, 0, before.stdout + before.stderr);
    assertEquals(before.stdout.split("\n")[0], "healthy", before.stdout);
    assert(/^running: release 1\.0\.0\b/m.test(before.stdout), before.stdout);
    assert(/^kept: none$/m.test(before.stdout), before.stdout);

    // An upgrade with --json: one document on stdout, the lines on stderr.
    const up = await n.stratum(["node", "upgrade", "--bundle", v2, "--json"]);
    assertEquals(up.code, 0, up.stderr);
    assert(up.doc, `stdout is one JSON document: ${up.stdout}`);
    assertEquals(up.doc.outcome, "complete");
    assertEquals(up.doc.versions, { from: "1.0.0", to: "2.0.0" });
    assert(typeof up.doc.downtimeMs === "number" && up.doc.downtimeMs > 0, up.stdout);
    const upSaid = assertSteps("node upgrade", up.stderr, inPlace);
    assertEquals(lineOf(upSaid, "awaiting-ready").text, "waiting up to 2m for health");
    assertDowntimeWithin("node upgrade", up.doc.downtimeMs / 1000, upSaid, "ready");
    const upReady = /^ready: down (\d+\.\d) s$/.exec(lineOf(upSaid, "ready").text);
    assertEquals(Number(upReady?.[1]), Number((up.doc.downtimeMs / 1000).toFixed(1)));
    assertEquals((await n.stratum(["migrate", "ack"])).code, 0);

    const after = await n.stratum(["node", "status"]);
    assertEquals(after.code, 0, after.stdout + after.stderr);
    assertEquals(after.stdout.split("\n")[0], "healthy", after.stdout);
    assert(/^running: release 2\.0\.0\b/m.test(after.stdout), after.stdout);
    assert(/^kept: release 1\.0\.0\b/m.test(after.stdout), after.stdout);

    // A rollback to the kept release that cannot record awaiting-ready: it
    // rolls back, says so, and ends with the rolled-back verdict.
    const failed = await n.stratum(["node", "rollback"], {
      STRATUM_FAILPOINT: "fail-record:awaiting-ready",
    });
    assertEquals(failed.code, 1, failed.stdout + failed.stderr);
    const failedSaid = assertSteps("a rolled-back rollback", failed.stderr, [
      "preparing",
      "stopping-source",
      "starting-target",
      "persisting",
      "rolled-back",
    ]);
    const rolling = failedSaid.findIndex((s) => s.text.startsWith("rolling back: "));
    assert(
      rolling > failedSaid.findIndex((s) => s.step === "persisting") &&
        rolling < failedSaid.findIndex((s) => s.step === "rolled-back"),
      `rolling back is said before rolled back: ${failed.stderr}`,
    );
    const back = /^rolled back: down (\d+\.\d) s$/.exec(lineOf(failedSaid, "rolled-back").text);
    assert(back, failed.stderr);
    assertDowntimeWithin("rolled back", Number(back[1]), failedSaid, "rolled-back");
    assert(
      /^rollback rolled back: still 2\.0\.0 \(1\.0\.0 failed at record\), down \d+\.\d s$/.test(
        lastLine(failed.stdout),
      ),
      `the verdict is last: ${failed.stdout}`,
    );
    assertEquals((await n.stratum(["migrate", "ack"])).code, 0);

    // The same rollback, killed once awaiting-ready is recorded, and
    // resumed: the resume says the steps it records the same way.
    const killed = await n.stratum(["node", "rollback"], {
      STRATUM_FAILPOINT: "kill-after-record:awaiting-ready",
    });
    assert(killed.code !== 0, killed.stderr);
    assertSteps("a killed rollback", killed.stderr, inPlace.slice(0, 5));
    const resumed = await n.stratum(["migrate", "resume"]);
    assertEquals(resumed.code, 0, resumed.stdout + resumed.stderr);
    assertSteps("its resume", resumed.stderr, ["ready", "complete"]);
    assertEquals((await n.stratum(["migrate", "ack"])).code, 0);
    const ended = await n.stratum(["node", "status", "--json"]);
    assertEquals(ended.doc?.running?.version, "1.0.0", ended.stdout);
    assertEquals(ended.doc?.kept?.version, "2.0.0", ended.stdout);

    // A second rollback goes forward again, to the release the first left.
    const forward = await n.stratum(["node", "rollback"]);
    assertEquals(forward.code, 0, forward.stdout + forward.stderr);
    const forwardSaid = assertSteps("node rollback", forward.stderr, inPlace);
    const verdict = /^rollback complete: 1\.0\.0 → 2\.0\.0, down (\d+\.\d) s$/.exec(
      lastLine(forward.stdout),
    );
    assert(verdict, `the verdict is last: ${forward.stdout}`);
    assertDowntimeWithin("node rollback", Number(verdict[1]), forwardSaid, "ready");
  },
});
