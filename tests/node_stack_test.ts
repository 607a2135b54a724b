// What a Kubernetes node stack needs of a slot, without running containers
// (those need cgroup v2: the VM): kubelet mounts every Secret, ConfigMap and
// projected volume as a tmpfs under /var/lib/kubelet/pods, and the
// container runtime (and its containers) must see those mounts. The volume
// stack (tests/support/bundle.ts) is healthy only while its runtime side
// sees the volume its kubelet stand-in mounted after it started. One
// nspawn machine per service cannot pass (nspawn's binds are one-way
// slaves of the host); one booted machine per slot (docs/nspawn.md), and
// host mode, must, through every move between them.
import { assert, assertEquals } from "./support/assert.ts";
import { nspawnUnavailable } from "./support/sandbox.ts";
import { Node } from "./support/sandbox_node.ts";
import { volumeProbeMark } from "./support/bundle.ts";

const ignore = nspawnUnavailable !== undefined;

for (const from of ["nspawn", "host"] as const) {
  const to = from === "nspawn" ? "host" : "nspawn";
  Deno.test({
    name:
      `kubelet's volume mounts are seen by the runtime's side: installed in ${from}, moved to ${to} and back`,
    ignore,
    async fn() {
      await using n = await Node.boot(from, undefined, { stack: "volume" });
      const seen = "200 sees secret for node-1";
      assertEquals((await n.state()).health, seen, `installed in ${from}`);
      const there = await n.stratum(["migrate", "run", "--to", to, "--bundle", n.bundle, "--json"]);
      assertEquals([there.code, there.doc?.outcome], [0, "complete"], there.stderr);
      assertEquals(await n.assertInvariant(`${from} → ${to}`), "complete");
      assertEquals((await n.stratum(["migrate", "ack"])).code, 0);
      const back = await n.stratum([
        "migrate",
        "run",
        "--to",
        from,
        "--bundle",
        n.bundle,
        "--json",
      ]);
      assertEquals([back.code, back.doc?.outcome], [0, "complete"], back.stderr);
      assertEquals((await n.state()).health, seen, `back in ${from}`);
      if (from === "nspawn") {
        // The kubelet stand-in started after the runtime's side, as the stack says.
        const order = await n.inMachine(
          "a",
          "systemctl show -P ActiveEnterTimestampMonotonic stratum-runtime.service stratum-kubelet.service",
        );
        const [runtime, kubelet] = order.trim().split(/\s+/).map(Number);
        assert(runtime! > 0 && kubelet! > runtime!, order);
      }
    },
  });
}

Deno.test({
  name:
    "a stack's command probe runs in its own context (inside the machine) and must pass: node status says not healthy without it",
  ignore,
  async fn() {
    await using n = await Node.boot("nspawn", undefined, { stack: "volume" });
    const healthy = async () => {
      const r = await n.stratum(["node", "status", "--json"]);
      return [r.code, r.doc?.health?.healthy];
    };
    // The mark is in the machine's /run only: the probe passes because it runs there.
    assertEquals(await n.sb.sh(`test -e ${volumeProbeMark} && echo host || echo none`), "none\n");
    assertEquals(await healthy(), [0, true]);
    // The HTTP endpoint still answers 200; the command probe alone now fails.
    await n.inMachine("a", `rm ${volumeProbeMark}`);
    assertEquals((await n.state()).health, "200 sees secret for node-1");
    assertEquals(await healthy(), [1, false]);
    await n.inMachine("a", `echo up > ${volumeProbeMark}`);
    assertEquals(await healthy(), [0, true]);
  },
});
