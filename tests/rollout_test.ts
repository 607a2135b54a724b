// deno-lint-ignore-file no-console
import { join } from "node:path";
import * as kube from "../lib/kube/mod.ts";
import * as rollout from "../lib/rollout/mod.ts";
import { is } from "../lib/errors/mod.ts";
import type { Kind, WorkloadSpec } from "./support/apiserver.ts";
import { assert, assertEquals } from "./support/assert.ts";
import {
  kubectlVersions,
  noKubectl,
  processesMentioning,
  SimCluster,
  stratumWorkloads,
  userWorkloads,
} from "./support/cluster.ts";

if (noKubectl) console.error(`rollout tests through kubectl are skipped: ${noKubectl}`);
const ignore = noKubectl !== undefined;

const restartedAt = "kubectl.kubernetes.io/restartedAt";
const allTargets = [
  "daemonsets/kube-system/cilium",
  "deployments/kube-system/cilium-operator",
  "deployments/kube-system/coredns",
  "deployments/local-path-storage/local-path-provisioner",
  "deployments/stratum-dashboard/stratum-dashboard",
];

function summary(results: rollout.Result[]): string[] {
  return results.map((r) =>
    `${r.name}: ${!r.present ? "absent" : r.err ? "err" : r.warn ? "warn" : "ok"}`
  );
}

Deno.test("Workloads are exactly the seed's, in its order", () => {
  assertEquals(
    rollout.Workloads.map((w) => [w.name, w.namespace, w.probe, [...w.targets]]),
    [
      ["cilium agent + operator", "kube-system", "ds/cilium", [
        "ds/cilium",
        "deploy/cilium-operator",
      ]],
      ["coredns", "kube-system", "deploy/coredns", ["deploy/coredns"]],
      ["local-path provisioner", "local-path-storage", "deploy/local-path-provisioner", [
        "deploy/local-path-provisioner",
      ]],
      ["dashboard", "stratum-dashboard", "deploy/stratum-dashboard", ["deploy/stratum-dashboard"]],
    ],
  );
  assert(Object.isFrozen(rollout.Workloads) && Object.isFrozen(rollout.Workloads[0]!.targets));
});

Deno.test("owned() maps Deployment to deploy/ and DaemonSet to ds/, and nothing else", () => {
  assert(rollout.owned("DaemonSet", "cilium", "kube-system"));
  assert(rollout.owned("Deployment", "cilium-operator", "kube-system"));
  assert(rollout.owned("Deployment", "coredns", "kube-system"));
  assert(rollout.owned("Deployment", "local-path-provisioner", "local-path-storage"));
  assert(rollout.owned("Deployment", "stratum-dashboard", "stratum-dashboard"));
  assert(
    !rollout.owned("Deployment", "cilium", "kube-system"),
    "kind must match the target's prefix",
  );
  assert(!rollout.owned("DaemonSet", "coredns", "kube-system"));
  assert(!rollout.owned("Deployment", "coredns", "default"), "namespace must match");
  assert(!rollout.owned("StatefulSet", "coredns", "kube-system"));
  assert(!rollout.owned("DaemonSet", "cilium-envoy", "kube-system"));
  assert(!rollout.owned("Deployment", "metrics-server", "kube-system"));
});

Deno.test("restartCommands() gives one line per namespace, in first-appearance order, with the command line's flags", () => {
  assertEquals(rollout.restartCommands(), [
    "kubectl -n kube-system rollout restart ds/cilium deploy/cilium-operator deploy/coredns",
    "kubectl -n local-path-storage rollout restart deploy/local-path-provisioner",
    "kubectl -n stratum-dashboard rollout restart deploy/stratum-dashboard",
  ]);
  const commandLine = kube.commandLine({ kubeconfig: "/etc/stratum/admin conf", context: "prod" });
  assertEquals(
    rollout.restartCommands(commandLine)[0],
    "kubectl --kubeconfig '/etc/stratum/admin conf' --context prod -n kube-system rollout restart ds/cilium deploy/cilium-operator deploy/coredns",
  );
});

Deno.test("classify() tells apart what kubectl's exit code 1 lumps together", () => {
  const cases: [string, kube.Reason][] = [
    [
      `error: deployments.apps "x" can't restart paused deployment (run rollout resume first)`,
      "paused",
    ],
    ["error: rollout status is only available for RollingUpdate strategy type", "on-delete"],
    ["error: timed out waiting for the condition", "rollout-timeout"],
    [`error: deployment "x" exceeded its progress deadline`, "progress-deadline"],
    [`Error from server (NotFound): daemonsets.apps "cilium" not found`, "not-found"],
    [`Error from server (NotFound): namespaces "nons" not found`, "not-found"],
    [
      "Unable to connect to the server: tls: failed to verify certificate: x509: certificate signed by unknown authority",
      "untrusted-ca",
    ],
    ["error: You must be logged in to the server (Unauthorized)", "unauthorized"],
    [
      "The connection to the server 127.0.0.1:6443 was refused - did you specify the right host or port?",
      "other",
    ],
    [
      "Unable to connect to the server: dial tcp 127.0.0.1:1: connect: connection refused",
      "unreachable",
    ],
    [
      "Unable to connect to the server: net/http: request canceled (Client.Timeout exceeded while awaiting headers)",
      "unreachable",
    ],
    [
      "error: failed to create patch for x: if restart has already been triggered within the past second, please wait before attempting to trigger another",
      "already-restarted",
    ],
    [
      "Unable to connect to the server: getting credentials: exec: executable kubelogin not found",
      "credential-plugin",
    ],
    [
      `Error from server (Forbidden): deployments.apps "coredns" is forbidden: User "u" cannot patch resource "deployments"`,
      "forbidden",
    ],
    ["error: stat /etc/kube/config: no such file or directory", "other"],
    ['error: the server doesn\'t have a resource type "x" not found', "other"],
  ];
  for (const [stderr, reason] of cases) assertEquals(kube.classify(stderr), reason, stderr);
});

Deno.test({
  name: "core scenario on every kubectl minor on this machine",
  ignore,
  async fn(t) {
    const versions = kubectlVersions.length > 0
      ? kubectlVersions
      : [{ minor: "path", binary: "kubectl" }];
    for (const { minor, binary } of versions) {
      await t.step(
        `kubectl 1.${minor}: all present, rolled out, only Stratum's targets patched`,
        async () => {
          await using c = await SimCluster.start({
            binary,
            workloads: [...stratumWorkloads(150), ...userWorkloads],
          });
          const results = await c.roller().restart();
          assertEquals(summary(results), [
            "cilium agent + operator: ok",
            "coredns: ok",
            "local-path provisioner: ok",
            "dashboard: ok",
          ]);
          assertEquals(c.server.patched().sort(), [...allTargets].sort());
          for (const r of c.server.requests.filter((r) => r.method === "PATCH")) {
            assertEquals(r.contentType, "application/strategic-merge-patch+json");
            const ann = JSON.parse(r.body).spec.template.metadata.annotations;
            assert(!Number.isNaN(Date.parse(ann[restartedAt])), r.body);
          }
          const cilium = c.server.get("DaemonSet", "kube-system", "cilium")!;
          const tmpl = cilium.spec.template as {
            metadata: { annotations?: Record<string, string> };
          };
          assert(tmpl.metadata.annotations?.[restartedAt], "the object carries restartedAt");
        },
      );
      await t.step(
        `kubectl 1.${minor}: a rollout past its progress deadline is a warning, an absent workload is skipped`,
        async () => {
          const ws = stratumWorkloads("manual").filter((w) => w.namespace !== "stratum-dashboard");
          await using c = await SimCluster.start({ binary, workloads: ws });
          // Driven, not raced: once every restart is in, coredns's controller
          // gives up and the others finish.
          const results = await c.roller({
            onProgress: (p) => {
              if (p.kind !== "waiting") return;
              c.server.exceedDeadline("kube-system", "coredns");
              for (const w of ws) {
                if (w.name !== "coredns") c.server.complete(w.kind, w.namespace, w.name);
              }
            },
          }).restart();
          assertEquals(summary(results), [
            "cilium agent + operator: ok",
            "coredns: warn",
            "local-path provisioner: ok",
            "dashboard: absent",
          ]);
          assert(
            results[1]!.warn!.message.includes("progress deadline"),
            results[1]!.warn!.message,
          );
          assert(is(results[1]!.warn, rollout.RolloutPendingWarning));
        },
      );
    }
  },
});

Deno.test({
  name: "every presence combination of the four workloads",
  ignore,
  async fn(t) {
    const byWorkload: WorkloadSpec[][] = [
      stratumWorkloads(50).slice(0, 2),
      stratumWorkloads(50).slice(2, 3),
      stratumWorkloads(50).slice(3, 4),
      stratumWorkloads(50).slice(4, 5),
    ];
    for (let mask = 0; mask < 16; mask++) {
      const present = [0, 1, 2, 3].map((i) => (mask & (1 << i)) !== 0);
      await t.step(present.map((p) => (p ? "1" : "0")).join(""), async () => {
        await using c = await SimCluster.start({
          // A user workload keeps some namespaces around when Stratum's are absent.
          workloads: [...byWorkload.filter((_, i) => present[i]).flat(), userWorkloads[2]!],
        });
        const results = await c.roller().restart();
        assertEquals(results.map((r) => r.present), present);
        assert(results.every((r) => !r.err && !r.warn), JSON.stringify(summary(results)));
        const expected = byWorkload.filter((_, i) => present[i]).flat().map((w) =>
          `${w.kind === "DaemonSet" ? "daemonsets" : "deployments"}/${w.namespace}/${w.name}`
        );
        assertEquals(c.server.patched().sort(), expected.sort());
      });
    }
  },
});

Deno.test({
  name: "one target's restart failing is an err for that workload only",
  ignore,
  async fn() {
    await using c = await SimCluster.start({ workloads: stratumWorkloads(100) });
    c.server.faults.error500 = (r) =>
      r.method === "PATCH" && r.path.endsWith("/deployments/cilium-operator");
    const results = await c.roller().restart();
    assertEquals(summary(results), [
      "cilium agent + operator: err",
      "coredns: ok",
      "local-path provisioner: ok",
      "dashboard: ok",
    ]);
    const cilium = results[0]!;
    assert(is(cilium.err, rollout.RestartError));
    assert(cilium.err!.message.includes("deploy/cilium-operator"), cilium.err!.message);
    assertEquals(cilium.targets.map((t) => [t.target, t.state]), [
      ["ds/cilium", "rolled-out"],
      ["deploy/cilium-operator", "failed"],
    ]);
  },
});

Deno.test({
  name: "a paused Deployment is an err with the rollout resume hint",
  ignore,
  async fn() {
    const ws = stratumWorkloads(100).map((w) => w.name === "coredns" ? { ...w, paused: true } : w);
    await using c = await SimCluster.start({ workloads: ws });
    const results = await c.roller().restart();
    const err = results[1]!.err as rollout.RestartError;
    assert(err instanceof rollout.RestartError, String(err));
    assert(
      err.hint?.includes(
        `--kubeconfig ${c.kubeconfig} -n kube-system rollout resume deploy/coredns`,
      ),
      err.hint,
    );
    assertEquals(summary(results)[0], "cilium agent + operator: ok");
  },
});

Deno.test({
  name: "an OnDelete DaemonSet is a warning with pod-deletion guidance, not an err",
  ignore,
  async fn() {
    const ws = stratumWorkloads(100).map((w) => w.name === "cilium" ? { ...w, onDelete: true } : w);
    await using c = await SimCluster.start({ workloads: ws });
    const results = await c.roller().restart();
    const cilium = results[0]!;
    assert(!cilium.err && cilium.warn, JSON.stringify(summary(results)));
    assert(cilium.warn.message.includes("OnDelete"), cilium.warn.message);
    assert((cilium.warn as rollout.RolloutPendingWarning).hint?.includes("delete"));
    assert(c.server.patched().includes("daemonsets/kube-system/cilium"), "it was still patched");
  },
});

Deno.test({
  name: "a workload deleted between probe and restart is an err that says so",
  ignore,
  async fn() {
    await using c = await SimCluster.start({ workloads: stratumWorkloads(100) });
    c.server.faults.after = (r, s) => {
      if (r.method === "GET" && r.path.endsWith("/deployments/coredns")) {
        s.remove("Deployment", "kube-system", "coredns");
      }
    };
    const results = await c.roller().restart();
    assert(results[1]!.present && results[1]!.err, JSON.stringify(summary(results)));
    assert(results[1]!.err.message.includes("deleted since the probe"), results[1]!.err.message);
  },
});

Deno.test({
  name: "a probe that fails for another reason is an err and nothing of that workload is restarted",
  ignore,
  async fn() {
    await using c = await SimCluster.start({ workloads: stratumWorkloads(100) });
    c.server.faults.error500 = (r) =>
      r.method === "GET" && r.path.endsWith("/deployments/stratum-dashboard");
    const results = await c.roller().restart();
    assert(is(results[3]!.err, rollout.ProbeError), JSON.stringify(summary(results)));
    assert(!c.server.patched().some((p) => p.includes("stratum-dashboard")));
  },
});

Deno.test({
  name: "a hanging kubectl call is killed at its deadline and leaves no process behind",
  ignore,
  async fn() {
    await using c = await SimCluster.start({ workloads: stratumWorkloads(100) });
    c.server.faults.hang = () => true;
    const run = kube.kubectl(c.cfg);
    const started = performance.now();
    let caught: unknown;
    try {
      // No --request-timeout: only the runner's own kill can end this call.
      await run(["get", "ds/cilium", "-n", "kube-system", "-o", "name"], { timeout: 1500 });
    } catch (e) {
      caught = e;
    }
    const elapsed = performance.now() - started;
    assert(caught instanceof kube.ErrCallTimeout, String(caught));
    assert(caught.message.includes("get ds/cilium"), caught.message);
    // A correctness bound on the deadline, not a speed measurement: the kill
    // escalates to SIGKILL one second after SIGTERM, plus slack for a slow CI.
    assert(elapsed < 1500 + 1000 + 2500, `took ${elapsed} ms`);
    assertEquals(await processesMentioning(c.kubeconfig), []);
  },
});

Deno.test({
  name: "a rollout status whose first GET hangs is killed at the wait and reported as a warning",
  ignore,
  async fn() {
    await using c = await SimCluster.start({ workloads: stratumWorkloads(100) });
    const gets = new Map<string, number>();
    c.server.faults.hang = (r) => {
      if (r.method !== "GET" || !r.path.endsWith("/deployments/coredns")) return false;
      const n = (gets.get(r.path) ?? 0) + 1;
      gets.set(r.path, n);
      return n >= 3; // probe, restart's GET, then rollout status's GET hangs
    };
    const results = await c.roller({ wait: 2000 }).restart();
    assertEquals(summary(results)[1], "coredns: warn");
    assert(is(results[1]!.warn, rollout.RolloutPendingWarning));
    assertEquals(await processesMentioning(c.kubeconfig), []);
  },
});

Deno.test({
  name: "N stalled rollouts end in about the total wait, not N times it",
  ignore,
  async fn() {
    await using c = await SimCluster.start({ workloads: stratumWorkloads("never") });
    const wait = 3000;
    const started = performance.now();
    const results = await c.roller({ wait }).restart();
    const elapsed = performance.now() - started;
    assert(results.every((r) => r.warn && !r.err), JSON.stringify(summary(results)));
    // Five targets stall. Waiting in turn would take 5 × wait; one total
    // deadline takes wait plus the probes and restarts (bound generous for CI).
    assert(elapsed < 2 * wait, `took ${elapsed} ms for a ${wait} ms wait`);
  },
});

Deno.test({
  name: "an apiserver certificate the kubeconfig's CA does not sign is an err that says so",
  ignore: ignore || !hasOpenssl(),
  async fn() {
    const { ApiServer } = await import("./support/apiserver.ts");
    const dir = await Deno.makeTempDir({ prefix: "stratum-tls-" });
    const gen = (name: string) =>
      new Deno.Command("openssl", {
        args: [
          "req",
          "-x509",
          "-newkey",
          "rsa:2048",
          "-nodes",
          "-days",
          "1",
          "-subj",
          "/CN=127.0.0.1",
          "-addext",
          "subjectAltName=IP:127.0.0.1",
          "-keyout",
          `${dir}/${name}.key`,
          "-out",
          `${dir}/${name}.crt`,
        ],
        stdout: "null",
        stderr: "null",
      }).output();
    await gen("served");
    await gen("rotated");
    const server = await ApiServer.start({ workloads: stratumWorkloads(100) });
    // A TLS front for the simulated server, with a certificate the kubeconfig does not trust.
    const front = Deno.serve({
      hostname: "127.0.0.1",
      port: 0,
      cert: await Deno.readTextFile(`${dir}/served.crt`),
      key: await Deno.readTextFile(`${dir}/served.key`),
      onListen: () => {},
    }, (req) => fetch(server.url + new URL(req.url).pathname + new URL(req.url).search, req));
    try {
      const ca = btoa(await Deno.readTextFile(`${dir}/rotated.crt`));
      const kc = `${dir}/kubeconfig`;
      await Deno.writeTextFile(
        kc,
        `apiVersion: v1
kind: Config
clusters: [{name: c, cluster: {server: "https://127.0.0.1:${front.addr.port}", certificate-authority-data: ${ca}}}]
users: [{name: u, user: {token: not-a-secret}}]
contexts: [{name: x, context: {cluster: c, user: u}}]
current-context: x
`,
      );
      const cfg = {
        kubeconfig: kc,
        env: { KUBECACHEDIR: `${dir}/cache` },
        binary: (await import("./support/cluster.ts")).defaultKubectl,
      };
      const results = await new rollout.Roller({
        kubectl: kube.kubectl(cfg),
        commandLine: kube.commandLine(cfg),
        callTimeout: 10_000,
        wait: 5000,
      })
        .restart();
      for (const r of results) {
        assert(is(r.err, rollout.ProbeError), `${r.name}: ${r.err}`);
        assert(
          (r.err as rollout.ProbeError).hint?.includes("CA"),
          `${r.err?.message} / ${(r.err as rollout.ProbeError).hint}`,
        );
      }
      assertEquals(server.patched(), []);
    } finally {
      await front.shutdown();
      await server.close();
    }
  },
});

if (!noKubectl && !kubectlVersions.some((v) => v.minor === "33")) {
  console.error(
    "the watch-list test is skipped: kubectl 1.33 is not on this machine (/usr/lib/google-cloud-sdk/bin/kubectl.1.33)",
  );
}

Deno.test({
  name: "a newer kubectl's watch-list request gets the initial-events bookmark",
  ignore: ignore || !kubectlVersions.some((v) => v.minor === "33"),
  async fn() {
    // kubectl ≥ 1.35 sends watch-list by default; 1.33 does with the feature gate on.
    const binary = kubectlVersions.find((v) => v.minor === "33")!.binary;
    await using c = await SimCluster.start({
      binary,
      workloads: stratumWorkloads(200),
      env: { KUBE_FEATURE_WatchListClient: "true" },
    });
    const results = await c.roller({ wait: 10_000 }).restart();
    assert(results.every((r) => !r.err && !r.warn), JSON.stringify(summary(results)));
    assert(
      c.server.requests.some((r) => r.query.sendInitialEvents === "true"),
      "no watch-list request was made",
    );
  },
});

function hasOpenssl(): boolean {
  try {
    return new Deno.Command("openssl", { args: ["version"], stdout: "null" }).outputSync().success;
  } catch {
    return false;
  }
}

export type { Kind };

Deno.test({
  name: "a watch that stalls (opens, never sends an event) ends as a warning at the wait",
  ignore,
  async fn() {
    // Long enough that kubectl still needs the watch after its first list.
    await using c = await SimCluster.start({ workloads: stratumWorkloads(1000) });
    c.server.faults.stallWatch = (r) => r.path.endsWith("/daemonsets");
    const results = await c.roller({ wait: 3000 }).restart();
    assertEquals(summary(results), [
      "cilium agent + operator: warn",
      "coredns: ok",
      "local-path provisioner: ok",
      "dashboard: ok",
    ]);
    assert(results[0]!.warn!.message.includes("ds/cilium"), results[0]!.warn!.message);
    assert(
      c.server.requests.some((r) => r.query.watch === "true" && r.path.endsWith("/daemonsets")),
    );
  },
});

/** A kubectl that records how long each call took, by its first two args. */
function timed(run: kube.Kubectl, log: { args: string; ms: number }[]): kube.Kubectl {
  return async (args, opts) => {
    const started = performance.now();
    try {
      return await run(args, opts);
    } finally {
      log.push({ args: args.join(" "), ms: performance.now() - started });
    }
  };
}

for (const which of ["probe", "restart"] as const) {
  Deno.test({
    name:
      `a hung ${which} call is killed within its call timeout plus the kill grace, an err for that workload only`,
    ignore,
    async fn() {
      await using c = await SimCluster.start({ workloads: stratumWorkloads(50) });
      c.server.faults.hang = (r) =>
        r.path.endsWith("/deployments/coredns") &&
        (which === "probe" ? r.method === "GET" : r.method === "PATCH");
      const log: { args: string; ms: number }[] = [];
      const callTimeout = 1500;
      const results = await new rollout.Roller({
        kubectl: timed(kube.kubectl(c.cfg), log),
        commandLine: kube.commandLine(c.cfg),
        callTimeout,
        wait: 20_000,
      }).restart();
      assertEquals(summary(results), [
        "cilium agent + operator: ok",
        "coredns: err",
        "local-path provisioner: ok",
        "dashboard: ok",
      ]);
      const err = results[1]!.err as rollout.ProbeError | rollout.RestartError;
      assert(
        is(err, which === "probe" ? rollout.ProbeError : rollout.RestartError),
        String(err),
      );
      // What the operator reads: the call that hung, its deadline, and the
      // call-timeout remedy (not "the apiserver could not be reached").
      assert(err.cause instanceof kube.ErrCallTimeout, String(err.cause));
      assert(err.message.includes("no answer after 1500ms, killed"), err.message);
      assert(err.hint?.includes("--call-timeout"), err.hint);
      const call = log.find((l) =>
        l.args.startsWith(
          which === "probe" ? "get deploy/coredns" : "rollout restart deploy/coredns",
        )
      )!;
      // The deadline is the contract: the call timeout, then SIGTERM's grace
      // before SIGKILL, plus 1 s of slack — below dax's own 4.5 s backstop,
      // so losing the per-call kill fails this.
      const bound = callTimeout + 1000 + 1000;
      assert(call.ms < bound, `${call.args} took ${Math.round(call.ms)} ms (bound ${bound})`);
      assertEquals(await processesMentioning(c.kubeconfig), []);
    },
  });
}

Deno.test({
  name: "a restart refused as within the same second is retried once, after the second has passed",
  ignore,
  async fn() {
    await using c = await SimCluster.start({ workloads: stratumWorkloads(50) });
    let gets = 0;
    c.server.faults.before = async (r, s) => {
      if (r.method !== "GET" || !r.path.endsWith("/deployments/coredns")) return;
      if (++gets !== 2) return; // the probe's GET is the first, the restart's the second
      // Stamp restartedAt with the current second, as a restart a moment ago
      // would have; kubectl then computes an empty patch and refuses. Keep
      // clear of a second boundary so kubectl sees the same second.
      if (Date.now() % 1000 > 700) {
        await new Promise((res) => setTimeout(res, 1010 - Date.now() % 1000));
      }
      const obj = s.get("Deployment", "kube-system", "coredns")!;
      const tmpl = obj.spec.template as { metadata: { annotations?: Record<string, string> } };
      tmpl.metadata.annotations = {
        [restartedAt]: new Date().toISOString().replace(/\.\d+Z$/, "Z"),
      };
    };
    const results = await c.roller().restart();
    assertEquals(summary(results)[1], "coredns: ok");
    const corednsPatches = c.server.patched().filter((p) => p.endsWith("/coredns"));
    assertEquals(corednsPatches.length, 1, "the first attempt sends no patch; the retry does");
    assert(gets >= 3, `the restart was not retried (${gets} GETs)`);
  },
});

Deno.test({
  name:
    "progress: a probe, a restart and a failed restart each reported; waiting only when something rolls",
  ignore,
  async fn() {
    await using c = await SimCluster.start({ workloads: stratumWorkloads("manual").slice(0, 3) });
    c.server.faults.error500 = (r) =>
      r.method === "PATCH" && r.path.endsWith("/deployments/coredns");
    const events: rollout.Progress[] = [];
    await c.roller({
      onProgress: (p) => {
        events.push(p);
        if (p.kind !== "waiting") return;
        // Driven: the DaemonSet finishes, the operator's Deployment gives up.
        c.server.complete("DaemonSet", "kube-system", "cilium");
        c.server.exceedDeadline("kube-system", "cilium-operator");
      },
    }).restart();
    const targetsOf = (k: string) =>
      events.flatMap((e) => (e.kind === k && "target" in e ? [e.target] : []));
    assertEquals(targetsOf("rolled-out"), ["ds/cilium"]);
    assertEquals(targetsOf("pending"), ["deploy/cilium-operator"]);
    const kinds = (k: string) => events.filter((e) => e.kind === k);
    assertEquals(kinds("probed").length, 4);
    assertEquals(
      kinds("restarted").map((e) => (e as { target: string }).target).sort(),
      ["deploy/cilium-operator", "ds/cilium"],
    );
    assertEquals(kinds("restart-failed").map((e) => (e as { target: string }).target), [
      "deploy/coredns",
    ]);
    const waiting = events.flatMap((e) => (e.kind === "waiting" ? [[...e.targets].sort()] : []));
    assertEquals(waiting, [["deploy/cilium-operator", "ds/cilium"]]);
    // A failed restart is not retried unless kubectl refused it as within the same second.
    assertEquals(
      c.server.requests.filter((r) => r.method === "PATCH" && r.path.endsWith("/coredns")).length,
      1,
    );
  },
});

Deno.test({
  name: "progress: one target present is waited for; none present, nothing is",
  ignore,
  async fn() {
    await using c = await SimCluster.start({ workloads: stratumWorkloads(50).slice(2, 3) });
    const events: rollout.Progress[] = [];
    await c.roller({ onProgress: (p) => events.push(p) }).restart();
    assertEquals(
      events.flatMap((e) => (e.kind === "waiting" ? [[...e.targets]] : [])),
      [["deploy/coredns"]],
    );
    await using empty = await SimCluster.start({ workloads: [] });
    const none: rollout.Progress[] = [];
    await empty.roller({ onProgress: (p) => none.push(p) }).restart();
    assertEquals(none.filter((e) => e.kind === "waiting"), []);
  },
});

Deno.test({
  name: "an interrupt during a hung restart: that target not restarted, rolled ones restarted",
  ignore,
  async fn() {
    await using c = await SimCluster.start({ workloads: stratumWorkloads("never") });
    c.server.faults.hang = (r) => r.method === "PATCH" && r.path.endsWith("/deployments/coredns");
    const stop = new AbortController();
    const results = await c.roller({
      signal: stop.signal,
      onProgress: (p) => {
        // Every other restart is in and being watched: interrupt now.
        if (p.kind === "restarted" && p.target === "deploy/stratum-dashboard") {
          setTimeout(() => stop.abort(), 300);
        }
      },
    }).restart();
    const coredns = results[1]!.targets[0]!;
    assertEquals(coredns.state, "interrupted");
    assert(
      coredns.error instanceof rollout.InterruptedError && !coredns.error.restarted,
      String(coredns.error),
    );
    // The PATCH may have reached the apiserver before the kill: the operator
    // is told so, and the killed kubectl call is the cause.
    assert(
      coredns.error.message.includes("restart stopped; it may or may not have been applied"),
      coredns.error.message,
    );
    assert(coredns.error.cause instanceof kube.ErrCallInterrupted, String(coredns.error.cause));
    for (const r of [results[0]!, results[2]!, results[3]!]) {
      for (const t of r.targets) {
        assertEquals(t.state, "interrupted", t.target);
        assert(t.error instanceof rollout.InterruptedError && t.error.restarted, t.target);
      }
    }
    assertEquals(await processesMentioning(c.kubeconfig), []);
  },
});

Deno.test({
  name: "an interrupt during the same-second pause: not restarted, and no retry is sent",
  ignore,
  async fn() {
    await using c = await SimCluster.start({ workloads: stratumWorkloads(50).slice(2, 3) });
    const stop = new AbortController();
    let gets = 0;
    c.server.faults.before = async (r, s) => {
      if (r.method !== "GET" || !r.path.endsWith("/deployments/coredns")) return;
      if (++gets !== 2) return;
      if (Date.now() % 1000 > 700) {
        await new Promise((res) => setTimeout(res, 1010 - Date.now() % 1000));
      }
      const obj = s.get("Deployment", "kube-system", "coredns")!;
      const tmpl = obj.spec.template as { metadata: { annotations?: Record<string, string> } };
      tmpl.metadata.annotations = {
        [restartedAt]: new Date().toISOString().replace(/\.\d+Z$/, "Z"),
      };
      // Interrupt while the roller waits out the second (1.1 s).
      setTimeout(() => stop.abort(), 400);
    };
    const results = await c.roller({ signal: stop.signal }).restart();
    const t = results[1]!.targets[0]!;
    assertEquals(t.state, "interrupted");
    assert(t.error!.message.includes("not restarted"), t.error!.message);
    assertEquals(gets, 2, "a retry was sent after the interrupt");
  },
});

Deno.test("formatMs and durationFlag: what kubectl's --timeout and the messages show", () => {
  const cases: [number, string][] = [
    [0, "0ms"],
    [999, "999ms"],
    [1000, "1s"],
    [1500, "1500ms"],
    [30_000, "30s"],
    [59_000, "59s"],
    [60_000, "1m0s"],
    [61_000, "1m1s"],
    [300_000, "5m0s"],
  ];
  for (const [ms, text] of cases) assertEquals(kube.formatMs(ms), text, String(ms));
  assertEquals(kube.durationFlag(0.2), "1ms", "a flag is never zero");
  assertEquals(kube.durationFlag(1999.2), "2s", "rounded up to whole ms, then shown in seconds");
});

Deno.test("KubectlError names kubectl's own error line, else the last line, else the exit code", () => {
  const withAdvice = new kube.KubectlError(
    "kubectl get x",
    1,
    "E1130 memcache.go: noise\nUnable to connect to the server: getting credentials: exec: boom\n\nTo learn more, consult https://example.invalid/docs\n",
  );
  assert(
    withAdvice.message.endsWith("Unable to connect to the server: getting credentials: exec: boom"),
  );
  const plain = new kube.KubectlError("kubectl get x", 1, "first\nsecond line\n");
  assert(plain.message.endsWith(": second line"), plain.message);
  const silent = new kube.KubectlError("kubectl get x", 137, "");
  assert(silent.message.endsWith("exit code 137 (killed by signal 9)"), silent.message);
});

Deno.test("the kubectl runner returns stdout alone, or both streams interleaved when combined", async () => {
  const dir = await Deno.makeTempDir();
  const fake = join(dir, "prints-both");
  await Deno.writeTextFile(fake, "#!/bin/sh\necho out\necho err >&2\n", { mode: 0o755 });
  const run = kube.kubectl({ binary: fake });
  assertEquals((await run([], { timeout: 5000 })).trim(), "out");
  const both = await run([], { timeout: 5000, combined: true });
  assertEquals(both.trim().split("\n").sort(), ["err", "out"]);
});
