// deno-lint-ignore-file no-console
// Benchmarks of the migration engine: journal save latency (durable, with
// fsyncs) and the orchestration overhead of runInPlace with no-op hooks.
// Run: deno task bench   (fsyncs per save are counted once under strace
// and printed before the table).
import { join } from "node:path";
import $ from "dax";
import type * as isolation from "../lib/isolation/mod.ts";
import * as migrate from "../lib/migrate/mod.ts";
import { sampleJournal } from "../tests/support/journal_sample.ts";
import { checkDurable, parseTrace, tracedCalls } from "../tests/support/syscall_trace.ts";

const dir = await Deno.makeTempDir({ dir: await Deno.realPath("."), prefix: ".bench-" });
globalThis.addEventListener("unload", () => Deno.removeSync(dir, { recursive: true }));

const journal = sampleJournal(migrate.StepPersisting, new Date());

// fsyncs per save, counted under strace.
{
  const path = join(dir, "traced.json");
  const trace = join(dir, "trace");
  const writer = new URL("../tests/support/journal_writer.ts", import.meta.url).pathname;
  const n = 20;
  await $`strace -f -y -qq -e signal=none -o ${trace} -e trace=${tracedCalls} ${Deno.execPath()} run -A ${writer} ${path} ${n}`
    .quiet();
  const calls = parseTrace(await Deno.readTextFile(trace)).filter((c) =>
    (c.name === "fsync" || c.name === "fdatasync") && c.fdPath?.startsWith(dir)
  );
  const report = checkDurable(parseTrace(await Deno.readTextFile(trace)), path);
  console.error(
    `journal save: ${
      calls.length / n
    } fsyncs per save over ${report.saves} saves (${report.problems.length} protocol problems)`,
  );
}

const store = new migrate.JournalStore(join(dir, "migration.json"));

// deno bench reports mean and percentiles but no median: measure it here.
{
  const times: number[] = [];
  for (let i = 0; i < 200; i++) {
    const t0 = performance.now();
    await store.save(journal);
    times.push(performance.now() - t0);
  }
  times.sort((a, b) => a - b);
  console.error(`journal save: median ${times[100]!.toFixed(2)} ms over 200 saves on ${dir}`);
}
Deno.bench("journal save (temp file, fsync, rename, fsync dir)", { group: "journal" }, async () => {
  await store.save(journal);
});
Deno.bench("journal load", { group: "journal" }, async () => {
  await store.load();
});

const noop = () => Promise.resolve();
const backend = (mode: isolation.Mode): isolation.Backend => ({
  mode,
  prepare: (spec) => Promise.resolve({ mode, slot: spec.slot }),
  start: noop,
  stop: noop,
  destroy: noop,
});
const spec: migrate.InPlaceSpec = {
  source: backend("host"),
  sourceRoot: { mode: "host", slot: "a" },
  target: backend("nspawn"),
  targetSpec: { slot: "b", node: "bench" },
  preflight: noop,
  download: noop,
  snapshotConfig: noop,
  restoreConfig: noop,
  discardConfig: noop,
  cleanupNetwork: noop,
  persistTarget: noop,
  restoreSource: noop,
  waitReady: noop,
  removeSourceConfig: noop,
  prepareHost: noop,
};
Deno.bench(
  "runInPlace, no-op hooks, no journal (orchestration only)",
  { group: "run" },
  async () => {
    const r = await migrate.runInPlace(spec);
    if (r.error) throw r.error;
  },
);
Deno.bench("runInPlace, no-op hooks, durable journal (7 saves)", { group: "run" }, async () => {
  const r = await migrate.runInPlace({
    ...spec,
    record: migrate.recorder(store, { strategy: "in-place", from: "host", to: "nspawn" }),
  });
  if (r.error) throw r.error;
});
