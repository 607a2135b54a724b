// deno-lint-ignore-file no-console
// The real node stack (examples/node-stack: Debian's containerd + runc,
// etcd, and a kubelet stand-in that keeps a container running which reads
// a volume mounted under /var/lib/kubelet/pods) through moves in a VM with
// its own kernel (cgroup v2), as a node runs it. After each:
// - exactly one slot target runs, the one node.json names;
// - exactly one pod container runs (the source's is gone in both modes);
// - the stack's command probe passes in its own context: containerd
//   answers, the container started by the target runs and reads the volume;
// - containerd's store holds the same image blobs (same inodes: the image
//   was never imported again; an air-gapped node cannot pull);
// - the host's kernel has what the runtime asks (br_netfilter's sysctls, forwarding);
// - etcd has every acknowledged key.
//
// Runs with the other VM tests (STRATUM_VM_TESTS; off skips it).

import { join } from "node:path";
import { assert, assertEquals } from "./support/assert.ts";
import { getKeys, keyBatches } from "./support/etcd.ts";
import { repoRoot } from "./support/sandbox.ts";
import { stratumBin } from "./support/stratum_bin.ts";
import { buildImage, type Vm, vmUnavailable, vmWithArtifact } from "./support/vm.ts";
import { lacking } from "../scripts/packages.ts";

const which = Deno.env.get("STRATUM_VM_TESTS") ?? "ci";
const skip = which === "off" ? "STRATUM_VM_TESTS=off" : vmUnavailable ??
  (stratumBin ? undefined : "the VM runs the artifact: set STRATUM_BIN (CI builds it)") ??
  ["containerd", "runc", "etcd-server", "etcd-client", "busybox-static"].map(lacking).find(
    (why) => why,
  );
if (skip) console.error(`VM node-stack tests are skipped: ${skip}`);

type Mode = "host" | "nspawn";
const stratum = "/srv/payload/stratum";
const bundle = "/srv/payload/node-bundle";
const blobs = "/var/lib/containerd/io.containerd.content.v1.content/blobs/sha256";

Deno.test({
  name: "the node stack in a VM: containers, images and etcd's keys through moves and a power cut",
  ignore: skip !== undefined,
  sanitizeOps: false,
  sanitizeResources: false,
  async fn(t) {
    const image = await buildImage();
    await using vm = await vmWithArtifact(image.dir, stratumBin!, async (payload) => {
      const built = await new Deno.Command("bash", {
        args: [join(repoRoot, "examples/node-stack/build.sh"), join(payload, "node-bundle")],
        env: { STRATUM: stratumBin! },
        stdout: "null",
        stderr: "piped",
      }).output();
      assertEquals(built.code, 0, new TextDecoder().decode(built.stderr));
    });
    await vm.boot();
    const { write, written } = keyBatches(vm, 20);
    let inodes = "";

    await t.step("install in nspawn mode: the container runs in the booted machine", async () => {
      const r = await vm.exec([
        stratum,
        "node",
        "install",
        "--mode",
        "nspawn",
        "--bundle",
        bundle,
        "--node",
        "node-1",
      ]);
      assertEquals(r.code, 0, r.stderr);
      inodes = await vm.sh(`ls -i ${blobs} | sort`);
      assert(inodes.trim().split("\n").length >= 3, `the image's blobs: ${inodes}`);
      await write();
      await assertStack(vm, "nspawn", inodes, written, "after install");
    });
    for (const to of ["host", "nspawn"] as const) {
      await t.step(
        `migrate → ${to}: one stack, its container, the same image, every key`,
        async () => {
          await write();
          const t0 = performance.now();
          const r = await vm.exec([stratum, "migrate", "run", "--to", to, "--bundle", bundle]);
          assertEquals(r.code, 0, r.stderr);
          console.error(
            `vm: node stack migrate → ${to} in ${Math.round(performance.now() - t0)} ms (TCG)`,
          );
          await assertStack(vm, to, inodes, written, `after migrate → ${to}`);
          const ack = await vm.exec([stratum, "migrate", "ack"]);
          assertEquals(ack.code, 0, ack.stderr);
        },
      );
    }
    await t.step(
      "a power cut: the node boots back to its stack and container, no command",
      async () => {
        await write();
        await vm.powerCut();
        await vm.boot();
        await assertStack(vm, "nspawn", inodes, written, "after a power cut");
      },
    );
  },
});

/** The node runs `mode`'s stack whole, as the file's header says; waits up to 4 min for it to settle. */
async function assertStack(vm: Vm, mode: Mode, inodes: string, keys: string[], label: string) {
  const node = JSON.parse(await vm.sh("cat /etc/stratum/node.json"));
  assertEquals(node.mode, mode, `${label}: node.json`);
  const slotDir = `/var/lib/stratum/slots/${node.slot}`;
  // The probe as stratum runs it: on the host, or inside the machine.
  const check = mode === "host"
    ? `/bin/sh ${slotDir}/opt/node/lib/node-check ${slotDir}/opt/node/bin`
    : `pid=$(systemctl show -P MainPID stratum-${node.slot}-machine.service); ` +
      `nsenter -t $(cat /proc/$pid/task/$pid/children) -m -p /bin/sh /opt/node/lib/node-check /opt/node/bin`;
  const t0 = performance.now();
  for (;;) {
    const r = await vm.exec(["sh", "-c", check]);
    if (r.code === 0) break;
    if (performance.now() - t0 > 240_000) {
      throw new Error(`${label}: the stack's probe never passed: ${r.stdout}${r.stderr}`);
    }
    await new Promise((r) => setTimeout(r, 2000));
  }
  const active = await vm.exec([
    "sh",
    "-c",
    "for s in a b; do systemctl is-active stratum-$s.target; done",
  ]);
  assertEquals(
    active.stdout.trim().split("\n"),
    node.slot === "a" ? ["active", "inactive"] : ["inactive", "active"],
    `${label}: exactly the slot node.json names runs`,
  );
  // The host's kernel as the stack's host files ask (applied at prepare, or by the boot).
  assertEquals(
    (await vm.sh("sysctl -n net.ipv4.ip_forward net.bridge.bridge-nf-call-iptables")).split(/\s+/)
      .filter(Boolean),
    ["1", "1"],
    `${label}: the runtime's kernel settings`,
  );
  const pods = await vm.exec([
    "pgrep",
    "-c",
    "-f",
    "^/bin/sh -c while :; do cat /run/secret/token",
  ]);
  assertEquals(pods.stdout.trim(), "1", `${label}: exactly one pod container runs`);
  assertEquals(await vm.sh(`ls -i ${blobs} | sort`), inodes, `${label}: the same image blobs`);
  const got = await getKeys(vm, "k");
  assertEquals(keys.filter((k) => !got.keys.includes(k)), [], `${label}: acknowledged keys lost`);
}
