// lib/node/history.ts: the node's durable record survives what a node goes
// through — appends in order, a torn last line after a power cut, a bound on
// its size — and `stratum node history` shows it.
import { join } from "node:path";
import { hostPaths } from "../lib/host/mod.ts";
import * as node from "../lib/node/mod.ts";
import { assert, assertEquals } from "./support/assert.ts";
import { stratum } from "./support/cli.ts";

const ev = (i: number, extra: Partial<node.HistoryEvent> = {}): node.HistoryEvent => ({
  event: "migrate",
  asked: "migrate run --to nspawn",
  from: { mode: "host", slot: "a" },
  to: { mode: "nspawn", slot: "b" },
  outcome: "complete",
  startedAt: new Date(1_700_000_000_000 + i * 1000).toISOString(),
  endedAt: new Date(1_700_000_000_500 + i * 1000).toISOString(),
  message: `event ${i}`,
  ...extra,
});

Deno.test("history: appended in order, the newest N on request", async () => {
  const paths = hostPaths(await Deno.makeTempDir());
  for (let i = 0; i < 5; i++) await node.appendHistory(paths, ev(i));
  const all = await node.readHistory(paths);
  assertEquals(all.map((e) => e.message), ["event 0", "event 1", "event 2", "event 3", "event 4"]);
  assertEquals((await node.readHistory(paths, 2)).map((e) => e.message), ["event 3", "event 4"]);
  assertEquals((await Deno.stat(paths.history)).mode! & 0o777, 0o644);
});

Deno.test("history: a line a power cut tore is skipped, and the next event is whole", async () => {
  const paths = hostPaths(await Deno.makeTempDir());
  await node.appendHistory(paths, ev(0));
  // What an append cut short leaves: part of a line, no newline.
  const f = await Deno.open(paths.history, { append: true });
  await f.write(new TextEncoder().encode(JSON.stringify(ev(1)).slice(0, 40)));
  f.close();
  assertEquals((await node.readHistory(paths)).map((e) => e.message), ["event 0"]);
  await node.appendHistory(paths, ev(2));
  assertEquals((await node.readHistory(paths)).map((e) => e.message), ["event 0", "event 2"]);
});

Deno.test("history: bounded; past the bound the oldest are dropped and the newest kept", async () => {
  const paths = hostPaths(await Deno.makeTempDir());
  const big = "x".repeat(4000);
  let i = 0;
  while (i < 300) await node.appendHistory(paths, ev(i++, { message: `${i - 1} ${big}` }));
  const size = (await Deno.stat(paths.history)).size;
  assert(size <= node.maxHistoryBytes, `history is ${size} bytes`);
  const kept = await node.readHistory(paths);
  assert(kept.length > 30, `${kept.length} kept`);
  assertEquals(kept.at(-1)!.message!.split(" ")[0], "299", "the newest is kept");
  const numbers = kept.map((e) => Number(e.message!.split(" ")[0]));
  assertEquals(numbers, [...numbers].sort((a, b) => a - b), "still in order");
});

Deno.test("node history prints the events, --json with outcome and nextAction, bad --limit exit 2", async () => {
  const root = await Deno.makeTempDir();
  const paths = hostPaths(root);
  await node.appendHistory(paths, ev(0));
  await node.appendHistory(
    paths,
    ev(1, { outcome: "rolled-back", failedStep: "start-target", message: "unit failed" }),
  );
  const text = await stratum(["node", "history", "--root", root]);
  assertEquals(text.code, 0, text.stderr);
  const lines = text.stdout.trim().split("\n");
  assertEquals(lines.length, 2, text.stdout);
  assert(lines[1]!.includes("rolled-back at start-target: unit failed"), lines[1]);
  const json = await stratum(["node", "history", "--root", root, "--limit", "1", "--json"]);
  const doc = JSON.parse(json.stdout);
  assertEquals([doc.outcome, doc.nextAction, doc.events.length], ["listed", "none", 1]);
  assertEquals(doc.events[0].outcome, "rolled-back");
  const bad = await stratum(["node", "history", "--root", root, "--limit", "x"]);
  assertEquals(bad.code, 2, bad.stderr);
  assertEquals(
    await Deno.readTextFile(join(root, "var/lib/stratum/history.jsonl")).then((t) =>
      t.trim().split("\n").length
    ),
    2,
    "nothing changed",
  );
});
