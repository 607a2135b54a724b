import type { Command } from "commander";
import { Option } from "commander";
import * as isolation from "../../isolation/mod.ts";
import * as migrate from "../../migrate/mod.ts";
import * as node from "../../node/mod.ts";
import { parseDuration } from "../duration.ts";
import { UsageError } from "../exit.ts";
import { outcomeOf } from "./report.ts";
import { loadJournal } from "./resume_recorded.ts";
import { runReprovision } from "./reprovision.ts";
import type { Context } from "../program.ts";
import {
  appliedNode,
  checkMode,
  checkStrategy,
  type Common,
  common,
  isDir,
  locked,
  type MigrateDeps,
  nextFor,
  report,
  rootPaths,
  strategyOption,
  toOption,
  waitLockOption,
} from "./shared.ts";

/** `stratum migrate run`. */
export function runCommand(group: Command, ctx: Context, deps: MigrateDeps): void {
  common(group.command("run"))
    .description("migrate this node to another isolation mode")
    .addOption(toOption())
    .addOption(strategyOption())
    .option(
      "--bundle <dir>",
      "bundle directory with one subdirectory per mode (default: the installed copy)",
    )
    .option(
      "--require-signature",
      "refuse an unsigned bundle even when no key is trusted (/etc/stratum/trust/*.pem)",
    )
    .option(
      "--wipe-state",
      "reprovision only: remove the node's state directories (etcd, kubelet, ...) in the reset, " +
        "so the node starts with empty data; without it a reprovision keeps them",
    )
    .addOption(waitLockOption())
    .addOption(
      new Option("--wait-ready <duration>", "how long the target may take to become healthy")
        .default("2m"),
    )
    .action(async (
      opts: Common & {
        to: string;
        strategy: string;
        bundle?: string;
        requireSignature?: boolean;
        wipeState?: boolean;
        waitLock: string;
        waitReady: string;
      },
    ) => {
      const out = ctx.output(opts);
      const to = checkMode(opts.to);
      const strategy = checkStrategy(opts.strategy);
      const waitLockMs = parseDuration("--wait-lock", opts.waitLock, true);
      const waitReadyMs = parseDuration("--wait-ready", opts.waitReady);
      if (opts.wipeState && strategy !== migrate.StrategyReprovision) {
        throw new UsageError(
          "--wipe-state goes with --strategy reprovision: an in-place migration never removes the node's data",
        );
      }
      if (opts.bundle !== undefined && !(await isDir(opts.bundle))) {
        throw new UsageError(`--bundle ${opts.bundle} is not a directory`);
      }
      const paths = await rootPaths(opts.root);
      ctx.exitCode = await locked(
        paths,
        out,
        `stratum migrate run --to ${to}`,
        waitLockMs,
        async () => {
          const store = new migrate.JournalStore(paths.journal);
          const existing = await loadJournal(store);
          if (existing) {
            throw new UsageError(
              `A migration journal exists (step ${existing.step}): ${nextFor(existing)}`,
            );
          }
          const current = await appliedNode(paths);
          if (current.mode === to) throw new UsageError(`This node already runs in ${to} mode`);
          const systemctl = deps.systemctl();
          if (strategy === migrate.StrategyReprovision) {
            return await runReprovision({
              paths,
              out,
              systemctl,
              current,
              to,
              bundle: opts.bundle,
              requireSignature: opts.requireSignature === true,
              wipeState: opts.wipeState === true,
              waitReadyMs,
              self: deps.selfCommand,
              failpoint: deps.failpoint,
              signal: deps.interrupted,
            });
          }
          const startedAt = new Date();
          const spec = node.nodeSpec({
            paths,
            systemctl,
            from: current.mode,
            to,
            sourceSlot: current.slot,
            node: current.node,
            ...(opts.bundle ? { bundle: opts.bundle } : {}),
            ...(opts.requireSignature ? { requireSignature: true } : {}),
            waitReadyMs,
            migrationId: startedAt.toISOString(),
            log: (l) => out.log(l),
          });
          // Refuse before the first change: the resume unit is installed only
          // for a migration that passed preflight.
          try {
            await spec.preflight!(spec.target, deps.interrupted);
          } catch (err) {
            const failed = new migrate.ActionError("preflight", undefined, err);
            return report(out, "run", outcomeOf(undefined, { rolledBack: false, error: failed }));
          }
          if (await node.installBootUnit(paths, deps.selfCommand) && paths.root === "/") {
            await systemctl.daemonReload();
          }
          const record = node.withFailpoint(
            migrate.recorder(store, {
              strategy: "in-place",
              from: current.mode,
              to,
              sourceSlot: current.slot,
              targetSlot: isolation.otherSlot(current.slot),
              startedAt,
            }),
            deps.failpoint,
            deps.killSelf,
          );
          out.log(`migrating from ${current.mode} (slot ${current.slot}) to ${to}`);
          const result = await migrate.runInPlace({ ...spec, record }, {
            signal: deps.interrupted,
          });
          let journal = await store.load().catch(() => undefined);
          const first = migrate.find(result.error, migrate.ActionError);
          if (
            journal?.step === migrate.StepPreparing && !result.rolledBack &&
            first?.action === "record" && first.step === undefined
          ) {
            // The first journal write failed after its rename landed: nothing
            // was changed, so the journal must not outlive the run.
            await store.remove().catch(() => {});
            journal = await store.load().catch(() => undefined);
          }
          return report(out, "run", outcomeOf(journal, result), journal);
        },
      );
    });
}
