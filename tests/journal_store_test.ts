// deno-lint-ignore-file no-console
import { join } from "node:path";
import $ from "dax";
import * as migrate from "../lib/migrate/mod.ts";
import { assert, assertEquals, assertRejects } from "./support/assert.ts";
import { checkDurable, parseTrace, tracedCalls } from "./support/syscall_trace.ts";
import { sampleJournal } from "./support/journal_sample.ts";

const writer = new URL("./support/journal_writer.ts", import.meta.url).pathname;

const sample = (step?: migrate.Step) => sampleJournal(step);

async function tempStore(now?: () => Date): Promise<migrate.JournalStore> {
  const dir = await Deno.makeTempDir({ prefix: "stratum-journal-" });
  return new migrate.JournalStore(join(dir, "migration.json"), now ? { now } : {});
}

Deno.test("save() then load() round-trips with the seed's field names and RFC 3339 times", async () => {
  const now = new Date("2026-11-30T10:05:00.250Z");
  const store = await tempStore(() => now);
  const saved = await store.save({ ...sample(), attempts: 2, message: "wait-ready: timed out" });
  assertEquals(saved.updatedAt, now);
  assertEquals(await store.load(), saved);
  const raw = JSON.parse(await Deno.readTextFile(store.path));
  assertEquals(Object.keys(raw), [
    "version",
    "strategy",
    "from",
    "to",
    "sourceSlot",
    "targetSlot",
    "step",
    "startedAt",
    "updatedAt",
    "attempts",
    "message",
  ]);
  assertEquals(raw.startedAt, "2026-11-30T10:00:00.000Z");
  assertEquals(raw.updatedAt, "2026-11-30T10:05:00.250Z");
});

Deno.test("save() leaves out attempts and message when they are empty", async () => {
  const store = await tempStore();
  await store.save(sample());
  const raw = JSON.parse(await Deno.readTextFile(store.path));
  assert(!("attempts" in raw) && !("message" in raw));
});

Deno.test("save() writes the journal with mode 0600", async () => {
  const store = await tempStore();
  await store.save(sample());
  assertEquals((await Deno.stat(store.path)).mode! & 0o777, 0o600);
});

Deno.test("load() of a missing file is ErrNoJournal, naming the path, caused by NotFound", async () => {
  const store = await tempStore();
  const e = await assertRejects(() => store.load(), (e) => migrate.is(e, migrate.ErrNoJournal));
  assert(String((e as Error).message).includes(store.path), String(e));
  assert((e as Error).cause instanceof Deno.errors.NotFound, String((e as Error).cause));
});

Deno.test("load() of a journal it cannot read for another reason is not 'no journal'", async () => {
  // The seed: only a missing file is ErrNoJournal. A path that is there but
  // cannot be read (here a directory) may hide a migration under way.
  const store = await tempStore();
  await Deno.mkdir(store.path);
  const e = await assertRejects(() => store.load());
  assert(!migrate.is(e, migrate.ErrNoJournal), String(e));
  assert(migrate.is(e, migrate.ErrCorruptJournal), String(e));
});

Deno.test("an in-place journal that keeps the mode (an upgrade) round-trips", async () => {
  const dir = await Deno.makeTempDir();
  const store = new migrate.JournalStore(`${dir}/migration.json`);
  const upgrade = { ...sample(), to: "host" as const };
  await store.save(upgrade);
  const back = await store.load();
  assertEquals([back.from, back.to, back.strategy, back.step], [
    "host",
    "host",
    "in-place",
    "persisting",
  ]);
  await Deno.remove(dir, { recursive: true });
});

Deno.test("load() of a damaged file is ErrCorruptJournal naming the file, never ErrNoJournal", async (t) => {
  const good = migrate.encodeJournal(sample());
  const cases: Record<string, string> = {
    empty: "",
    whitespace: "  \n",
    truncated: good.slice(0, good.length / 2),
    "not JSON": "migration in progress\n",
    array: "[]",
    "future version": good.replace('"version": 1', '"version": 2'),
    "no version": good.replace('"version": 1,', ""),
    "unknown step": good.replace('"persisting"', '"halfway"'),
    "unknown strategy": good.replace('"in-place"', '"sideways"'),
    "unknown mode": good.replace('"nspawn"', '"docker"'),
    "bad time": good.replace(/"startedAt": "[^"]+"/, '"startedAt": "yesterday"'),
    "bad slot": good.replace('"sourceSlot": "a"', '"sourceSlot": "c"'),
    // Values no clock or migration produces: a damaged or hand-made file.
    "February 30th": good.replace(/"startedAt": "[^"]+"/, '"startedAt": "2024-02-30T10:00:00Z"'),
    "hour 24": good.replace(/"updatedAt": "[^"]+"/, '"updatedAt": "2026-11-30T24:00:00Z"'),
    "minute 60": good.replace(/"updatedAt": "[^"]+"/, '"updatedAt": "2026-11-30T10:60:00Z"'),
    "offset +25:00": good.replace(
      /"startedAt": "[^"]+"/,
      '"startedAt": "2026-11-30T10:00:00+25:00"',
    ),
    // An in-place journal may keep the mode (an upgrade); a reprovision may not.
    "reprovision from == to": migrate.encodeJournal({
      version: migrate.JournalVersion,
      strategy: migrate.StrategyReprovision,
      from: "host",
      to: "host",
      step: migrate.StepReprovisioning,
      startedAt: new Date("2026-11-30T10:00:00Z"),
      updatedAt: new Date("2026-11-30T10:00:00Z"),
    }),
    "attempts 1e308": good.replace('"step"', '"attempts": 1e308,\n  "step"'),
    "attempts -1": good.replace('"step"', '"attempts": -1,\n  "step"'),
    "attempts 2.5": good.replace('"step"', '"attempts": 2.5,\n  "step"'),
    null: "null",
    number: "42",
    "version 0": good.replace('"version": 1', '"version": 0'),
    "version as text": good.replace('"version": 1', '"version": "1"'),
    "attempts 1001": good.replace('"step"', '"attempts": 1001,\n  "step"'),
    "second 60": good.replace(/"updatedAt": "[^"]+"/, '"updatedAt": "2026-11-30T10:00:60Z"'),
    "offset +24:00": good.replace(
      /"updatedAt": "[^"]+"/,
      '"updatedAt": "2026-11-30T10:00:00+24:00"',
    ),
    "offset -05:60": good.replace(
      /"updatedAt": "[^"]+"/,
      '"updatedAt": "2026-11-30T10:00:00-05:60"',
    ),
    "February 29th, 2026": good.replace(
      /"startedAt": "[^"]+"/,
      '"startedAt": "2026-02-29T10:00:00Z"',
    ),
    "month 13": good.replace(/"startedAt": "[^"]+"/, '"startedAt": "2026-13-01T10:00:00Z"'),
    "day 0": good.replace(/"startedAt": "[^"]+"/, '"startedAt": "2026-11-00T10:00:00Z"'),
  };
  for (const [name, text] of Object.entries(cases)) {
    await t.step(name, async () => {
      const store = await tempStore();
      await Deno.writeTextFile(store.path, text);
      const err = await assertRejects(
        () => store.load(),
        (e) => migrate.is(e, migrate.ErrCorruptJournal),
      );
      assert(!migrate.is(err, migrate.ErrNoJournal));
      assert((err as Error).message.includes(store.path), (err as Error).message);
    });
  }
});

Deno.test("load() accepts real times: leap day, offsets, fractions, and small counts", async () => {
  const good = migrate.encodeJournal(sample());
  const store = await tempStore();
  await Deno.writeTextFile(
    store.path,
    good.replace(/"startedAt": "[^"]+"/, '"startedAt": "2024-02-29T23:59:59.999+05:30"')
      .replace('"step"', '"attempts": 3,\n  "step"'),
  );
  const j = await store.load();
  assertEquals(j.startedAt.toISOString(), "2024-02-29T18:29:59.999Z");
  assertEquals(j.attempts, 3);
});

Deno.test("load() accepts every field at its largest real value, and reads offsets as instants", async (t) => {
  const good = migrate.encodeJournal(sample());
  const cases: [string, string, string][] = [
    ["2026-12-31T23:59:59Z", "2026-12-31T23:59:59.000Z", "last second of the year"],
    ["2026-11-30T10:00:00+23:59", "2026-11-29T10:01:00.000Z", "largest positive offset"],
    ["2026-11-30T10:00:00-23:59", "2026-12-01T09:59:00.000Z", "largest negative offset"],
    ["2026-11-30T00:00:00-00:30", "2026-11-30T00:30:00.000Z", "minutes-only offset"],
    ["2028-02-29T12:00:00Z", "2028-02-29T12:00:00.000Z", "leap day"],
  ];
  for (const [text, instant, what] of cases) {
    await t.step(what, async () => {
      const store = await tempStore();
      await Deno.writeTextFile(
        store.path,
        good.replace(/"updatedAt": "[^"]+"/, `"updatedAt": "${text}"`),
      );
      assertEquals((await store.load()).updatedAt.toISOString(), instant);
    });
  }
  for (const [n, want] of [[0, undefined], [1, 1], [1000, 1000]] as const) {
    await t.step(`attempts ${n}`, async () => {
      const store = await tempStore();
      await Deno.writeTextFile(store.path, good.replace('"step"', `"attempts": ${n},\n  "step"`));
      assertEquals((await store.load()).attempts, want);
    });
  }
});

Deno.test("load() says what is wrong: not an object, a version it does not know", async () => {
  const good = migrate.encodeJournal(sample());
  const says = async (text: string) => {
    const store = await tempStore();
    await Deno.writeTextFile(store.path, text);
    const err = await assertRejects(() => store.load());
    return (err as Error).message;
  };
  for (const text of ["null", "[]", "42", '"text"']) {
    assert((await says(text)).includes("not a JSON object"), text);
  }
  const v0 = await says(good.replace('"version": 1', '"version": 0'));
  assert(v0.includes("unsupported version 0") && !v0.includes("newer"), v0);
  assert((await says(good.replace('"version": 1', '"version": 2'))).includes("newer stratum"));
});

Deno.test("load() says a future version was written by a newer stratum", async () => {
  const store = await tempStore();
  await Deno.writeTextFile(
    store.path,
    migrate.encodeJournal(sample()).replace('"version": 1', '"version": 7'),
  );
  const err = await assertRejects(() => store.load());
  assert((err as Error).message.includes("newer stratum"), (err as Error).message);
});

Deno.test("remove() of a missing file is not an error, and removes a present one", async () => {
  const store = await tempStore();
  await store.remove();
  await store.save(sample());
  await store.remove();
  await assertRejects(() => store.load(), (e) => migrate.is(e, migrate.ErrNoJournal));
});

Deno.test("save() cleans up temp files a crashed save left, and load() ignores them", async () => {
  const store = await tempStore();
  const stale = join(store.path, "..", ".migration.json.tmp-99999-deadbeef");
  await Deno.writeTextFile(stale, '{"version": 1, "step": "partial');
  await assertRejects(() => store.load(), (e) => migrate.is(e, migrate.ErrNoJournal));
  await store.save(sample());
  await assertRejects(() => Deno.stat(stale));
});

Deno.test("save() on a fresh node creates the journal's directory", async () => {
  const dir = await Deno.makeTempDir({ prefix: "stratum-journal-" });
  const store = new migrate.JournalStore(join(dir, "var/lib/stratum/migration.json"));
  await store.save(sample());
  assertEquals((await store.load()).step, sample().step);
});

Deno.test("remove() also removes temp files a crashed save left", async () => {
  const store = await tempStore();
  await store.save(sample());
  const stale = join(store.path, "..", ".migration.json.tmp-99999-deadbeef");
  await Deno.writeTextFile(stale, '{"version": 1, "step": "partial');
  await store.remove();
  await assertRejects(() => Deno.stat(stale));
  await assertRejects(() => store.load(), (e) => migrate.is(e, migrate.ErrNoJournal));
});

Deno.test("recorder keeps a step's attempt count when it records that step again, and drops it on a new step", async () => {
  const store = await tempStore();
  const start = { ...sample(migrate.StepStoppingSource), attempts: 1 };
  delete (start as { message?: string }).message;
  const rec = migrate.recorder(store, start);
  await rec(migrate.StepStoppingSource, { signal: new AbortController().signal });
  assertEquals((await store.load()).attempts, 1);
  await rec(migrate.StepStartingTarget, { signal: new AbortController().signal });
  assertEquals((await store.load()).attempts, undefined);
  assertEquals(rec.current()?.attempts, undefined);
  // A step recorded again that had no count gets none: a count starts at resume.
  await rec(migrate.StepStartingTarget, { signal: new AbortController().signal });
  assertEquals((await store.load()).attempts, undefined);
  assertEquals(rec.current()?.attempts, undefined);
});

Deno.test("save() leaves the old journal when the write cannot complete", async () => {
  const store = await tempStore();
  const old = await store.save(sample(migrate.StepStoppingSource));
  // An immutable directory refuses the temp file even to root: save fails
  // before any rename, as on a full or read-only file system.
  const dir = join(store.path, "..");
  await $`chattr +i ${dir}`;
  try {
    await assertRejects(() => store.save(sample(migrate.StepStartingTarget)));
  } finally {
    await $`chattr -i ${dir}`;
  }
  assertEquals(await store.load(), old);
});

Deno.test("save() follows the durable protocol, syscall by syscall (strace)", async () => {
  const dir = await Deno.makeTempDir({ prefix: "stratum-strace-" });
  const path = join(dir, "migration.json");
  const trace = join(dir, "trace");
  await $`strace -f -y -qq -e signal=none -o ${trace} -e trace=${tracedCalls} ${Deno.execPath()} run -A ${writer} ${path} 3`
    .quiet();
  const text = await Deno.readTextFile(trace);
  const report = checkDurable(parseTrace(text), path);
  assertEquals(report.problems, []);
  assertEquals(report.saves, 3);

  // The checker itself: each omission is caught by its own assertion.
  const drop = (re: RegExp) => text.split("\n").filter((l) => !re.test(l)).join("\n");
  const noTmpSync = checkDurable(parseTrace(drop(/fsync\(\d+<[^>]*\.tmp-/)), path);
  assert(noTmpSync.problems.some((p) => p.startsWith("no fsync of") && p.includes(".tmp-")));
  const noDirSync = checkDurable(parseTrace(drop(new RegExp(`fsync\\(\\d+<${dir}>`))), path);
  assert(noDirSync.problems.some((p) => p.includes("after the rename")));
});

Deno.test("remove() fsyncs the directory after the unlink (strace)", async () => {
  const dir = await Deno.makeTempDir({ prefix: "stratum-strace-" });
  const path = join(dir, "migration.json");
  const trace = join(dir, "trace");
  const script = `import * as m from ${
    JSON.stringify(new URL("../lib/migrate/mod.ts", import.meta.url).href)
  };
    await new m.JournalStore(${JSON.stringify(path)}).remove();`;
  await Deno.writeTextFile(path, "{}");
  await $`strace -f -y -qq -e signal=none -o ${trace} -e trace=${tracedCalls} ${Deno.execPath()} eval ${script}`
    .quiet();
  const calls = parseTrace(await Deno.readTextFile(trace));
  assertEquals(checkDurable(calls, path).problems, []);
  assert(
    calls.some((c) => c.name.startsWith("unlink") && c.args.includes(path)),
    "no unlink traced",
  );
});

Deno.test("SIGKILL at random instants of save() leaves the old or the new journal, never a partial one", async () => {
  const dir = await Deno.makeTempDir({ prefix: "stratum-kill-" });
  const path = join(dir, "migration.json");
  const seed = Number(Deno.env.get("STRATUM_TEST_SEED") ?? Date.now() % 100000);
  console.log(`kill delays seeded with STRATUM_TEST_SEED=${seed}`);
  let x = seed;
  const rand = () => (x = (x * 1103515245 + 12345) % 2147483648) / 2147483648;
  for (let i = 0; i < 8; i++) {
    const child = new Deno.Command(Deno.execPath(), {
      args: ["run", "-A", writer, path, "0"],
      stdout: "piped",
      stderr: "null",
    }).spawn();
    const reader = child.stdout.getReader();
    await reader.read(); // "ready": at least one save is done
    await new Promise((r) => setTimeout(r, rand() * 40));
    child.kill("SIGKILL");
    await child.status;
    reader.releaseLock();
    await child.stdout.cancel();
    const j = await new migrate.JournalStore(path).load();
    assert(j.step === migrate.StepStoppingSource || j.step === migrate.StepStartingTarget);
  }
});
