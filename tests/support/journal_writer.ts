// A child process for the journal tests: saves a journal COUNT times (0 means
// forever), alternating its step, so a test can trace its syscalls or kill it
// mid-write. Prints "ready" once the first save is done.
import * as migrate from "../../lib/migrate/mod.ts";
import { sampleJournal } from "./journal_sample.ts";

const [path, countArg] = Deno.args;
if (!path) throw new Error("usage: journal_writer.ts PATH [COUNT]");
const count = Number(countArg ?? "1");
const store = new migrate.JournalStore(path);
const base = sampleJournal(migrate.StepStoppingSource, new Date());
const steps = [migrate.StepStoppingSource, migrate.StepStartingTarget] as const;
for (let i = 0; count === 0 || i < count; i++) {
  // A long message makes each write big enough to be cut by a kill.
  await store.save({ ...base, step: steps[i % 2]!, message: `save ${i} `.repeat(2000) });
  if (i === 0) await Deno.stdout.write(new TextEncoder().encode("ready\n"));
}
