import { type Command, Option } from "commander";
import $ from "dax";
import { findAll } from "../errors/mod.ts";
import type * as kube from "../kube/mod.ts";
import * as rollout from "../rollout/mod.ts";
import { formatDuration, parseDuration } from "./duration.ts";
import { ErrUsage, ExitFailed, ExitOK, Interrupted } from "./exit.ts";
import type { Output } from "./output.ts";
import { type Context, jsonOption } from "./program.ts";

/** What the rollout commands need from outside: main.ts passes the real kubectl. */
export interface RolloutDeps {
  readonly kubectl: (cfg: kube.Config) => kube.Kubectl;
  readonly commandLine: (cfg: kube.Config) => (args: string) => string;
  /** Aborted on SIGINT/SIGTERM (reason: Interrupted): kubectl calls are killed, the report printed. */
  readonly interrupted: AbortSignal;
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
          "in time: it may yet finish), error (restart failed: it still holds its old watches, or\n" +
          "its presence could not be checked) or interrupted (SIGINT/SIGTERM came first).\n" +
          "Exit 0 when nothing failed (warnings alone are 0), 1 when a restart or a check failed,\n" +
          "2 on bad flags, 128+N when interrupted by signal N: 130 SIGINT, 143 SIGTERM, 129 SIGHUP\n" +
          "(kubectl calls are killed and the report so far is printed).\n" +
          "\nExample:\n  stratum rollout restart --kubeconfig /etc/stratum/admin.conf --wait 10m --json",
      )
      .action(async (opts: ConnFlags & { wait: string; callTimeout: string }) => {
        const out = ctx.output(opts);
        const wait = parseDuration("--wait", opts.wait);
        const callTimeout = parseDuration("--call-timeout", opts.callTimeout);
        const cfg = config(opts);
        const commandLine = deps.commandLine(cfg);
        const progress = progressPrinter(out);
        const roller = new rollout.Roller({
          kubectl: deps.kubectl(cfg),
          commandLine,
          callTimeout,
          wait,
          onProgress: progress.show,
          signal: deps.interrupted,
        });
        const results = await roller.restart();
        progress.stop();
        const reason = deps.interrupted.aborted ? deps.interrupted.reason : undefined;
        ctx.exitCode = report(
          out,
          results,
          commandLine,
          reason instanceof Interrupted ? reason : undefined,
        );
      });

    withConn(group.command("commands"))
      .description("print the `kubectl rollout restart` commands that repeat the restarts by hand")
      .action((opts: ConnFlags) => {
        const out = ctx.output(opts);
        const commands = rollout.restartCommands(deps.commandLine(config(opts)));
        out.result({ outcome: "listed", commands, nextAction: "none" }, () => commands);
      });

    group.command("list")
      .description("list the workloads Stratum owns and restarts")
      .addOption(jsonOption())
      .action((opts: { json?: boolean }) => {
        const out = ctx.output(opts);
        out.result(
          { outcome: "listed", workloads: rollout.Workloads, nextAction: "none" },
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
      .argument("<kind>", "Deployment or DaemonSet, or kubectl's names for them (deploy, ds, ...)")
      .argument("<name>", "the object's name")
      .requiredOption("-n, --namespace <namespace>", "the object's namespace")
      .addOption(jsonOption())
      .action((kind: string, name: string, opts: { namespace: string; json?: boolean }) => {
        const out = ctx.output(opts);
        const k = kindOf(kind);
        if (!k) {
          throw new ErrUsage(
            `unknown kind ${
              JSON.stringify(kind)
            }: Stratum rolls Deployments and DaemonSets (Deployment, deploy, DaemonSet, ds)`,
          );
        }
        const owned = rollout.owned(k, name, opts.namespace);
        out.result(
          {
            outcome: owned ? "owned" : "not-owned",
            kind,
            name,
            namespace: opts.namespace,
            owned,
            nextAction: "none",
          },
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
    throw new ErrUsage("--kubeconfig is empty");
  }
  // kubectl inherits KUBECONFIG; hints must carry it to reach the same apiserver.
  const envKubeconfig = Deno.env.get("KUBECONFIG");
  return {
    ...(opts.kubeconfig ? { kubeconfig: opts.kubeconfig } : {}),
    ...(envKubeconfig ? { envKubeconfig } : {}),
    ...(opts.context ? { context: opts.context } : {}),
    ...(opts.kubectl ? { binary: opts.kubectl } : {}),
  };
}

/**
 * Live progress on stderr: plain lines, and while the rollouts are awaited on
 * a terminal, dax's progress bar counting them.
 */
function progressPrinter(
  out: Output,
): { show: (p: rollout.Progress) => void; stop: () => void } {
  let bar: ReturnType<typeof $.progress> | undefined;
  let left = 0;
  const stop = () => {
    bar?.finish();
    bar = undefined;
  };
  const settled = () => {
    if (--left <= 0) stop();
  };
  const show = (p: rollout.Progress) => {
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
          bar = $.progress({
            message: `rollouts (up to ${formatDuration(p.waitMs)})`,
            length: left,
          });
        }
        out.log(
          `waiting up to ${formatDuration(p.waitMs)} for ${p.targets.length} rollouts: ${
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
  return { show, stop };
}

/**
 * Prints the results; returns the exit code (interrupted: 130/143; any err:
 * 1; warnings alone: 0). The by-hand restart commands name only the targets
 * that need one (a failed or interrupted restart, a workload whose presence
 * could not be checked), never one that was restarted or is absent.
 */
function report(
  out: Output,
  results: rollout.Result[],
  commandLine: (a: string) => string,
  interrupted: Interrupted | undefined,
): number {
  const failed = results.some((r) => r.err);
  const warned = results.some((r) => r.warn);
  const outcome = interrupted ? "interrupted" : failed ? "failed" : warned ? "warnings" : "ok";
  const commands = rollout.restartCommands(commandLine, results.flatMap(toRedo));
  const hints = [...new Set(results.flatMap((r) => hintsOf(r)))];
  const next = interrupted
    ? commands.length
      ? `${interrupted.message}: the restarts marked interrupted did not run or may not have been applied; run stratum rollout restart again, or the commands shown`
      : `${interrupted.message} while waiting: every restart was applied; watch the rollouts with the rollout status commands in the hints`
    : failed
    ? "fix the errors below, then repeat the failed restarts with the commands shown"
    : warned
    ? "nothing to restart again: the pending rollouts were restarted and may yet finish; watch them with the rollout status commands in the hints"
    : "none";
  out.result(
    {
      outcome,
      ...(interrupted ? { signal: interrupted.signal } : {}),
      results: results.map((r) => ({
        name: r.name,
        namespace: r.namespace,
        // A probe that could not tell (an error before any target) is
        // neither present nor absent: null, not the library's "may run".
        present: r.present && r.err !== undefined && r.targets.length === 0 ? null : r.present,
        status: statusOf(r),
        targets: r.targets.map((t) => ({
          target: t.target,
          state: t.state,
          ...(t.error ? { message: t.error.message } : {}),
        })),
        ...(r.err ? { error: r.err.message } : {}),
        ...(r.warn ? { warning: r.warn.message } : {}),
        ...(r.interrupted ? { interrupted: r.interrupted.message } : {}),
      })),
      hints,
      commands,
      nextAction: next,
    },
    () => [
      ...results.map((r) => {
        const where = `${r.name} (${r.namespace})`;
        switch (statusOf(r)) {
          case "skipped":
            return `skipped      ${where}: not installed`;
          case "error":
            return `error        ${where}: ${r.err!.message}`;
          case "interrupted":
            return `interrupted  ${where}: ${r.interrupted!.message}`;
          case "warning":
            return `warning      ${where}: ${r.warn!.message}`;
          default:
            return `ok           ${where}: ${r.targets.map((t) => t.target).join(", ")} rolled out`;
        }
      }),
      ...(hints.length ? ["", ...hints.map((h) => `hint: ${h}`)] : []),
      ...(commands.length
        ? ["", "To repeat the restarts that need it by hand:", ...commands.map((c) => `  ${c}`)]
        : []),
      ...(next !== "none" ? ["", `next: ${next}`] : []),
    ],
  );
  if (interrupted) return interrupted.exitCode;
  return failed ? ExitFailed : ExitOK;
}

function statusOf(r: rollout.Result): "skipped" | "error" | "interrupted" | "warning" | "ok" {
  if (!r.present) return "skipped";
  if (r.err) return "error";
  if (r.interrupted) return "interrupted";
  return r.warn ? "warning" : "ok";
}

/** The part of a workload that must be restarted again, as a Workload for restartCommands. */
function toRedo(r: rollout.Result): rollout.Workload[] {
  const w = rollout.Workloads.find((x) => x.name === r.name)!;
  // No targets with an err: its probe failed, so nothing of it was restarted.
  const targets = r.err && r.targets.length === 0
    ? w.targets
    : r.targets.filter((t) =>
      t.state === "failed" ||
      (t.state === "interrupted" &&
        !(t.error instanceof rollout.InterruptedError && t.error.restarted))
    ).map((t) => t.target);
  return targets.length ? [{ ...w, targets }] : [];
}

function hintsOf(r: rollout.Result): string[] {
  return [r.err, r.warn, r.interrupted].flatMap((e) => findAll(e, rollout.HintedError))
    .flatMap((e) => (e.hint ? [e.hint] : []));
}

/**
 * The Kubernetes kind `s` names, as kubectl reads it (case aside: the kind,
 * its resource name, plural or short name), for the two kinds Stratum rolls.
 */
function kindOf(s: string): "Deployment" | "DaemonSet" | undefined {
  const k = s.toLowerCase().replace(/\.apps$/, "");
  if (["deployment", "deployments", "deploy"].includes(k)) return "Deployment";
  if (["daemonset", "daemonsets", "ds"].includes(k)) return "DaemonSet";
  return undefined;
}
