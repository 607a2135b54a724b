// A health probe's verdict is the stack's, not this process's: `node status`
// said "no answer" of a kubelet that answered /healthz in 0.2 s, because its
// own main thread was held (dax compiling its WebAssembly, 13 s in an
// emulated guest) while the ask's 2 s timer ran. Invariants: a stall of the
// asking process longer than the whole deadline does not make a healthy stack
// unhealthy (probeStackWithin asks again); every ask gets its whole time,
// however little the deadline leaves; a stack that does not answer is still
// unhealthy, with why and after how many asks.

import type { HostPaths, Systemctl } from "../lib/host/mod.ts";
import { probeHealth, probeStackWithin, type Stack } from "../lib/isolation/mod.ts";
import { assert, assertEquals } from "./support/assert.ts";

const context = {
  paths: {} as HostPaths,
  systemctl: {} as Systemctl,
  ref: { mode: "host", slot: "a" },
  node: "node-1",
} as const;

const stackAt = (url: string): Stack => ({ services: [], health: { url }, state: [] });

/** Holds this process's main thread for `ms`, as a synchronous compile does. */
function hold(ms: number): void {
  const end = performance.now() + ms;
  while (performance.now() < end) { /* busy */ }
}

Deno.test("a stall of the asking process longer than the deadline does not make a healthy stack unhealthy", async () => {
  await using server = Deno.serve(
    { port: 0, hostname: "127.0.0.1", onListen() {} },
    () => new Response("ok"),
  );
  const url = `http://127.0.0.1:${server.addr.port}/healthz`;
  // The stall starts once the first ask is under way and outlasts both the
  // ask's timeout and the whole deadline.
  setTimeout(() => hold(1500), 0);
  const r = await probeStackWithin(stackAt(url), context, 1000, 500);
  assertEquals(r, { ok: true, detail: "HTTP 200" });
});

Deno.test("each ask gets its whole time, whatever is left of the deadline", async () => {
  // Answers in 0.4 s: within an ask's 1 s, not within what a 0.1 s deadline leaves.
  await using server = Deno.serve(
    { port: 0, hostname: "127.0.0.1", onListen() {} },
    async () => {
      await new Promise((r) => setTimeout(r, 400));
      return new Response("ok");
    },
  );
  const url = `http://127.0.0.1:${server.addr.port}/healthz`;
  assertEquals(await probeStackWithin(stackAt(url), context, 100, 1000), {
    ok: true,
    detail: "HTTP 200",
  });
});

Deno.test("a stack that never answers is unhealthy: why, after how long, after how many asks", async () => {
  // Accepts connections and never answers.
  const listener = Deno.listen({ port: 0, hostname: "127.0.0.1" });
  const held: Deno.Conn[] = [];
  const accepting = (async () => {
    for await (const c of listener) held.push(c);
  })().catch(() => {});
  try {
    const url = `http://127.0.0.1:${(listener.addr as Deno.NetAddr).port}/healthz`;
    const r = await probeStackWithin(stackAt(url), context, 1000, 500);
    assertEquals(r.ok, false);
    assert(
      /^no answer \(none within [\d.]+ s; asked for [\d.]+ s\), the last of [2-9] asks$/.test(
        r.detail,
      ),
      r.detail,
    );
  } finally {
    listener.close();
    for (const c of held) c.close();
    await accepting;
  }
});

Deno.test("a refused connection says so, not 'none in time'", async () => {
  const l = Deno.listen({ port: 0, hostname: "127.0.0.1" });
  const port = (l.addr as Deno.NetAddr).port;
  l.close();
  const r = await probeHealth(`http://127.0.0.1:${port}/healthz`, 1000);
  assertEquals(r.ok, false);
  assert(/^no answer \(.*refused.*; asked for [\d.]+ s\)$/i.test(r.detail), r.detail);
});
