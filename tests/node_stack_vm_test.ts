// deno-lint-ignore-file no-console
// The real node stack (examples/node-stack: Debian's containerd + runc,
// etcd, and a kubelet stand-in that keeps a container running which reads
// a volume mounted under /var/lib/kubelet/pods) in a VM with its own kernel
// (cgroup v2), as a node runs it: installed, moved between modes, killed and
// cut off after journal writes, upgraded and rolled back. After each:
// - exactly one stack runs: one slot target, the one node.json names, and
//   one containerd, one etcd, one kubelet stand-in and one pod container
//   (the source's are gone in both modes), and no other container of the
//   source's runtime (plantStrays);
// - the stack's command probe passes in its own context: containerd
//   answers, the container started by the target runs and reads the volume;
// - containerd's store holds the same image blobs (same inodes: the image
//   was never imported again; an air-gapped node cannot pull);
// - the host's kernel has what the runtime asks (br_netfilter's sysctls, forwarding);
// - `node status` names the version that runs, the installed bundle is that
//   version, and no other slot is left;
// - etcd has every acknowledged key.
// After a crash the journal is resolved as docs/migration.md's resume table
// says for the recorded step: before `awaiting-ready` rolled back to the
// source mode, from it on complete in the target mode.
//
// STRATUM_VM_TESTS (as tests/vm_test.ts), chained on one node installed once:
// - all (`deno task test:vm:node-stack`, 48.5 min under TCG here): install in
//   nspawn mode; for each direction and each of the 7 journal steps, SIGKILL
//   right after the write then `migrate resume`; the same 14 with a power cut
//   then a boot (no command: stratum-boot.service); an upgrade in nspawn mode,
//   a migration nspawn → host made to fail after the target started (back to
//   nspawn), `node rollback` to the kept release, a move → host; then the ci
//   tail below.
// - ci (the default; CI): install in nspawn mode and a power cut right
//   after it returns; nspawn → host killed after `awaiting-ready`, finished
//   by `resume` (the first step resume finishes: the edge of the rule, and it
//   does all of step 9: the source machine with its container destroyed, the
//   target's started again idempotently); a move → nspawn; nspawn → host cut
//   off after `stopping-source` (the last step before which a cut rolls
//   back: the boot starts the source from what reached the disk). Each mode
//   and each direction once, a resume, and CI's only real power cuts (CI
//   boots one VM: tests/vm_suites.ts). The upgrades and a move made
//   to fail after the target started (a rollback) are in `all` only: CI's 2
//   cores share the VM with every other suite, and the sandbox runs
//   upgrades in both modes (node_upgrade_test, etcd's stack) and rolled-back
//   moves in both directions (node_state_test).
// - install: install in nspawn mode and the power cut (quick); off: skipped.
// - containers: install in nspawn mode, then a move each way, each from a
//   source whose runtime runs two containers the stack did not declare
//   (plantStrays; CI plants them before its kill and its move → nspawn).
// STRATUM_VM_NODE_IMAGE=1 builds the bundle's nspawn mode with the test node
// image (tests/support/node_image.ts) as its own root tree; every nspawn-mode
// check then also finds the image's mark in the machine and no host /usr bound.
// Host-mode install of this stack is not made here: a node installs once
// (install in another mode exits 2 and names `migrate run`; `all` checks
// it), and a second VM costs more than the whole ci subset. The node stack's
// host install runs in the sandbox (tests/node_stack_test.ts) and a host
// install under real power cuts in tests/vm_test.ts (the etcd bundle).

import { join } from "node:path";
import { assert, assertEquals } from "./support/assert.ts";
import { getKeys, keyBatches } from "./support/etcd.ts";
import { repoRoot } from "./support/sandbox.ts";
import { crashChain, finishesAfter, journalSteps, readStepTable } from "./support/step_table.ts";
import { stratumBin } from "./support/stratum_bin.ts";
import {
  assertOnDisk,
  buildImage,
  type ExecResult,
  type Vm,
  vmUnavailable,
  vmWithArtifact,
} from "./support/vm.ts";
import { lacking } from "../scripts/packages.ts";
import { nodeImageMark } from "./support/bundle.ts";
import { nodeImage } from "./support/node_image.ts";

const which = Deno.env.get("STRATUM_VM_TESTS") ?? "ci";
/** STRATUM_VM_NODE_IMAGE=1: the bundle's nspawn mode brings its own root tree (a node image). */
const withNodeImage = Deno.env.get("STRATUM_VM_NODE_IMAGE") === "1";
const skip = which === "off" ? "STRATUM_VM_TESTS=off" : vmUnavailable ??
  (stratumBin ? undefined : "the VM runs the artifact: set STRATUM_BIN (CI builds it)") ??
  ["containerd", "runc", "etcd-server", "etcd-client", "busybox-static"].map(lacking).find(
    (why) => why,
  );
if (skip) console.error(`VM node-stack tests are skipped: ${skip}`);

type Mode = "host" | "nspawn";
const other = (m: Mode): Mode => m === "host" ? "nspawn" : "host";
const steps = journalSteps(await readStepTable());
/** docs/migration.md: from `awaiting-ready` on, resume finishes; before it, it rolls back. */
const finishes = finishesAfter(steps);

const stratum = "/srv/payload/stratum";
/** The stray containers' command line: `sleep <mark>1`, `sleep <mark>2` (plantStrays). */
const strayMark = "86400";
const bundles = { "1": "/srv/payload/node-bundle", "2": "/srv/payload/node-bundle-2" } as const;
type Version = keyof typeof bundles;
const blobs = "/var/lib/containerd/io.containerd.content.v1.content/blobs/sha256";
/** Wall times, ms, by what was timed (printed at the end). */
const times = new Map<string, number[]>();
const timed = async <T>(what: string, f: () => Promise<T>): Promise<T> => {
  const t0 = performance.now();
  try {
    return await f();
  } finally {
    times.set(what, [...(times.get(what) ?? []), performance.now() - t0]);
  }
};

Deno.test({
  name: `the node stack in a VM (${which}): containers, images and etcd's keys through moves, ` +
    "kills, power cuts, an upgrade and rollbacks",
  ignore: skip !== undefined,
  sanitizeOps: false,
  sanitizeResources: false,
  async fn(t) {
    const image = withNodeImage ? await nodeImage() : undefined;
    const vmImage = await buildImage();
    await using vm = await vmWithArtifact(vmImage.dir, stratumBin!, async (payload) => {
      // Release 2 is the same stack built again with another version: an upgrade.
      for (const v of which === "all" ? ["1", "2"] : ["1"]) {
        const built = await new Deno.Command("bash", {
          args: [
            join(repoRoot, "examples/node-stack/build.sh"),
            join(payload, bundles[v as Version].split("/").pop()!),
            v,
          ],
          env: { STRATUM: stratumBin!, ...(image ? { NODE_IMAGE: image } : {}) },
          stdout: "null",
          stderr: "piped",
        }).output();
        assertEquals(built.code, 0, new TextDecoder().decode(built.stderr));
      }
    });
    await vm.boot();
    const { write, written } = keyBatches(vm, 20);
    /** What the node runs now, as the steps so far left it. */
    const node = { mode: "nspawn" as Mode, version: "1" as Version, inodes: "" };
    const whole = (label: string) =>
      assertStack(vm, node.mode, node.version, node.inodes, written, label);
    const ack = async (label: string) => {
      const r = await vm.exec([stratum, "migrate", "ack"]);
      assertEquals(r.code, 0, `${label}: migrate ack: ${r.stderr}`);
    };
    /** The journal's step, as `migrate status --json` reports it. */
    const journalStep = async () => {
      const r = await vm.exec([stratum, "migrate", "status", "--json"]);
      return JSON.parse(r.stdout).journal?.step as string | undefined;
    };
    /** `node install` of release 1 in `mode`, as cloud-init runs it. */
    const install = (mode: Mode, extra: string[] = []) =>
      vm.exec([
        stratum,
        "node",
        "install",
        "--mode",
        mode,
        "--bundle",
        bundles["1"],
        "--node",
        "node-1",
        ...extra,
      ]);
    const migrate = (to: Mode, env: Record<string, string> = {}) =>
      vm.exec(
        [stratum, "migrate", "run", "--to", to, "--bundle", bundles[node.version], "--json"],
        { env },
      );

    /** Where the node really is (after a failed step, so the chain's next steps start from it). */
    const resync = async () => {
      try {
        const j = await journalStep();
        if (j === "complete" || j === "rolled-back") await vm.exec([stratum, "migrate", "ack"]);
        node.mode = JSON.parse(await vm.sh("cat /etc/stratum/node.json")).mode;
        const st = JSON.parse((await vm.exec([stratum, "node", "status", "--json"])).stdout);
        if (st.running?.version in bundles) node.version = st.running.version;
      } catch (e) {
        console.error(`the node's state could not be read back: ${e}`);
      }
    };
    const stage = (name: string, f: () => Promise<void>) =>
      t.step(name, async () => {
        try {
          await f();
        } catch (e) {
          console.error(`${name}: failed; the guest's units:\n${await evidence(vm)}`);
          await resync();
          throw e;
        }
      });

    await stage(
      which === "ci"
        ? "install in nspawn mode, the power cut right after it returns: the node boots into its " +
          "machine, no command"
        : "install in nspawn mode: the container runs in the booted machine",
      async () => {
        const r = await timed("install", () => install("nspawn"));
        assertEquals(r.code, 0, r.stderr);
        if (which === "ci") {
          // Right then: whatever install left only in the page cache is lost.
          await vm.powerCut();
          await timed("power-on to stratum-boot.service done", async () => {
            await vm.boot();
            await waitBootUnit(vm, "after a power cut right after install");
          });
          await assertOnDisk(vm, "nspawn", "after a power cut right after install");
        }
        node.inodes = await vm.sh(`ls -i ${blobs} | sort`);
        assert(node.inodes.trim().split("\n").length >= 3, `the image's blobs: ${node.inodes}`);
        await write();
        await whole("after install");
      },
    );

    /**
     * Starts two containers the stack's stand-in did not, through the
     * node's runtime (in the machine in nspawn mode): one in containerd
     * namespace `operator` (its default cgroup /operator/<id>), one in
     * `k8s.io` under a kubepods cgroup, as kubelet's pods are. Neither is in
     * the stack's declared workloads (/stratum): the next move must stop
     * them with its source all the same (issue: two runtimes running the
     * node's containers). assertStack finds none left after every step.
     */
    let strays = 0;
    const plantStrays = async () => {
      const n = ++strays;
      const st = JSON.parse(await vm.sh("cat /etc/stratum/node.json"));
      const inMachine = st.mode === "nspawn";
      const dir = inMachine ? "/opt/node" : `/var/lib/stratum/slots/${st.slot}/opt/node`;
      const ctr = `${dir}/bin/ctr --address /run/containerd/containerd.sock`;
      const script = [
        `${ctr} -n operator images import ${dir}/image/busybox-oci.tar >/dev/null`,
        `${ctr} -n operator run -d --null-io stratum.local/busybox:1 stray-op-${n} sleep ${strayMark}1`,
        `${ctr} -n k8s.io images import ${dir}/image/busybox-oci.tar >/dev/null`,
        `${ctr} -n k8s.io run -d --null-io --cgroup /kubepods/besteffort/pod-stray/c${n} ` +
        `stratum.local/busybox:1 stray-kp-${n} sleep ${strayMark}2`,
      ].join(" && ");
      const r = await vm.exec([
        "sh",
        "-c",
        inMachine
          ? `pid=$(systemctl show -P MainPID stratum-${st.slot}-machine.service); ` +
            `nsenter -t $(cat /proc/$pid/task/$pid/children) -m -p sh -c '${script}'`
          : script,
      ]);
      assertEquals(r.code, 0, `strays started in ${st.mode} mode: ${r.stdout}${r.stderr}`);
      assertEquals(
        (await vm.exec(["pgrep", "-c", "-f", `^sleep ${strayMark}`])).stdout.trim(),
        "2",
        "both strays run before the move",
      );
    };

    if (which === "all") {
      await stage(
        "install again: the same mode and bundle is already-installed (0), another mode exits 2 naming migrate run",
        async () => {
          const same = await install("nspawn", ["--json"]);
          assertEquals([same.code, JSON.parse(same.stdout).outcome], [0, "already-installed"]);
          const host = await install("host");
          assertEquals(host.code, 2, host.stderr);
          assert(host.stderr.includes("migrate run"), `names migrate run: ${host.stderr}`);
          await whole("after install again");
        },
      );
    }

    /**
     * `from` → other mode, the process SIGKILLed right after `step` is
     * durably journaled (exit 137); then `resume`, or a power cut and a boot
     * with no command. The journal ends as the resume table says for the
     * step, and the node is whole in the mode it names.
     */
    const crashAfter = async (from: Mode, step: string, crash: "kill" | "power") => {
      assertEquals(node.mode, from, "the chain starts where the last step left the node");
      const to = other(from);
      await write();
      const r = await migrate(to, { STRATUM_FAILPOINT: `kill-after-record:${step}` });
      assertEquals(r.code, 137, `the failpoint killed it after ${step}: ${r.stderr}`);
      const label = `${crash === "kill" ? "SIGKILL" : "power cut"} after ${step}, ${from} → ${to}`;
      if (crash === "kill") {
        const resumed = await timed(
          "resume after a SIGKILL",
          () => vm.exec([stratum, "migrate", "resume", "--json"]),
        );
        // docs/migration.md's resume table; docs/cli.md: 0 complete or nothing to do, 1 rolled back.
        const want = step === "complete"
          ? [0, "nothing-to-do"]
          : finishes(step)
          ? [0, "complete"]
          : [1, "rolled-back"];
        assertEquals(
          [resumed.code, JSON.parse(resumed.stdout || "{}").outcome],
          want,
          `${label}: resume: ${resumed.stderr}`,
        );
      } else {
        await vm.powerCut();
        await timed("power-on to stratum-boot.service done", async () => {
          await vm.boot();
          await waitBootUnit(vm, label);
        });
        const boot = await vm.exec(["systemctl", "is-active", "stratum-boot.service"]);
        assertEquals(boot.stdout.trim(), "active", `${label}: stratum-boot.service`);
        await assertOnDisk(vm, finishes(step) ? to : from, label);
      }
      assertEquals(
        await journalStep(),
        finishes(step) ? "complete" : "rolled-back",
        `${label}: the journal`,
      );
      if (finishes(step)) node.mode = to;
      await whole(label);
      await ack(label);
    };

    if (which === "all") {
      for (const crash of ["kill", "power"] as const) {
        for (const { from, step } of crashChain(steps, node.mode)) {
          await stage(
            `${crash === "kill" ? "SIGKILL" : "power cut"} after ${step} is recorded, ${from} → ${
              other(from)
            }: ${finishes(step) ? `completes in ${other(from)}` : `rolls back to ${from}`}`,
            () => crashAfter(from, step, crash),
          );
        }
      }
    } else if (which === "ci") {
      await stage(
        "SIGKILL after awaiting-ready is recorded, nspawn → host, two stray containers in the " +
          "machine: resume completes in host mode, none left",
        async () => {
          await plantStrays();
          await crashAfter("nspawn", "awaiting-ready", "kill");
        },
      );
    }

    /** `node upgrade` (or `node rollback`) in the node's mode to `version`: it runs, whole. */
    const upgrade = async (version: Version, how: "upgrade" | "rollback") => {
      await write();
      const r = await timed(`node ${how}`, () =>
        vm.exec(
          how === "upgrade"
            ? [stratum, "node", "upgrade", "--bundle", bundles[version], "--json"]
            : [stratum, "node", "rollback", "--json"],
        ));
      assertEquals(r.code, 0, r.stderr);
      const doc = JSON.parse(r.stdout);
      assertEquals(doc.outcome, "complete", r.stderr);
      assertEquals([doc.journal.from, doc.journal.to], [node.mode, node.mode], "the same mode");
      const before = node.version;
      node.version = version;
      await whole(`after node ${how} in ${node.mode} mode`);
      if (how === "upgrade") {
        const st = JSON.parse((await vm.exec([stratum, "node", "status", "--json"])).stdout);
        assertEquals(st.kept?.version, before, "the replaced release is kept for node rollback");
      }
      await ack(`node ${how}`);
    };

    /**
     * A move made to fail after the target started (writing `awaiting-ready`
     * fails, as a full disk would): exit 1, rolled back, the source mode whole.
     */
    const failedMove = async () => {
      const from = node.mode;
      await write();
      const r = await timed(
        "a move rolled back",
        () => migrate(other(from), { STRATUM_FAILPOINT: "fail-record:awaiting-ready" }),
      );
      assertEquals(r.code, 1, r.stderr);
      const doc = JSON.parse(r.stdout);
      assertEquals([doc.outcome, doc.rollback], ["rolled-back", "done"], r.stderr);
      assertEquals(await journalStep(), "rolled-back");
      await whole(`after ${from} → ${other(from)} rolled back`);
      await ack("the rolled-back move");
    };

    const move = async () => {
      const to = other(node.mode);
      await write();
      const r = await timed("migrate run", () => migrate(to));
      assertEquals(r.code, 0, r.stderr);
      assertEquals(JSON.parse(r.stdout).outcome, "complete");
      node.mode = to;
      await whole(`after migrate → ${to}`);
      await ack(`migrate → ${to}`);
    };

    if (which === "containers") {
      // The runtime's every container stops with its slot, in both modes
      // (a quick chain: install, then a move each way, each from a source
      // running two containers the stack did not declare).
      await stage("nspawn → host with two stray containers in the machine: none left", async () => {
        await plantStrays();
        await move();
      });
      await stage("host → nspawn with two stray containers on the host: none left", async () => {
        await plantStrays();
        await move();
      });
      return;
    }

    if (which === "all") {
      await stage(
        "upgrade in nspawn mode to release 2: it runs, the same image, every key",
        () => upgrade("2", "upgrade"),
      );
      await stage(
        "nspawn → host failing after the target started: exit 1, back in nspawn mode, whole",
        failedMove,
      );
      await stage(
        "node rollback in nspawn mode: release 1 runs again, whole",
        () => upgrade("1", "rollback"),
      );
      await stage("migrate → host: one stack, its container, the same image, every key", move);
    }
    if (which === "all") {
      await stage(
        "upgrade in host mode to release 2: it runs, the same image, every key",
        () => upgrade("2", "upgrade"),
      );
      await stage(
        "host → nspawn failing after the target started: exit 1, back in host mode, whole",
        failedMove,
      );
    }
    if (which === "all" || which === "ci") {
      await stage(
        "migrate → nspawn with two stray containers on the host: one stack, its container, none " +
          "left, the same image, every key",
        async () => {
          await plantStrays();
          await move();
        },
      );
    }
    if (which === "ci") {
      // The boot must roll back with what reached the disk: the source's
      // stop was recorded, nothing of the target's is durable yet.
      await stage(
        "a power cut after stopping-source is recorded, nspawn → host: the boot rolls back to " +
          "nspawn mode, its stack and container, no command",
        () => crashAfter("nspawn", "stopping-source", "power"),
      );
    } else {
      await stage(
        "a power cut: the node boots back to its stack and container, no command",
        async () => {
          await write();
          await vm.powerCut();
          await timed("power-on to stratum-boot.service done", async () => {
            await vm.boot();
            await waitBootUnit(vm, "after a power cut");
          });
          await assertOnDisk(vm, node.mode, "after a power cut");
          await whole("after a power cut");
        },
      );
    }

    for (const [what, ms] of times) {
      const sorted = [...ms].sort((a, b) => a - b);
      console.error(
        `vm node stack (TCG): ${what}: ${sorted.length}×, median ${
          (sorted[Math.floor(sorted.length / 2)]! / 1000).toFixed(1)
        } s, max ${(sorted[sorted.length - 1]! / 1000).toFixed(1)} s`,
      );
    }
  },
});

/** Waits until stratum-boot.service is no longer running (done, failed, or not installed). */
async function waitBootUnit(vm: Vm, label: string): Promise<void> {
  const t0 = performance.now();
  for (;;) {
    const r = await vm.exec(["systemctl", "is-active", "stratum-boot.service"]);
    if (!["activating", "deactivating", "reloading"].includes(r.stdout.trim())) return;
    if (performance.now() - t0 > 300_000) {
      throw new Error(`${label}: stratum-boot.service never ended: ${await evidence(vm)}`);
    }
    await new Promise((r) => setTimeout(r, 1000));
  }
}

/** What the guest's units say, for a failure's message. */
async function evidence(vm: Vm): Promise<string> {
  const r: ExecResult = await vm.exec([
    "sh",
    "-c",
    "systemctl status 'stratum-*' --no-pager 2>&1 | tail -60; " +
    "journalctl -u 'stratum-*' --no-pager 2>&1 | tail -80",
  ]).catch((e) => ({ code: -1, stdout: String(e), stderr: "" }));
  return r.stdout;
}

/**
 * The node runs `mode`'s stack, release `version`, whole, as the file's
 * header says; waits up to 4 min for it to settle.
 */
async function assertStack(
  vm: Vm,
  mode: Mode,
  version: string,
  inodes: string,
  keys: string[],
  label: string,
) {
  const node = JSON.parse(await vm.sh("cat /etc/stratum/node.json"));
  assertEquals(node.mode, mode, `${label}: node.json`);
  const slotDir = `/var/lib/stratum/slots/${node.slot}`;
  // The probe as stratum runs it: on the host, or inside the machine.
  const check = mode === "host"
    ? `/bin/sh ${slotDir}/opt/node/lib/node-check ${slotDir}/opt/node/bin`
    : `pid=$(systemctl show -P MainPID stratum-${node.slot}-machine.service); ` +
      `nsenter -t $(cat /proc/$pid/task/$pid/children) -m -p /bin/sh /opt/node/lib/node-check /opt/node/bin`;
  if (withNodeImage && mode === "nspawn") {
    // The machine runs on the node image's userland: its mark is there, and
    // the host's /usr is not bound.
    const unit = await vm.sh(`systemctl cat stratum-${node.slot}-machine.service`);
    assert(!unit.includes("--bind-ro=/usr"), `${label}: the host's /usr is bound:\n${unit}`);
    const mark = await vm.exec([
      "sh",
      "-c",
      `pid=$(systemctl show -P MainPID stratum-${node.slot}-machine.service); ` +
      `nsenter -t $(cat /proc/$pid/task/$pid/children) -m cat ${nodeImageMark}`,
    ]);
    assertEquals(mark.stdout.trim(), "stratum-test-node-image", `${label}: the image's mark`);
  }
  const t0 = performance.now();
  for (;;) {
    const r = await vm.exec(["sh", "-c", check]);
    if (r.code === 0) break;
    if (performance.now() - t0 > 240_000) {
      throw new Error(
        `${label}: the stack's probe never passed: ${r.stdout}${r.stderr}\n${await evidence(vm)}`,
      );
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
  // One of each of the stack's processes, in either mode (the host sees the
  // machine's). Asked up to 3 times a second apart: the stand-in's poll forks
  // python3 for an instant before it execs ctr.
  let counts: ExecResult | undefined;
  for (let i = 0; i < 3; i++) {
    if (i > 0) await new Promise((r) => setTimeout(r, 1000));
    counts = await vm.exec([
      "sh",
      "-c",
      "pgrep -c -x containerd; pgrep -c -x etcd; pgrep -c -f '^/usr/bin/python3 .*kubelet-standin.py'; " +
      "pgrep -c -f '^/bin/sh -c while :; do cat /run/secret/token'",
    ]);
    if (counts.stdout.trim() === "1\n1\n1\n1") break;
  }
  // No container the runtime ran is left but the pod's (plantStrays).
  const left = await vm.exec([
    "sh",
    "-c",
    `ps -eo pid,cgroup:60,args | grep '[s]leep ${strayMark}'`,
  ]);
  assertEquals(left.stdout, "", `${label}: containers of the source's runtime still run`);
  assertEquals(
    counts!.stdout.trim().split("\n"),
    ["1", "1", "1", "1"],
    `${label}: exactly one containerd, etcd, kubelet stand-in and pod container run: ${await vm
      .sh("ps -eo pid,cgroup:60,args | grep -E 'containerd|etcd|kubelet|cat /run' | grep -v grep")
      .catch(String)}`,
  );
  // The host's kernel as the stack's host files ask (applied at prepare, or by the boot).
  assertEquals(
    (await vm.sh("sysctl -n net.ipv4.ip_forward net.bridge.bridge-nf-call-iptables")).split(/\s+/)
      .filter(Boolean),
    ["1", "1"],
    `${label}: the runtime's kernel settings`,
  );
  assertEquals(await vm.sh(`ls -i ${blobs} | sort`), inodes, `${label}: the same image blobs`);
  // docs/cli.md: node status names the running release; the installed bundle is it; no other slot.
  // Its health is asked for 5 s; on a loaded 2-core host the emulated guest
  // can take longer than that to answer just after a boot, so it is asked
  // again for up to a minute, and an answer that came late is printed.
  let st = await vm.exec(["/srv/payload/stratum", "node", "status", "--json"]);
  const late: string[] = [];
  for (const t1 = performance.now(); st.code !== 0 && performance.now() - t1 < 60_000;) {
    const said = (() => {
      try {
        return JSON.stringify(JSON.parse(st.stdout).health);
      } catch {
        return st.stdout.trim().replace(/\s+/g, " ").slice(0, 400);
      }
    })();
    late.push(`exit ${st.code}: health ${said} ${st.stderr.trim().slice(0, 300)}`);
    await new Promise((r) => setTimeout(r, 2000));
    st = await vm.exec(["/srv/payload/stratum", "node", "status", "--json"]);
  }
  if (late.length > 0) console.error(`${label}: node status answered late:\n${late.join("\n")}`);
  assertEquals(st.code, 0, `${label}: node status: ${st.stdout}${st.stderr}\n${late.join("\n")}`);
  const doc = JSON.parse(st.stdout);
  assertEquals(
    [doc.mode, doc.running?.slot, doc.running?.version],
    [mode, node.slot, version],
    `${label}: node status names what runs`,
  );
  assertEquals(doc.bundle?.digest, doc.running?.digest, `${label}: the installed bundle runs`);
  assertEquals(doc.previous, null, `${label}: the other slot is gone`);
  const got = await getKeys(vm, "k");
  assertEquals(keys.filter((k) => !got.keys.includes(k)), [], `${label}: acknowledged keys lost`);
}
