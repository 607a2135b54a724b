// The pure part of issue 38 item 7: the durations the lines say, the
// downtime the step-line hook measures on a clock the test moves, and the
// verdict's wording. tests/step_lines_test.ts runs the real thing.

import { parseDuration } from "../lib/cli/duration.ts";
import { formatDuration } from "../lib/duration/mod.ts";
import { outcomeOf } from "../lib/cli/report.ts";
import { type Ran, verdict } from "../lib/cli/verdict.ts";
import * as migrate from "../lib/migrate/mod.ts";
import { seconds, stamp, stepLines } from "../lib/node/step_lines.ts";
import { assertEquals } from "./support/assert.ts";

Deno.test("formatDuration says what --wait-ready takes, and parses back", () => {
  const cases: [number, string][] = [
    [120_000, "2m"],
    [90_000, "1m30s"],
    [45_000, "45s"],
    [1_500, "1.5s"],
    [500, "500ms"],
    [3_600_000, "1h"],
    [3_661_000, "1h1m1s"],
  ];
  for (const [ms, text] of cases) {
    assertEquals(formatDuration(ms), text);
    assertEquals(parseDuration("--wait-ready", text), ms);
  }
  assertEquals([seconds(1234), stamp(400), stamp(123_456)], ["1.2 s", "[  0.4 s]", "[123.5 s]"]);
});

/** Records the in-place steps on a clock that moves as `at` says, and what was said. */
async function run(steps: [migrate.Step, number, number][], failAt?: migrate.Step) {
  let t = 0;
  const said: string[] = [];
  const at = new Map(steps.map(([s, before, after]) => [s, { before, after }]));
  const lines = stepLines(
    (step) => {
      t = at.get(step)!.after;
      return step === failAt ? Promise.reject(new Error("disk full")) : Promise.resolve();
    },
    { targetSlot: "b", to: "nspawn", waitReadyMs: 120_000 },
    (l) => said.push(l),
    () => t,
  );
  for (const [step, before] of steps) {
    t = before;
    await lines.record(step, { signal: AbortSignal.any([]) }).catch(() => {});
  }
  return { said, downtimeMs: lines.downtimeMs() };
}

Deno.test("stepLines: a line per recorded step; down from the stop's record to ready", async () => {
  const r = await run([
    ["preparing", 0, 100],
    ["stopping-source", 900, 1000],
    ["starting-target", 1500, 1600],
    ["persisting", 1700, 1800],
    ["awaiting-ready", 1900, 2000],
    ["ready", 3300, 3400],
    ["complete", 3600, 3700],
  ]);
  assertEquals(r.said, [
    "[  0.1 s] preparing slot b (nspawn)",
    "[  1.0 s] stopping source: downtime starts",
    "[  1.6 s] starting target",
    "[  1.8 s] persisting the target as the node's",
    "[  2.0 s] waiting up to 2m for health",
    "[  3.4 s] ready: down 2.3 s",
    "[  3.7 s] complete",
  ]);
  assertEquals(r.downtimeMs, 2300);
});

Deno.test("stepLines: no line for a step whose record fails; never stopped is null", async () => {
  const r = await run([["preparing", 0, 100], ["stopping-source", 200, 300]], "stopping-source");
  assertEquals(r.said, ["[  0.1 s] preparing slot b (nspawn)"]);
  assertEquals(r.downtimeMs, null);
  const back = await run([
    ["preparing", 0, 100],
    ["stopping-source", 200, 300],
    ["rolled-back", 2000, 2100],
  ]);
  assertEquals(back.said.at(-1), "[  2.1 s] rolled back: down 1.7 s");
  assertEquals(back.downtimeMs, 1700);
});

Deno.test("verdict: versions from → to and the downtime", () => {
  const journal = (step: migrate.Step): migrate.Journal => ({
    version: 1,
    strategy: "in-place",
    from: "host",
    to: "host",
    sourceSlot: "a",
    targetSlot: "b",
    step,
    startedAt: new Date(0),
    updatedAt: new Date(0),
  });
  const up: Ran = {
    event: "upgrade",
    from: "host",
    to: "host",
    downtimeMs: 1234,
    versions: { from: "1.0.0", to: "2.0.0" },
  };
  assertEquals(
    verdict(up, outcomeOf(journal("complete"), { rolledBack: false })),
    "upgrade complete: 1.0.0 → 2.0.0, down 1.2 s",
  );
  const failed = new migrate.ActionError("wait-ready", "awaiting-ready", new Error("timeout"));
  assertEquals(
    verdict(up, outcomeOf(journal("rolled-back"), { rolledBack: true, error: failed })),
    "upgrade rolled back: still 1.0.0 (2.0.0 failed at wait-ready), down 1.2 s",
  );
  assertEquals(
    verdict(
      { ...up, event: "migrate", to: "nspawn", versions: { from: "1.0.0", to: "1.0.0" } },
      outcomeOf(journal("complete"), { rolledBack: false }),
    ),
    "migrate complete: host → nspawn (1.0.0), down 1.2 s",
  );
  const refused = new migrate.ActionError("preflight", undefined, new Error("no space"));
  assertEquals(
    verdict(
      { ...up, downtimeMs: null },
      outcomeOf(undefined, { rolledBack: false, error: refused }),
    ),
    "upgrade refused: still 1.0.0, nothing changed",
  );
});
