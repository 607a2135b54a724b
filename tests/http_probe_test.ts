// The health URL's probe (lib/isolation/http_probe.ts): one HTTP/1.1 GET
// over TCP, its status line read. What a stack's health means by
// docs/bundles.md: healthy only on a 2xx answer within the bound; any other
// status, a silent listener or nothing listening is not healthy, and the
// probe never throws.

import { assertEquals } from "./support/assert.ts";
import { askHttp } from "../lib/isolation/http_probe.ts";

Deno.test("a 2xx answer is healthy, another status is not; the path and query are asked", async () => {
  const asked: string[] = [];
  const ac = new AbortController();
  const server = Deno.serve(
    { hostname: "127.0.0.1", port: 0, signal: ac.signal, onListen() {} },
    (req) => {
      const u = new URL(req.url);
      asked.push(`${req.method} ${u.pathname}${u.search}`);
      return new Response("x".repeat(20_000), { status: u.pathname === "/down" ? 503 : 200 });
    },
  );
  const base = `http://127.0.0.1:${server.addr.port}`;
  try {
    assertEquals(await askHttp(`${base}/healthz?verbose`, 2000), { ok: true, detail: "HTTP 200" });
    assertEquals(await askHttp(`${base}/down`, 2000), { ok: false, detail: "HTTP 503" });
    assertEquals(asked, ["GET /healthz?verbose", "GET /down"]);
  } finally {
    ac.abort();
    await server.finished;
  }
});

Deno.test("a listener that never answers, and a port nothing listens on: no answer, bounded", async () => {
  const silent = Deno.listen({ hostname: "127.0.0.1", port: 0 });
  const held: Deno.Conn[] = [];
  const accepting = (async () => {
    for await (const c of silent) held.push(c);
  })();
  const port = (silent.addr as Deno.NetAddr).port;
  assertEquals(await askHttp(`http://127.0.0.1:${port}/health`, 300), {
    ok: false,
    detail: "no answer",
  });
  silent.close();
  for (const c of held) c.close();
  await accepting.catch(() => {});
  assertEquals(await askHttp(`http://127.0.0.1:${port}/health`, 2000), {
    ok: false,
    detail: "no answer",
  });
});

Deno.test("a listener that answers something other than HTTP is not healthy", async () => {
  const l = Deno.listen({ hostname: "127.0.0.1", port: 0 });
  const serving = (async () => {
    const c = await l.accept();
    await c.write(new TextEncoder().encode("SSH-2.0-OpenSSH\r\n"));
    c.close();
  })();
  const r = await askHttp(`http://127.0.0.1:${(l.addr as Deno.NetAddr).port}/`, 2000);
  await serving;
  l.close();
  assertEquals(r, { ok: false, detail: "no HTTP answer" });
});
