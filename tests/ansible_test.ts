// deno-lint-ignore-file no-console
// examples/ansible/migrate.yml for real: Debian's ansible-playbook against
// three sandboxed nodes (real systemd each), reached through the stock
// community.docker.nsenter connection plugin, with drain, readiness and
// uncordon through the real kubectl against the simulated API server.
// Invariants: every node ends in the new mode, uncordoned, with one change
// each; a second run changes nothing; with node 2's bundle tampered, node 1
// migrates, node 2 is skipped with the plan's reason and nothing changed (not
// even cordoned), node 3 migrates, and the play ends failed naming node 2.

import { join } from "node:path";
import { assert, assertEquals } from "./support/assert.ts";
import { defaultKubectl, noKubectl, SimCluster, stratumWorkloads } from "./support/cluster.ts";
import { nspawnUnavailable, repoRoot } from "./support/sandbox.ts";
import { Node } from "./support/sandbox_node.ts";
import { makeBundle } from "./support/bundle.ts";
import { stratumBin } from "./support/stratum_bin.ts";
import { scratchDir } from "./support/scratch.ts";
import { line, Rotation, rotationLines } from "./support/rotation.ts";
import { lacking } from "../scripts/packages.ts";

const noAnsible = lacking("ansible");
const why = noAnsible ?? nspawnUnavailable ?? noKubectl;
if (why) console.error(`ansible tests are skipped: ${why}`);

/** The executable the playbook runs on each node: the artifact, or a wrapper running the checkout. */
async function stratumExecutable(): Promise<string> {
  if (stratumBin) return stratumBin;
  const wrapper = join(await scratchDir("ansible-"), "stratum-checkout.sh");
  await Deno.writeTextFile(
    wrapper,
    `#!/bin/sh\nexec ${Deno.execPath()} run -A ${join(repoRoot, "main.ts")} "$@"\n`,
    { mode: 0o755 },
  );
  return wrapper;
}

interface Recap {
  [host: string]: { ok: number; changed: number; failed: number };
}

async function playbook(
  nodes: Node[],
  c: SimCluster,
  mode: string,
  opts: { file?: string; bundles?: string[]; check?: boolean; extra?: string[] } = {},
): Promise<{ code: number; recap: Recap; out: string }> {
  const dir = await Deno.makeTempDir({ prefix: "stratum-ansible-" });
  const inventory = join(dir, "inventory.ini");
  const stratum = await stratumExecutable();
  await Deno.writeTextFile(
    inventory,
    "[stratum_nodes]\n" +
      nodes.map((n, i) =>
        `node-${
          i + 1
        } ansible_connection=community.docker.nsenter ansible_nsenter_pid=${n.sb.pid} stratum_bundle=${
          opts.bundles?.[i] ?? n.bundle
        }`
      ).join("\n") +
      `\n\n[stratum_nodes:vars]\nansible_python_interpreter=/usr/bin/python3\nstratum=${stratum}\n`,
  );
  const o = await new Deno.Command("ansible-playbook", {
    args: [
      "-i",
      inventory,
      join(repoRoot, "examples/ansible", opts.file ?? "migrate.yml"),
      ...(opts.check ? ["--check"] : []),
      "-e",
      `stratum_mode=${mode}`,
      "-e",
      `kubectl=${defaultKubectl}`,
      "-e",
      `kubeconfig=${c.kubeconfig}`,
      ...(opts.extra ?? []).flatMap((e) => ["-e", e]),
    ],
    env: {
      ...c.cliEnv(),
      ANSIBLE_NOCOLOR: "1",
      ANSIBLE_REMOTE_TMP: "/tmp/.ansible-remote",
      ANSIBLE_LOCAL_TEMP: join(dir, "local"),
      ANSIBLE_RETRY_FILES_ENABLED: "0",
    },
    stdout: "piped",
    stderr: "piped",
  }).output();
  const out = new TextDecoder().decode(o.stdout) + new TextDecoder().decode(o.stderr);
  const recap: Recap = {};
  for (const m of out.matchAll(/^(node-\d)\s+:\s+ok=(\d+)\s+changed=(\d+).*?failed=(\d+)/gm)) {
    recap[m[1]!] = { ok: Number(m[2]), changed: Number(m[3]), failed: Number(m[4]) };
  }
  return { code: o.code, recap, out };
}

Deno.test({
  name:
    "ansible migrate.yml over three sandboxed nodes: each migrates once; again, nothing; a node with a bad bundle is skipped, the play goes on",
  ignore: why !== undefined,
  async fn() {
    const nodes = [await Node.boot("host"), await Node.boot("host"), await Node.boot("host")];
    try {
      await using c = await SimCluster.start({
        workloads: stratumWorkloads(50),
        nodes: ["node-1", "node-2", "node-3"],
        pods: [1, 2, 3].flatMap((i) => [
          {
            namespace: "kube-system",
            name: `cilium-${i}`,
            node: `node-${i}`,
            owner: { kind: "DaemonSet" as const, name: "cilium" },
          },
          {
            namespace: "default",
            name: `app-${i}`,
            node: `node-${i}`,
            owner: { kind: "ReplicaSet" as const, name: "app-5d" },
          },
        ]),
      });
      const t0 = performance.now();
      const first = await playbook(nodes, c, "nspawn");
      // A figure for the README, not an assertion.
      console.error(`migrate.yml over 3 nodes: ${((performance.now() - t0) / 1000).toFixed(1)} s`);
      assertEquals(first.code, 0, first.out);
      for (const [i, n] of nodes.entries()) {
        const host = `node-${i + 1}`;
        assertEquals([first.recap[host]?.changed, first.recap[host]?.failed], [1, 0], first.out);
        const s = await n.state();
        assertEquals([s.node.mode, s.journal], ["nspawn", null], host);
        assert(
          !(c.server.node(host)!.spec as { unschedulable?: boolean }).unschedulable,
          `${host} cordoned`,
        );
        assertEquals(
          c.server.podsOn(host),
          [`kube-system/cilium-${i + 1}`],
          "the app pod was evicted",
        );
      }

      const second = await playbook(nodes, c, "nspawn");
      assertEquals(second.code, 0, second.out);
      for (const host of ["node-1", "node-2", "node-3"]) {
        assertEquals([second.recap[host]?.changed, second.recap[host]?.failed], [0, 0], second.out);
      }

      // Node 2's bundle for the way back is tampered with.
      await Deno.writeTextFile(join(nodes[1]!.bundle, "host/stack/stack.py"), "# evil\n", {
        append: true,
      });
      const before2 = (await nodes[1]!.state()).files;
      const third = await playbook(nodes, c, "host");
      assert(third.code !== 0, third.out);
      assertEquals(
        [third.recap["node-1"]?.changed, third.recap["node-1"]?.failed],
        [1, 0],
        third.out,
      );
      assertEquals(third.recap["node-2"]?.failed, 1, third.out);
      assert(/node-2: skipped, not drained: stratum would refuse the migration/.test(third.out));
      // Nothing changed on node 2, so the play went on to node 3.
      assertEquals(
        [third.recap["node-3"]?.changed, third.recap["node-3"]?.failed],
        [1, 0],
        third.out,
      );
      assertEquals((await nodes[0]!.state()).node.mode, "host");
      const s2 = await nodes[1]!.state();
      assertEquals([s2.node.mode, s2.journal], ["nspawn", null]);
      assertEquals(s2.files, before2, "node 2 changed");
      assert(
        !(c.server.node("node-2")!.spec as { unschedulable?: boolean }).unschedulable,
        "node 2 was cordoned",
      );
      assertEquals((await nodes[2]!.state()).node.mode, "host");
    } finally {
      for (const n of nodes) await n[Symbol.asyncDispose]();
    }
  },
});

// Issue 38: with the old key removed, `node status` exited 3 on a node still
// running a release it signed, and upgrade.yml stopped at its first task,
// before the upgrade that moves the node to the new key.
Deno.test({
  name:
    "ansible after a key rotation: upgrade.yml moves a key-retired node to the new key's release; rollback.yml refuses the old key's kept release before the drain",
  ignore: why !== undefined,
  async fn() {
    const lines = await rotationLines();
    await using r = await Rotation.start();
    // docs/bundles.md's procedure, the old key removed before this node upgraded.
    for (const l of lines.slice(0, lines.indexOf(line(lines, "stratum node upgrade")))) {
      await r.sh(l);
    }
    await r.sh(line(lines, "rm "));
    const before = await r.n.stratum(["node", "status", "--json"]);
    assertEquals([before.code, before.doc?.outcome], [0, "key-retired"], before.stdout);
    await using c = await cluster();
    const up = await playbook([r.n], c, "host", { file: "upgrade.yml", bundles: [r.bundle2] });
    assertEquals(up.code, 0, up.out);
    assertEquals([up.recap["node-1"]?.changed, up.recap["node-1"]?.failed], [1, 0], up.out);
    assert(up.out.includes("verified by a key no longer trusted"), up.out);
    const after = await r.n.stratum(["node", "status", "--json"]);
    assertEquals([after.code, after.doc?.outcome], [0, "healthy"], after.stdout);
    assertEquals([after.doc.bundle.trusted, after.doc.running.version], [true, "2.0.0"]);
    assertEquals((await r.n.state()).journal, null, "acknowledged");
    assert(!cordoned(c, "node-1"), "node-1 left cordoned");
    // Back to release 1 would need the removed key: refused before the node is touched.
    const files = (await r.n.state()).files;
    const rb = await playbook([r.n], c, "host", {
      file: "rollback.yml",
      extra: ["stratum_from_version=2.0.0"],
    });
    assert(rb.code !== 0, rb.out);
    assertEquals(rb.recap["node-1"]?.failed, 1, rb.out);
    assert(rb.out.includes("is not signed by a key it trusts now"), rb.out);
    assertEquals((await r.n.state()).files, files, "the refused rollback changed nothing");
    assert(!cordoned(c, "node-1"), "the refused rollback cordoned node-1");
  },
});

Deno.test({
  name: "the example playbooks and inventory pass ansible-playbook --syntax-check",
  ignore: noAnsible !== undefined,
  async fn() {
    const dir = join(repoRoot, "examples/ansible");
    const o = await new Deno.Command("ansible-playbook", {
      args: [
        "--syntax-check",
        "-i",
        "inventory.example.ini",
        "migrate.yml",
        "upgrade.yml",
        "rollback.yml",
        "restart.yml",
      ],
      cwd: dir,
      env: { ANSIBLE_NOCOLOR: "1", ANSIBLE_LOCAL_TEMP: await Deno.makeTempDir() },
      stdout: "piped",
      stderr: "piped",
    }).output();
    assert(o.success, new TextDecoder().decode(o.stderr));
  },
});

/** A cluster with the three nodes and a pod to evict on each. */
function cluster(): Promise<SimCluster> {
  return SimCluster.start({
    workloads: stratumWorkloads(50),
    nodes: ["node-1", "node-2", "node-3"],
    pods: [1, 2, 3].map((i) => ({
      namespace: "default",
      name: `app-${i}`,
      node: `node-${i}`,
      owner: { kind: "ReplicaSet" as const, name: "app-5d" },
    })),
  });
}

Deno.test({
  name:
    "ansible upgrade.yml over three nodes: --check touches nothing; each upgrades once; again, nothing; a rollback stops the play",
  ignore: why !== undefined,
  async fn() {
    const nodes = [await Node.boot("host"), await Node.boot("host"), await Node.boot("host")];
    try {
      await using c = await cluster();
      const v2 = await makeBundle(await scratch("bundle-v2-"), { release: "2" });
      const bundles = [v2, v2, v2];
      // --check: the read-only tasks run, and each node says it would be upgraded.
      const before = await Promise.all(nodes.map((n) => n.state()));
      const check = await playbook(nodes, c, "host", { file: "upgrade.yml", bundles, check: true });
      assertEquals(check.code, 0, check.out);
      assertEquals((check.out.match(/would upgrade node-\d/g) ?? []).length, 3, check.out);
      for (const [i, n] of nodes.entries()) {
        assertEquals((await n.state()).files, before[i]!.files, `--check changed node-${i + 1}`);
        assert(!cordoned(c, `node-${i + 1}`), "--check cordoned a node");
      }

      const first = await playbook(nodes, c, "host", { file: "upgrade.yml", bundles });
      assertEquals(first.code, 0, first.out);
      for (const [i, n] of nodes.entries()) {
        const host = `node-${i + 1}`;
        assertEquals([first.recap[host]?.changed, first.recap[host]?.failed], [1, 0], first.out);
        const s = await n.state();
        assertEquals([s.node.mode, s.node.slot, s.journal], ["host", "b", null], host);
        assert(!cordoned(c, host), `${host} left cordoned`);
      }
      const second = await playbook(nodes, c, "host", { file: "upgrade.yml", bundles });
      assertEquals(second.code, 0, second.out);
      for (const host of ["node-1", "node-2", "node-3"]) {
        assertEquals([second.recap[host]?.changed, second.recap[host]?.failed], [0, 0], second.out);
      }

      // Release 3: node 2's never becomes healthy, so it rolls back and the play stops there.
      const v3 = await makeBundle(await scratch("bundle-v3-"), { release: "3" });
      const v3bad = await makeBundle(await scratch("bundle-v3-bad-"), {
        release: "3",
        behavior: { host: "unhealthy" },
      });
      const third = await playbook(nodes, c, "host", {
        file: "upgrade.yml",
        bundles: [v3, v3bad, v3],
        check: false,
      });
      assert(third.code !== 0, third.out);
      assertEquals([third.recap["node-1"]?.changed, third.recap["node-1"]?.failed], [1, 0]);
      assertEquals(third.recap["node-2"]?.failed, 1, third.out);
      assertEquals(third.recap["node-3"], undefined, "node 3 was touched");
      const s2 = await nodes[1]!.state();
      assertEquals([s2.node.slot, s2.active, s2.journal], ["b", { a: false, b: true }, null]);
      assert(!cordoned(c, "node-2"), "the rolled-back node is uncordoned");
    } finally {
      for (const n of nodes) await n[Symbol.asyncDispose]();
    }
  },
});

Deno.test({
  name:
    "ansible rollback.yml: the nodes that run the bad release roll back once; again, nothing; --check touches nothing",
  ignore: why !== undefined,
  async fn() {
    const nodes = [await Node.boot("host"), await Node.boot("host"), await Node.boot("host")];
    try {
      await using c = await cluster();
      const v2 = await makeBundle(await scratch("bundle-v2-"), { release: "2" });
      // Nodes 1 and 2 were upgraded to the bad release 2; node 3 never was.
      for (const n of nodes.slice(0, 2)) {
        assertEquals((await n.stratum(["node", "upgrade", "--bundle", v2])).code, 0);
        assertEquals((await n.stratum(["migrate", "ack"])).code, 0);
      }
      const extra = ["stratum_from_version=2"];
      const before = await Promise.all(nodes.map((n) => n.state()));
      const check = await playbook(nodes, c, "host", { file: "rollback.yml", check: true, extra });
      assertEquals(check.code, 0, check.out);
      assertEquals(
        (check.out.match(/would roll node-\d back from 2 to 1/g) ?? []).length,
        2,
        check.out,
      );
      for (const [i, n] of nodes.entries()) {
        assertEquals((await n.state()).files, before[i]!.files, `--check changed node-${i + 1}`);
      }
      const first = await playbook(nodes, c, "host", { file: "rollback.yml", extra });
      assertEquals(first.code, 0, first.out);
      for (const [i, host] of ["node-1", "node-2", "node-3"].entries()) {
        assertEquals(first.recap[host]?.changed, i < 2 ? 1 : 0, `${host}: ${first.out}`);
        const st = await nodes[i]!.stratum(["node", "status", "--json"]);
        assertEquals(st.doc.running.version, "1", host);
        assertEquals((await nodes[i]!.state()).journal, null, `${host}: acknowledged`);
        assert(!cordoned(c, host), `${host} left cordoned`);
      }
      const second = await playbook(nodes, c, "host", { file: "rollback.yml", extra });
      assertEquals(second.code, 0, second.out);
      for (const host of ["node-1", "node-2", "node-3"]) {
        assertEquals(second.recap[host]?.changed, 0, second.out);
      }
    } finally {
      for (const n of nodes) await n[Symbol.asyncDispose]();
    }
  },
});

Deno.test({
  name: "ansible migrate.yml --check runs status and plan, says what would change, touches nothing",
  ignore: why !== undefined,
  async fn() {
    const nodes = [await Node.boot("host")];
    try {
      await using c = await cluster();
      const before = await nodes[0]!.state();
      const r = await playbook(nodes, c, "nspawn", { check: true });
      assertEquals(r.code, 0, r.out);
      assert(/would migrate node-1 from host\s+to nspawn mode/.test(r.out), r.out);
      assertEquals((await nodes[0]!.state()).files, before.files);
      assert(!cordoned(c, "node-1"), "--check cordoned the node");
    } finally {
      for (const n of nodes) await n[Symbol.asyncDispose]();
    }
  },
});

// Issue 38: the playbooks left a node drained and cordoned when stratum
// refused and changed nothing (a downgrade, an open journal, the lock held:
// 75): upgrade.yml checked only `bundle verify` before the drain, and its
// rescue uncordoned only a rolled-back node; and `upgrade.yml --check` said
// "would upgrade" for a downgrade that would be refused.
Deno.test({
  name:
    "ansible upgrade.yml: a node stratum would refuse (a downgrade, an open journal, the lock held) is skipped with its reason and never drained; --check says so, with versions",
  ignore: why !== undefined,
  async fn() {
    const nodes = [await Node.boot("host"), await Node.boot("host"), await Node.boot("host")];
    try {
      await using c = await cluster();
      const v2 = await makeBundle(await scratch("bundle-v2-"), { release: "2" });
      const sick = await makeBundle(await scratch("bundle-v3-sick-"), {
        release: "3",
        behavior: { host: "unhealthy" },
      });
      // node-1 runs release 2 and is offered release 1: a downgrade.
      const up = await nodes[0]!.stratum(["node", "upgrade", "--bundle", v2, "--json"]);
      assertEquals([up.code, up.doc?.outcome], [0, "complete"], up.stderr);
      assertEquals((await nodes[0]!.stratum(["migrate", "ack"])).code, 0);
      // node-2: an upgrade that rolled back left its journal open (not acknowledged yet).
      const rb = await nodes[1]!.stratum([
        "node",
        "upgrade",
        "--bundle",
        sick,
        "--wait-ready",
        "3s",
      ]);
      assertEquals(rb.code, 1, rb.stderr);
      // node-3: another command holds the migration lock.
      await nodes[2]!.sb.sh(
        "mkdir -p /run/stratum && chmod 700 /run/stratum && : >> /run/stratum/migrate.lock && " +
          "(setsid flock -x /run/stratum/migrate.lock sleep 600 </dev/null >/dev/null 2>&1 &) && sleep 0.5",
      );
      const bundles = [nodes[0]!.bundle, v2, v2];
      const before = await Promise.all(nodes.map((n) => n.state()));
      const unchanged = async (label: string) => {
        for (const [i, n] of nodes.entries()) {
          const host = `node-${i + 1}`;
          const s = await n.state();
          assertEquals(s.files, before[i]!.files, `${label}: ${host} changed`);
          assertEquals([s.active, s.journal], [before[i]!.active, before[i]!.journal], host);
          assert(!cordoned(c, host), `${label}: ${host} left cordoned`);
          assert(
            c.server.podsOn(host).includes(`default/app-${i + 1}`),
            `${label}: ${host} drained`,
          );
        }
      };

      const check = await playbook(nodes, c, "host", { file: "upgrade.yml", bundles, check: true });
      assert(!/would upgrade node-/.test(check.out), check.out);
      assert(
        /node-1: skipped, not drained: stratum would refuse the upgrade from 2 to 1 \(exit 2\)/
          .test(
            check.out,
          ),
        check.out,
      );
      assert(check.out.includes("older than the 2 this node runs"), check.out);
      await unchanged("--check");

      const run = await playbook(nodes, c, "host", { file: "upgrade.yml", bundles });
      assert(run.code !== 0, run.out);
      await unchanged("the run");
      for (const host of ["node-1", "node-2", "node-3"]) {
        // Each node was reached (a refused node changed nothing, so the play went on) and
        // reported failed at the end with its reason.
        assertEquals([run.recap[host]?.changed, run.recap[host]?.failed], [0, 1], run.out);
      }
      assert(run.out.includes("older than the 2 this node runs"), run.out);
      assert(/node-2: skipped.*\(exit 2\).*journal exists/s.test(run.out), run.out);
      assert(
        /node-3: skipped.*\(exit 75\).*holds \/run\/stratum\/migrate\.lock/s.test(run.out),
        run.out,
      );
    } finally {
      for (const n of nodes) await n[Symbol.asyncDispose]();
    }
  },
});

function cordoned(c: SimCluster, host: string): boolean {
  return (c.server.node(host)!.spec as { unschedulable?: boolean }).unschedulable === true;
}

const scratch = scratchDir;
