// Rollout tells the operator what is really wrong, against the simulated API
// server with the real kubectl. Invariants: absence is decided only from a
// clean, empty `get --ignore-not-found` (no failure ever reads as "not
// installed", so a run never reports success having restarted nothing); each
// reason has its own hint; the by-hand guidance names only what needs it and
// reaches the same apiserver; SIGINT/SIGTERM kill every kubectl call, print the
// report so far and exit 130/143; nothing outlives a killed stratum.
// deno-lint-ignore-file no-console

import * as kube from "../lib/kube/mod.ts";
import * as rollout from "../lib/rollout/mod.ts";
import { is } from "../lib/errors/mod.ts";
import { ApiServer } from "./support/apiserver.ts";
import { assert, assertEquals } from "./support/assert.ts";
import { stratum } from "./support/cli.ts";
import { stratumArgv, stratumEnv } from "./support/stratum_bin.ts";
import {
  defaultKubectl,
  noKubectl,
  processesMentioning,
  SimCluster,
  stratumWorkloads,
} from "./support/cluster.ts";
import { makeTestCA, noOpenssl } from "./support/tls.ts";

if (noKubectl) console.error(`rollout truth tests are skipped: ${noKubectl}`);
const ignore = noKubectl !== undefined;

function hintsOf(e: Error | undefined): string[] {
  return e
    ? [e, ...(e instanceof AggregateError ? e.errors : [])].flatMap((x) =>
      x instanceof rollout.HintedError && x.hint ? [x.hint] : []
    )
    : [];
}

/** An https apiserver with a test CA, and a kubeconfig whose user is `user`. */
async function tlsCluster(user: string) {
  const dir = await Deno.makeTempDir({ prefix: "stratum-tls-" });
  const tls = await makeTestCA(dir);
  const server = await ApiServer.start({ tls, workloads: stratumWorkloads(50) });
  const kubeconfig = await server.writeKubeconfig(dir, { user });
  const cfg: kube.Config = {
    binary: defaultKubectl,
    kubeconfig,
    env: { KUBECACHEDIR: `${dir}/cache`, PATH: `${dir}/bin:/usr/bin:/bin` },
  };
  return {
    dir,
    server,
    cfg,
    roller: () =>
      new rollout.Roller({
        kubectl: kube.kubectl(cfg),
        commandLine: kube.commandLine(cfg),
        callTimeout: 10_000,
        wait: 10_000,
      }),
    async [Symbol.asyncDispose]() {
      await server.close();
      await Deno.remove(dir, { recursive: true });
    },
  };
}

const execUser =
  "{exec: {apiVersion: client.authentication.k8s.io/v1, command: stratum-test-login, interactiveMode: Never}}";

Deno.test({
  name: "a missing exec credential plugin is an error for every workload, never 'not installed'",
  ignore: ignore || noOpenssl !== undefined,
  async fn(t) {
    await using c = await tlsCluster(execUser);
    await t.step(
      "control: with the plugin on PATH, every workload is found and restarted",
      async () => {
        await Deno.mkdir(`${c.dir}/bin`);
        await Deno.writeTextFile(
          `${c.dir}/bin/stratum-test-login`,
          `#!/bin/sh\necho '{"apiVersion":"client.authentication.k8s.io/v1","kind":"ExecCredential","status":{"token":"t"}}'\n`,
          { mode: 0o755 },
        );
        const results = await c.roller().restart();
        assertEquals(results.map((r) => [r.present, !!r.err]), Workloads4([true, false]));
        await Deno.remove(`${c.dir}/bin`, { recursive: true });
      },
    );
    await t.step(
      "without it: err with the plugin hint, nothing patched, nothing 'absent'",
      async () => {
        const before = c.server.patched().length;
        const results = await c.roller().restart();
        for (const r of results) {
          assert(r.present, `${r.name} reported absent`);
          assert(is(r.err, rollout.ProbeError), `${r.name}: ${r.err}`);
          assert(r.err!.message.includes("stratum-test-login"), r.err!.message);
          assert(hintsOf(r.err).some((h) => h.includes("plugin")), hintsOf(r.err).join());
        }
        assertEquals(c.server.patched().length, before);
      },
    );
  },
});

function Workloads4<T>(v: T): T[] {
  return rollout.Workloads.map(() => v);
}

Deno.test({
  name: "a kubeconfig that does not exist is an error, not absence",
  ignore,
  async fn() {
    await using c = await SimCluster.start({ workloads: stratumWorkloads(50) });
    const cfg = { ...c.cfg, kubeconfig: `${c.dir}/no-such-kubeconfig` };
    const results = await new rollout.Roller({
      kubectl: kube.kubectl(cfg),
      commandLine: kube.commandLine(cfg),
      callTimeout: 10_000,
      wait: 10_000,
    }).restart();
    assert(
      results.every((r) => r.present && is(r.err, rollout.ProbeError)),
      String(results[0]!.err),
    );
    // The CLI says "cannot tell" as null, never present beside the error.
    const r = await stratum([
      "rollout",
      "restart",
      "--kubeconfig",
      cfg.kubeconfig,
      "--kubectl",
      c.cfg.binary ?? "kubectl",
      "--json",
    ], c.cliEnv());
    assertEquals(r.code, 1, r.stderr);
    const doc = JSON.parse(r.stdout);
    assertEquals(doc.results.map((x: { present: unknown }) => x.present), Workloads4(null));
    assertEquals(doc.results.map((x: { status: string }) => x.status), Workloads4("error"));
  },
});

Deno.test({
  name:
    "403 Forbidden is RBAC's own reason, with an auth can-i hint for the verb and the same kubeconfig",
  ignore: ignore || noOpenssl !== undefined,
  async fn() {
    await using c = await tlsCluster("{token: not-a-secret}");
    c.server.faults.forbidden = (r) =>
      (r.method === "GET" && r.path.endsWith("/daemonsets/cilium")) ||
      (r.method === "PATCH" && r.path.endsWith("/deployments/coredns"));
    const results = await c.roller().restart();
    const k = `--kubeconfig ${c.cfg.kubeconfig}`;
    assert(is(results[0]!.err, rollout.ProbeError), String(results[0]!.err));
    assertEquals(hintsOf(results[0]!.err).filter((h) => h.includes("auth can-i")).length, 1);
    assert(
      hintsOf(results[0]!.err)[0]!.endsWith(
        `kubectl ${k} auth can-i get daemonsets.apps -n kube-system`,
      ),
      hintsOf(results[0]!.err)[0],
    );
    assert(is(results[1]!.err, rollout.RestartError), String(results[1]!.err));
    const h = hintsOf(results[1]!.err).join(" ");
    assert(h.includes(`kubectl ${k} auth can-i patch deployments.apps -n kube-system`), h);
    assert(!h.includes("refresh the kubeconfig"), "403 must not get the 401 advice");
    assert(!results[2]!.err && !results[3]!.err);
  },
});

Deno.test({
  name:
    "missing kubectl, a kubectl that cannot start, and a timeout are three reasons with three hints",
  ignore,
  async fn() {
    await using c = await SimCluster.start({ workloads: stratumWorkloads(50) });
    const notProgram = `${c.dir}/kubectl-not-a-program`;
    await Deno.writeTextFile(notProgram, "not a program\n");
    const firstHint = async (binary: string, callTimeout = 10_000) => {
      const cfg = { ...c.cfg, binary };
      const results = await new rollout.Roller({
        kubectl: kube.kubectl(cfg),
        commandLine: kube.commandLine(cfg),
        callTimeout,
        wait: 5_000,
      }).restart();
      assert(results.every((r) => is(r.err, rollout.ProbeError)), String(results[0]!.err));
      return { message: results[0]!.err!.message, hint: hintsOf(results[0]!.err)[0] ?? "" };
    };
    const missing = await firstHint(`${c.dir}/no-such-kubectl`);
    const cannot = await firstHint(notProgram);
    c.server.faults.hang = () => true;
    const timeout = await firstHint(defaultKubectl, 1500);
    assert(missing.message.includes("not found"), missing.message);
    assert(missing.hint.includes("not installed"), missing.hint);
    assert(cannot.message.includes("cannot be executed"), cannot.message);
    assert(cannot.hint.includes("cannot be executed"), cannot.hint);
    assert(/no answer|timeout|Timeout/.test(timeout.message), timeout.message);
    assert(!/not installed|cannot be executed/.test(timeout.hint), timeout.hint);
    assertEquals(new Set([missing.hint, cannot.hint, timeout.hint]).size, 3);
  },
});

Deno.test({
  name: "CLI: warnings alone point at rollout status, with no restart commands",
  ignore,
  async fn() {
    await using c = await SimCluster.start({ workloads: stratumWorkloads("manual") });
    // The controllers are driven, not raced: the test ends coredns's rollout
    // with a progress-deadline failure and finishes the others.
    c.server.faults.after = (r, s) => {
      if (r.method === "PATCH" && r.path.endsWith("/deployments/coredns")) {
        s.exceedDeadline("kube-system", "coredns");
      } else if (r.method === "PATCH") {
        const [, ns, res, name] = r.path.match(/namespaces\/([^/]+)\/([^/]+)\/([^/]+)$/)!;
        s.complete(res === "daemonsets" ? "DaemonSet" : "Deployment", ns!, name!);
      }
    };
    const r = await stratum(
      ["rollout", "restart", "--json", "--kubeconfig", c.kubeconfig, "--kubectl", defaultKubectl],
      c.cliEnv(),
    );
    assertEquals(r.code, 0, r.stderr);
    const doc = JSON.parse(r.stdout);
    assertEquals(doc.outcome, "warnings");
    assertEquals(doc.commands, []);
    assert(!doc.nextAction.includes("commands shown"), doc.nextAction);
    assert(doc.nextAction.includes("rollout status"), doc.nextAction);
    assert(
      doc.hints.includes(
        `kubectl --kubeconfig ${c.kubeconfig} -n kube-system rollout status deploy/coredns`,
      ),
      JSON.stringify(doc.hints),
    );
  },
});

Deno.test({
  name:
    "CLI: a failed restart lists a restart command for that target only, none for absent workloads",
  ignore,
  async fn() {
    await using c = await SimCluster.start({ workloads: stratumWorkloads(50).slice(0, 3) });
    c.server.faults.error500 = (q) =>
      q.method === "PATCH" && q.path.endsWith("/deployments/coredns");
    const r = await stratum(
      ["rollout", "restart", "--json", "--kubeconfig", c.kubeconfig, "--kubectl", defaultKubectl],
      c.cliEnv(),
    );
    assertEquals(r.code, 1, r.stderr);
    const doc = JSON.parse(r.stdout);
    assertEquals(doc.outcome, "failed");
    assertEquals(doc.commands, [
      `kubectl --kubeconfig ${c.kubeconfig} -n kube-system rollout restart deploy/coredns`,
    ]);
  },
});

Deno.test({
  name: "CLI: with KUBECONFIG in the environment and no flag, hints and commands carry it",
  ignore,
  async fn() {
    await using c = await SimCluster.start({ workloads: stratumWorkloads(50) });
    c.server.faults.error500 = (q) =>
      q.method === "PATCH" && q.path.endsWith("/deployments/coredns");
    const r = await stratum(
      ["rollout", "restart", "--json", "--kubectl", defaultKubectl],
      { ...c.cliEnv(), KUBECONFIG: c.kubeconfig },
    );
    assertEquals(r.code, 1, r.stderr);
    const doc = JSON.parse(r.stdout);
    assertEquals(doc.commands, [
      `KUBECONFIG=${c.kubeconfig} kubectl -n kube-system rollout restart deploy/coredns`,
    ]);
    const c2 = await stratum(["rollout", "commands"], { KUBECONFIG: "/etc/a b:/etc/c" });
    assert(c2.stdout.startsWith("KUBECONFIG='/etc/a b:/etc/c' kubectl -n kube-system"), c2.stdout);
  },
});

/** Starts `stratum rollout restart --json` against `c` and resolves once it waits for rollouts. */
async function startWaiting(c: SimCluster) {
  const [program, ...args] = stratumArgv([
    "rollout",
    "restart",
    "--json",
    "--wait",
    "5m",
    "--kubeconfig",
    c.kubeconfig,
    "--kubectl",
    defaultKubectl,
  ]);
  const child = new Deno.Command(program!, {
    args,
    env: { NO_COLOR: "1", ...stratumEnv(), ...c.cliEnv() },
    stdin: "null",
    stdout: "piped",
    stderr: "piped",
  }).spawn();
  const stdout = new Response(child.stdout).text();
  let stderr = "";
  const reader = child.stderr.pipeThrough(new TextDecoderStream()).getReader();
  while (!stderr.includes("waiting up to")) {
    const { value, done } = await reader.read();
    if (done) throw new Error(`stratum ended before waiting: ${stderr}`);
    stderr += value;
  }
  // Every rollout status call is running once kubectl has opened its watches.
  const watching = () => c.server.requests.filter((r) => r.query.watch === "true").length >= 5;
  for (const started = performance.now(); !watching();) {
    if (performance.now() - started > 30_000) throw new Error("the watches never opened");
    await new Promise((r) => setTimeout(r, 50));
  }
  const rest = (async () => {
    for (;;) {
      const { value, done } = await reader.read();
      if (done) return stderr;
      stderr += value;
    }
  })();
  return { child, stdout, stderr: rest };
}

for (const [signal, code] of [["SIGTERM", 143], ["SIGINT", 130]] as const) {
  Deno.test({
    name:
      `CLI: ${signal} while waiting kills every kubectl, prints the report so far, exits ${code}`,
    ignore,
    async fn() {
      await using c = await SimCluster.start({ workloads: stratumWorkloads("never") });
      const run = await startWaiting(c);
      const before = await processesMentioning(c.kubeconfig);
      // stratum itself and five rollout status calls (each a timeout + sh + kubectl).
      assert(before.filter((l) => / rollout status /.test(l)).length >= 5, before.join("\n"));
      run.child.kill(signal);
      // A stratum that ignores the signal would wait out --wait (5 minutes): stop it at 30 s.
      const guard = setTimeout(() => run.child.kill("SIGKILL"), 30_000);
      const status = await run.child.status;
      clearTimeout(guard);
      assertEquals(status.code, code, await run.stderr);
      const doc = JSON.parse(await run.stdout);
      assertEquals(doc.outcome, "interrupted");
      assertEquals(doc.signal, signal);
      assert(doc.results.every((r: { status: string }) => r.status === "interrupted"));
      assertEquals(doc.commands, [], "every restart was applied: nothing to repeat");
      assert(doc.nextAction.includes("rollout status"), doc.nextAction);
      assertEquals(await processesMentioning(c.kubeconfig), []);
    },
  });
}

Deno.test({
  name: "CLI: a SIGKILLed stratum leaves no kubectl behind",
  ignore,
  async fn() {
    await using c = await SimCluster.start({ workloads: stratumWorkloads("never") });
    const run = await startWaiting(c);
    run.child.kill("SIGKILL");
    await run.child.status;
    await run.stderr;
    // The kernel's parent-death signal reaches each call; they go within the kill grace.
    for (const started = performance.now(); (await processesMentioning(c.kubeconfig)).length;) {
      if (performance.now() - started > 15_000) break;
      await new Promise((r) => setTimeout(r, 100));
    }
    assertEquals(await processesMentioning(c.kubeconfig), []);
  },
});
