// lib/exec: the runner every host command goes through. Invariants: a
// program killed by a signal is never read as success; a hung program and
// its children are killed at the deadline; a missing program is its own error.

import { assert, assertEquals, assertRejects } from "./support/assert.ts";
import * as exec from "../lib/exec/mod.ts";

Deno.test("a program killed by a signal exits 128+N, not 0", async () => {
  const r = await exec.run(["sh", "-c", "kill -9 $$"], { timeoutMs: 5_000 });
  assertEquals(r.code, 137);
  const err = new exec.ExitError(r);
  assert(err.message.includes("killed by signal 9"), err.message);
  await assertRejects(() => exec.output(["sh", "-c", "kill -TERM $$"], { timeoutMs: 5_000 }));
});

Deno.test("exit codes and output pass through unchanged", async () => {
  const r = await exec.run(["sh", "-c", 'printf "%s" "$1"; echo err >&2; exit 3', "sh", "a b"], {
    timeoutMs: 5_000,
  });
  assertEquals([r.code, r.stdout, r.stderr.trim()], [3, "a b", "err"]);
});

Deno.test("a hung program and its children are killed at the deadline", async () => {
  const marker = `stratum-exec-test-${Deno.pid}`;
  const started = performance.now();
  const err = await assertRejects(
    () =>
      exec.run(["bash", "-c", `(exec -a ${marker} sleep 30) & wait`], {
        timeoutMs: 300,
      }),
    (e) => e instanceof exec.ErrTimeout,
  );
  assert((err as Error).message.includes("no answer after 300 ms"));
  const ours = await new Deno.Command("pgrep", { args: ["-f", marker] }).output();
  assertEquals(new TextDecoder().decode(ours.stdout).trim(), "", "the child was left behind");
  // Bounded by the deadline plus the kill grace, not by the child's 30 s.
  const bound = 300 + exec.killGraceSeconds * 1000 + 2_000;
  assert(performance.now() - started < bound, `took ${performance.now() - started} ms`);
});

Deno.test("an aborted call is killed and says so", async () => {
  const ac = new AbortController();
  setTimeout(() => ac.abort(), 100);
  await assertRejects(
    () => exec.run(["sleep", "30"], { timeoutMs: 30_000, signal: ac.signal }),
    (e) => e instanceof exec.ErrTimeout && /aborted/.test((e as Error).message),
  );
});

Deno.test("a missing program is ErrNotFound, not a failure of the program", async () => {
  await assertRejects(
    () => exec.run(["/nonexistent/stratum-test"], { timeoutMs: 5_000 }),
    (e) => e instanceof exec.ErrNotFound,
  );
});

Deno.test("a file that is there but cannot be executed is ErrNotFound with present set", async () => {
  const dir = await Deno.makeTempDir();
  try {
    await Deno.writeTextFile(`${dir}/kubectl`, "not a program");
    await assertRejects(
      () => exec.run([`${dir}/kubectl`], { timeoutMs: 5_000 }),
      (e) => e instanceof exec.ErrNotFound && e.present,
    );
    await assertRejects(
      () => exec.run([`${dir}/missing`], { timeoutMs: 5_000 }),
      (e) => e instanceof exec.ErrNotFound && !e.present,
    );
  } finally {
    await Deno.remove(dir, { recursive: true });
  }
});

Deno.test("a caller killed by SIGKILL leaves none of its calls' processes behind", async () => {
  // Invariant: nothing stratum started outlives it, even when it cannot clean up.
  const marker = `stratum-exec-orphan-${Deno.pid}`;
  const child = new Deno.Command(Deno.execPath(), {
    args: [
      "run",
      "-A",
      new URL("./support/exec_child.ts", import.meta.url).pathname,
      "bash",
      "-c",
      `(exec -a ${marker} sleep 50) & wait`,
    ],
    stdout: "null",
    stderr: "null",
  }).spawn();
  const pids = async () => {
    // Only the sleep itself: its argv[0] is the marker (the callers' argv merely mention it).
    const o = await new Deno.Command("pgrep", { args: ["-f", `^${marker} 50`] }).output();
    return new TextDecoder().decode(o.stdout).trim();
  };
  // Condition waits, bounded; their time is not what is asserted.
  const until = async (cond: () => Promise<boolean>, what: string) => {
    for (const started = performance.now(); !(await cond());) {
      if (performance.now() - started > 20_000) throw new Error(`gave up waiting: ${what}`);
      await new Promise((r) => setTimeout(r, 50));
    }
  };
  await until(async () => (await pids()) !== "", "the call to start");
  child.kill("SIGKILL");
  await child.status;
  await until(async () => (await pids()) === "", "the call's processes to go");
  assertEquals(await pids(), "");
});
