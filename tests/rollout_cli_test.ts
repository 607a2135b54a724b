import * as rollout from "../lib/rollout/mod.ts";
import { assert, assertEquals } from "./support/assert.ts";
import { stratum } from "./support/cli.ts";
import { defaultKubectl, noKubectl, SimCluster, stratumWorkloads } from "./support/cluster.ts";

const ignore = noKubectl !== undefined;

function connArgs(c: SimCluster): string[] {
  return ["--kubeconfig", c.kubeconfig, "--kubectl", defaultKubectl];
}

Deno.test({
  name: "rollout restart --json: one result per workload, exit 0",
  ignore,
  async fn() {
    await using c = await SimCluster.start({ workloads: stratumWorkloads(100).slice(0, 3) });
    const r = await stratum(
      ["rollout", "restart", "--json", "--wait", "20s", ...connArgs(c)],
      c.cliEnv(),
    );
    assertEquals(r.code, 0, r.stderr);
    const doc = JSON.parse(r.stdout);
    assertEquals(doc.outcome, "ok");
    assertEquals(doc.results.map((x: { name: string; status: string }) => [x.name, x.status]), [
      ["cilium agent + operator", "ok"],
      ["coredns", "ok"],
      ["local-path provisioner", "skipped"],
      ["dashboard", "skipped"],
    ]);
    assertEquals(doc.commands, []);
    assert(r.stderr.includes("coredns: present"), "progress goes to stderr");
  },
});

Deno.test({
  name: "rollout restart: a failed restart exits 1 and says what to do",
  ignore,
  async fn() {
    await using c = await SimCluster.start({ workloads: stratumWorkloads(100) });
    c.server.faults.error500 = (q) =>
      q.method === "PATCH" && q.path.endsWith("/deployments/coredns");
    const r = await stratum(["rollout", "restart", "--json", ...connArgs(c)], c.cliEnv());
    assertEquals(r.code, 1, r.stderr);
    const doc = JSON.parse(r.stdout);
    assertEquals(doc.outcome, "failed");
    assertEquals(doc.results[1].status, "error");
    assert(doc.results[1].error.includes("deploy/coredns"));
    assertEquals(doc.commands.length, 1, "only the failed target is to be restarted again");
    assert(doc.nextAction.includes("repeat"));
  },
});

Deno.test("rollout restart: bad flags exit 2 with a one-line error and touch nothing", async (t) => {
  for (
    const args of [
      ["--wait", "banana"],
      ["--wait", "-5s"],
      ["--wait", "0s"],
      ["--call-timeout", "10"],
      ["--no-such-flag"],
      ["--kubeconfig", ""],
    ]
  ) {
    await t.step(args.join(" "), async () => {
      // Any kubectl call would fail loudly against this address.
      const r = await stratum(["rollout", "restart", ...args], { KUBECONFIG: "/nonexistent" });
      assertEquals(r.code, 2, r.stderr);
      assertEquals(r.stderr.trim().split("\n").length, 1, r.stderr);
      assert(r.stderr.startsWith("stratum: "), r.stderr);
      assertEquals(r.stdout, "");
    });
  }
});

Deno.test("rollout commands: the restartCommands lines, with the tool's --kubeconfig and --context", async () => {
  const r = await stratum([
    "rollout",
    "commands",
    "--kubeconfig",
    "/etc/stratum/admin.conf",
    "--context",
    "prod",
  ]);
  assertEquals(r.code, 0);
  assertEquals(
    r.stdout.trim().split("\n"),
    rollout.restartCommands((a) =>
      `kubectl --kubeconfig /etc/stratum/admin.conf --context prod ${a}`
    ),
  );
  const j = await stratum(["rollout", "commands", "--json"]);
  assertEquals(JSON.parse(j.stdout).commands, rollout.restartCommands());
});

Deno.test("rollout list --json is the Workloads", async () => {
  const r = await stratum(["rollout", "list", "--json"]);
  assertEquals(r.code, 0);
  assertEquals(JSON.parse(r.stdout).workloads, JSON.parse(JSON.stringify(rollout.Workloads)));
});

Deno.test("rollout owned: exit 0 when owned, 1 when not, 2 without -n", async () => {
  assertEquals(
    (await stratum(["rollout", "owned", "DaemonSet", "cilium", "-n", "kube-system"])).code,
    0,
  );
  assertEquals(
    (await stratum(["rollout", "owned", "Deployment", "my-app", "-n", "kube-system"])).code,
    1,
  );
  const j = await stratum([
    "rollout",
    "owned",
    "Deployment",
    "coredns",
    "-n",
    "kube-system",
    "--json",
  ]);
  assertEquals(JSON.parse(j.stdout).owned, true);
  assertEquals((await stratum(["rollout", "owned", "Deployment", "coredns"])).code, 2);
});

Deno.test("docs/snapshot-restore.md shows exactly the restartCommands lines", async () => {
  const doc = await Deno.readTextFile(new URL("../docs/snapshot-restore.md", import.meta.url));
  const block =
    /<!-- restart-commands:begin -->\s*```sh\n([\s\S]*?)```\s*<!-- restart-commands:end -->/.exec(
      doc,
    );
  assert(block, "the doc has no restart-commands block");
  assertEquals(
    block[1]!.trim().split("\n"),
    rollout.restartCommands(),
    "regenerate the block from `stratum rollout commands`",
  );
});
