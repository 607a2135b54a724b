// deno-lint-ignore-file no-console
// What stratum runs inside an nspawn machine runs with the machine's
// confinement and never more (docs/nspawn.md, "What root in the machine
// can do"), through the artifact in the real systemd sandbox.
//
// The attack: root in the machine (a service of the stack) replaces /bin,
// on the machine's own volatile overlay, with a directory whose `sh` is its
// program. Every later `/bin/sh` stratum has the machine run (its readiness
// check, its command probe) is that program. It logs what it runs with.
//
// Invariant: each run of the planted program has an effective capability
// set inside the machine's bounding set (read from the machine's systemd
// on the host) and the machine's seccomp filter (Seccomp: 2); it reads its
// own /proc/self (so it is in the machine's PID namespace). Before the
// probe became a service of the machine, the program ran under nsenter
// with stratum's full capabilities and no filter, outside the machine's
// PIDs (its /proc/self unreadable): that is the escape this test catches.

import { join } from "node:path";
import { assert, assertEquals } from "./support/assert.ts";
import { makeBundle, stackState } from "./support/bundle.ts";
import { nspawnUnavailable, repoRoot } from "./support/sandbox.ts";
import { Node } from "./support/sandbox_node.ts";

if (nspawnUnavailable) console.error(`confinement tests are skipped: ${nspawnUnavailable}`);

const planted = `${stackState}/planted.log`;

/** The capability bounding set of slot a's machine (its systemd, read on the host). */
async function machineCapBnd(n: Node): Promise<bigint> {
  const bnd = await n.sb.sh(
    "pid=$(systemctl show -P MainPID stratum-a-machine.service); " +
      "c=$(cat /proc/$pid/task/$pid/children); grep '^CapBnd:' /proc/${c% }/status",
  );
  return BigInt(`0x${/CapBnd:\s*([0-9a-f]+)/.exec(bnd)![1]}`);
}

/** What the planted program logged: one record per run. */
function runs(log: string): { capEff: bigint | undefined; seccomp: string | undefined }[] {
  return log.split(/^run$/m).slice(1).map((rec) => ({
    capEff: ((hex) => hex === undefined ? undefined : BigInt(`0x${hex}`))(
      /^CapEff:\s*([0-9a-f]+)$/m.exec(rec)?.[1],
    ),
    seccomp: /^Seccomp:\s*(\d+)$/m.exec(rec)?.[1],
  }));
}

Deno.test({
  name:
    "a machine's planted /bin/sh gets only the machine's confinement from the readiness check and the probe",
  ignore: nspawnUnavailable !== undefined,
  async fn() {
    await Deno.mkdir(join(repoRoot, ".test-tmp"), { recursive: true });
    const dir = await Deno.makeTempDir({ dir: join(repoRoot, ".test-tmp"), prefix: "bundle-" });
    await makeBundle(dir, { plant: planted, healthExec: ["/bin/sh", "-c", "exit 0"] });
    // Installed in nspawn mode: the machine's readiness check runs at start.
    await using n = await Node.boot("nspawn", undefined, { bundleDir: dir });
    // The operator asks: the command probe runs.
    const st = await n.stratum(["node", "status", "--json"]);
    assertEquals(st.code, 0, st.stdout + st.stderr);
    assertEquals(st.doc?.outcome, "healthy", st.stdout);

    // docs/nspawn.md's way to ask the probe as stratum does, run as written.
    const doc = await Deno.readTextFile(join(repoRoot, "docs/nspawn.md"));
    const ask = doc.split("\n").find((l) => l.startsWith("python3 -c 'import socket"));
    assert(ask, "docs/nspawn.md shows how to ask the probe");
    assert((await n.sb.sh(ask)).trim().endsWith("stratum-probe-exit 0"), ask);

    const machineBnd = await machineCapBnd(n);
    assertEquals(machineBnd & (1n << 34n), 0n, "no CAP_SYSLOG without the kernel-log grant");
    const log = await n.sb.sh(`cat ${planted}`);
    const seen = runs(log);
    // The readiness check and the probe each ran it at least once.
    assert(seen.length >= 2, `the planted program ran ${seen.length} times:\n${log}`);
    for (const r of seen) {
      assert(r.capEff !== undefined, `a run outside the machine's PIDs (no /proc/self):\n${log}`);
      assertEquals(
        r.capEff & ~machineBnd,
        0n,
        `capabilities beyond the machine's bounding set ${machineBnd.toString(16)}:\n${log}`,
      );
      assertEquals(r.seccomp, "2", `a run without the machine's seccomp filter:\n${log}`);
    }
  },
});

Deno.test({
  name:
    "a stack that opens /dev/kmsg, as kubelet does, starts in nspawn mode only with the kernel-log grant",
  ignore: nspawnUnavailable !== undefined,
  async fn() {
    // Invariant: without the grant the machine has no kernel log, the
    // stand-in fails with kubelet's own error, and the install says so
    // (exit 1, nothing left running); with it, the same stack is healthy,
    // and the machine holds CAP_SYSLOG in its bounding set (the grant's
    // cost); the first test's machine, without the grant, does not.
    await Deno.mkdir(join(repoRoot, ".test-tmp"), { recursive: true });
    const plain = await Deno.makeTempDir({ dir: join(repoRoot, ".test-tmp"), prefix: "bundle-" });
    await makeBundle(plain, { kmsg: true });
    await using n = await Node.fresh("nspawn");
    const r = await n.stratum(["node", "install", "--mode", "nspawn", "--bundle", plain]);
    await Deno.remove(plain, { recursive: true });
    assertEquals(r.code, 1, r.stdout + r.stderr);
    assert(r.stderr.includes("open /dev/kmsg"), r.stderr);

    const granted = await Deno.makeTempDir({ dir: join(repoRoot, ".test-tmp"), prefix: "bundle-" });
    await makeBundle(granted, { kmsg: true, grants: ["kernel-log"] });
    await using g = await Node.boot("nspawn", undefined, { bundleDir: granted });
    const st = await g.stratum(["node", "status", "--json"]);
    assertEquals(st.doc?.outcome, "healthy", st.stdout);
    const capSyslog = 1n << 34n;
    assertEquals((await machineCapBnd(g)) & capSyslog, capSyslog);
  },
});
