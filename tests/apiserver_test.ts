// The simulated API server itself: behaviours kubectl depends on.
import { ApiServer } from "./support/apiserver.ts";
import { assert, assertEquals } from "./support/assert.ts";

Deno.test("a watch from a list's resourceVersion replays what changed in between", async () => {
  const s = await ApiServer.start({
    workloads: [{ kind: "Deployment", namespace: "ns", name: "app", rolloutMs: "never" }],
  });
  try {
    const base = `${s.url}/apis/apps/v1/namespaces/ns/deployments`;
    const list = await (await fetch(`${base}?fieldSelector=metadata.name%3Dapp`)).json();
    const rv = list.metadata.resourceVersion;
    // The change lands between the list and the watch.
    await (await fetch(`${base}/app`, {
      method: "PATCH",
      headers: { "content-type": "application/strategic-merge-patch+json" },
      body: JSON.stringify({ spec: { template: { metadata: { annotations: { x: "1" } } } } }),
    })).body?.cancel();
    const res = await fetch(
      `${base}?fieldSelector=metadata.name%3Dapp&watch=true&resourceVersion=${rv}`,
    );
    const reader = res.body!.pipeThrough(new TextDecoderStream()).getReader();
    let timer: ReturnType<typeof setTimeout> | undefined;
    const timeout = new Promise<{ value: undefined }>((r) => {
      timer = setTimeout(() => r({ value: undefined }), 3000);
    });
    const { value } = await Promise.race([reader.read(), timeout]);
    clearTimeout(timer);
    await reader.cancel();
    assert(value !== undefined, "no event: the change between list and watch was lost");
    const ev = JSON.parse(value!.split("\n")[0]!);
    assertEquals(ev.type, "MODIFIED");
    assert(Number(ev.object.metadata.resourceVersion) > Number(rv));
  } finally {
    await s.close();
  }
});
