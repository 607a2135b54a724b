import { join } from "node:path";
import * as host from "../lib/host/mod.ts";
import { assert, assertEquals, assertRejects } from "./support/assert.ts";

const lockMod = new URL("../lib/host/mod.ts", import.meta.url).href;

async function lockPath(): Promise<string> {
  return join(await Deno.makeTempDir({ prefix: "stratum-lock-" }), "run/lock/stratum-migrate.lock");
}

Deno.test("a held lock is busy at once, naming its holder; released, it is free", async () => {
  const path = await lockPath();
  const held = await host.MigrationLock.acquire(path, {
    command: "stratum migrate run --to nspawn",
  });
  const err = await assertRejects(
    () => host.MigrationLock.acquire(path, { command: "second" }),
    (e) => e instanceof host.ErrBusy,
  ) as host.ErrBusy;
  assertEquals(err.holder?.pid, Deno.pid);
  assertEquals(err.holder?.command, "stratum migrate run --to nspawn");
  assert(err.holder!.bootId.length >= 8 && err.message.includes(`pid ${Deno.pid}`), err.message);
  await held.release();
  const again = await host.MigrationLock.acquire(path, { command: "third" });
  await again.release();
});

Deno.test("--wait-lock: a waiter gets the lock once it is released", async () => {
  const path = await lockPath();
  const held = await host.MigrationLock.acquire(path, { command: "first" });
  let waited = false;
  const waiter = host.MigrationLock.acquire(path, {
    command: "second",
    waitMs: 10_000,
    onWait: () => (waited = true),
  });
  await new Promise((r) => setTimeout(r, 300));
  await held.release();
  const got = await waiter;
  assert(waited, "the waiter reported that it waits");
  assertEquals((await host.readHolder(path))?.command, "second");
  await got.release();
});

Deno.test("a lock whose holder was killed is taken over, and the dead holder is reported", async () => {
  const path = await lockPath();
  const child = new Deno.Command(Deno.execPath(), {
    args: [
      "eval",
      `import * as h from ${JSON.stringify(lockMod)};
       await h.MigrationLock.acquire(${JSON.stringify(path)}, { command: "doomed" });
       console.log("held");
       setInterval(() => {}, 60_000);`,
    ],
    stdout: "piped",
    stderr: "inherit",
  }).spawn();
  const reader = child.stdout.getReader();
  await reader.read(); // "held"
  await assertRejects(
    () => host.MigrationLock.acquire(path, { command: "early" }),
    (e) => e instanceof host.ErrBusy,
  );
  child.kill("SIGKILL");
  await child.status;
  reader.releaseLock();
  await child.stdout.cancel();
  let previous: host.LockHolder | undefined;
  const lock = await host.MigrationLock.acquire(path, {
    command: "after",
    onTakeover: (p) => (previous = p),
  });
  assertEquals(previous?.command, "doomed");
  assertEquals(previous?.pid, child.pid);
  await lock.release();
});
