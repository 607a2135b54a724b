import { type Command, Option } from "commander";
import $ from "dax";
import { findAll } from "../errors/mod.ts";
import type * as kube from "../kube/mod.ts";
import * as rollout from "../rollout/mod.ts";
import { parseDuration } from "./duration.ts";
import { ExitFailed, ExitOK, UsageError } from "./exit.ts";
import type { Output } from "./output.ts";
import { type Context, jsonOption } from "./program.ts";

/** What the rollout commands need from outside: main.ts passes the real kubectl. */
export interface RolloutDeps {
  readonly kubectl: (cfg: kube.Config) => kube.Kubectl;
  readonly hint: (cfg: kube.Config) => (args: string) => string;
}

interface ConnFlags {
  kubeconfig?: string;
  context?: string;
  kubectl?: string;
  json?: boolean;
}

/** `stratum rollout restart|commands|list|owned`. */
export function rolloutGroup(deps: RolloutDeps) {
  return (program: Command, ctx: Context): void => {
    const group = program
      .command("rollout")
      .description(
        "restart the in-cluster workloads Stratum owns (after a restore or CA rotation)",
      );

    withConn(group.command("restart"))
      .description(
        "restart Stratum's workloads, each found in its own namespace and skipped when absent, " +
          "then wait for their rollouts under one total deadline",
      )
      .addOption(new Option("--wait <duration>", "total wait for the rollouts").default("5m"))
      .addOption(
        new Option("--call-timeout <duration>", "deadline of each kubectl call").default("30s"),
      )
      .addHelpText(
        "after",
        "\nPer workload: ok, skipped (not installed), warning (restarted, rollout not finished\n" +
          "in time: it may yet finish) or error (restart failed: it still holds its old watches).\n" +
          "Exit 0 when nothing failed (warnings alone are 0), 1 when a restart failed, 2 on bad flags.\n" +
          "\nExample:\n  stratum rollout restart --kubeconfig /etc/stratum/admin.conf --wait 10m --json",
      )
      .action(async (opts: ConnFlags & { wait: string; callTimeout: string }) => {
        const out = ctx.output(opts);
        const wait = parseDuration("--wait", opts.wait);
        const callTimeout = parseDuration("--call-timeout", opts.callTimeout);
        const cfg = config(opts);
        const hint = deps.hint(cfg);
        const roller = new rollout.Roller({
          kubectl: deps.kubectl(cfg),
          hint,
          callTimeout,
          wait,
          onProgress: progressPrinter(out),
        });
        const results = await roller.restart();
        ctx.exitCode = report(out, results, hint);
      });

    withConn(group.command("commands"))
      .description("print the `kubectl rollout restart` commands that repeat the restarts by hand")
      .action((opts: ConnFlags) => {
        const out = ctx.output(opts);
        const commands = rollout.restartCommands(deps.hint(config(opts)));
        out.result({ commands }, () => commands);
      });

    group.command("list")
      .description("list the workloads Stratum owns and restarts")
      .addOption(jsonOption())
      .action((opts: { json?: boolean }) => {
        const out = ctx.output(opts);
        out.result(
          { workloads: rollout.Workloads },
          () =>
            rollout.Workloads.map((w) =>
              `${w.name}\tnamespace ${w.namespace}\tprobe ${w.probe}\ttargets ${
                w.targets.join(" ")
              }`
            ),
        );
      });

    group.command("owned")
      .description("exit 0 when KIND NAME in NAMESPACE is a workload Stratum rolls, 1 when not")
      .argument("<kind>", "Deployment or DaemonSet")
      .argument("<name>", "the object's name")
      .requiredOption("-n, --namespace <namespace>", "the object's namespace")
      .addOption(jsonOption())
      .action((kind: string, name: string, opts: { namespace: string; json?: boolean }) => {
        const out = ctx.output(opts);
        if (!/^[A-Za-z]+$/.test(kind)) throw new UsageError(`invalid kind ${JSON.stringify(kind)}`);
        const owned = rollout.owned(kind, name, opts.namespace);
        out.result(
          { kind, name, namespace: opts.namespace, owned },
          () => [`${kind} ${opts.namespace}/${name}: ${owned ? "owned" : "not owned"} by Stratum`],
        );
        ctx.exitCode = owned ? ExitOK : ExitFailed;
      });
  };
}

function withConn(c: Command): Command {
  return c
    .option(
      "--kubeconfig <file>",
      "kubeconfig to use (default: kubectl's own: $KUBECONFIG, ~/.kube/config)",
    )
    .option("--context <name>", "kubeconfig context to use")
    .option("--kubectl <path>", "kubectl binary", "kubectl")
    .addOption(jsonOption());
}

function config(opts: ConnFlags): kube.Config {
  if (opts.kubeconfig !== undefined && opts.kubeconfig.trim() === "") {
    throw new UsageError("--kubeconfig is empty");
  }
  return {
    ...(opts.kubeconfig ? { kubeconfig: opts.kubeconfig } : {}),
    ...(opts.context ? { context: opts.context } : {}),
    ...(opts.kubectl ? { binary: opts.kubectl } : {}),
  };
}

/**
 * Live progress on stderr: plain lines, and while the rollouts are awaited on
 * a terminal, dax's progress bar counting them.
 */
function progressPrinter(out: Output): (p: rollout.Progress) => void {
  let bar: ReturnType<typeof $.progress> | undefined;
  let left = 0;
  const settled = () => {
    if (bar && --left <= 0) {
      bar.finish();
      bar = undefined;
    }
  };
  return (p) => {
    switch (p.kind) {
      case "probed":
        out.log(`${p.workload}: ${p.present ? "present" : "not installed, skipped"}`);
        break;
      case "restarted":
        out.log(`${p.target}: restarted`);
        break;
      case "restart-failed":
        out.log(`${p.target}: restart failed: ${p.error.message}`);
        break;
      case "waiting":
        left = p.targets.length;
        if (out.interactive) {
          bar = $.progress({ message: `rollouts (up to ${formatWait(p.waitMs)})`, length: left });
        }
        out.log(
          `waiting up to ${formatWait(p.waitMs)} for ${p.targets.length} rollouts: ${
            p.targets.join(", ")
          }`,
        );
        break;
      case "rolled-out":
        bar?.increment();
        out.log(`${p.target}: rolled out`);
        settled();
        break;
      case "pending":
        bar?.increment();
        out.log(p.error.message);
        settled();
        break;
    }
  };
}

function formatWait(ms: number): string {
  return ms % 60_000 === 0 ? `${ms / 60_000}m` : `${ms / 1000}s`;
}

/** Prints the results; returns the exit code (any err: 1; warnings alone: 0). */
function report(out: Output, results: rollout.Result[], hint: (a: string) => string): number {
  const failed = results.some((r) => r.err);
  const warned = results.some((r) => r.warn);
  const outcome = failed ? "failed" : warned ? "warnings" : "ok";
  const commands = failed || warned ? rollout.restartCommands(hint) : [];
  const hints = [...new Set(results.flatMap((r) => hintsOf(r)))];
  const next = failed
    ? "fix the errors below, then repeat the restarts with the commands shown"
    : warned
    ? "nothing to wait for: the pending rollouts may yet finish; check them with the commands shown"
    : "none";
  out.result(
    {
      outcome,
      results: results.map((r) => ({
        name: r.name,
        namespace: r.namespace,
        present: r.present,
        status: !r.present ? "skipped" : r.err ? "error" : r.warn ? "warning" : "ok",
        targets: r.targets.map((t) => ({
          target: t.target,
          state: t.state,
          ...(t.error ? { message: t.error.message } : {}),
        })),
        ...(r.err ? { error: r.err.message } : {}),
        ...(r.warn ? { warning: r.warn.message } : {}),
      })),
      hints,
      commands,
      nextAction: next,
    },
    () => [
      ...results.map((r) => {
        if (!r.present) return `skipped  ${r.name} (${r.namespace}): not installed`;
        if (r.err) return `error    ${r.name} (${r.namespace}): ${r.err.message}`;
        if (r.warn) return `warning  ${r.name} (${r.namespace}): ${r.warn.message}`;
        return `ok       ${r.name} (${r.namespace}): ${
          r.targets.map((t) => t.target).join(", ")
        } rolled out`;
      }),
      ...(hints.length ? ["", ...hints.map((h) => `hint: ${h}`)] : []),
      ...(commands.length
        ? ["", "To repeat the restarts by hand:", ...commands.map((c) => `  ${c}`)]
        : []),
    ],
  );
  return failed ? ExitFailed : ExitOK;
}

function hintsOf(r: rollout.Result): string[] {
  return [r.err, r.warn].flatMap((e) => findAll(e, rollout.HintedError))
    .flatMap((e) => (e.hint ? [e.hint] : []));
}
