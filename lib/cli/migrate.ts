import { type Command, Option } from "commander";
import { messageOf } from "../errors/mod.ts";
import * as host from "../host/mod.ts";
import * as isolation from "../isolation/mod.ts";
import * as migrate from "../migrate/mod.ts";
import * as node from "../node/mod.ts";
import { parseDuration } from "./duration.ts";
import { ExitBusy, ExitOK, ExitUsage, UsageError } from "./exit.ts";
import { journalDoc, type Outcome, outcomeOf } from "./migrate_report.ts";
import { loadJournal, resumeRecorded } from "./_resume.ts";
import { handoffUnit, runReprovision } from "./migrate_reprovision.ts";
import type { Output } from "./output.ts";
import { type Context, jsonOption } from "./program.ts";

/** What the migrate commands need from outside; main.ts builds the real ones. */
export interface MigrateDeps {
  readonly systemctl: () => host.Systemctl;
  /** STRATUM_FAILPOINT, a test aid (see lib/node/failpoint.ts). */
  readonly failpoint: string | undefined;
  /** Kills this process at once (the failpoint's crash). */
  readonly killSelf: () => void;
  /** How systemd runs this tool, for the boot unit's ExecStart. */
  readonly selfCommand: node.SelfCommand;
  /** Aborted on SIGINT/SIGTERM: the forward path stops and rolls back. */
  readonly interrupted: AbortSignal;
}

interface Common {
  root: string;
  json?: boolean;
}

/** `stratum migrate plan|run|resume|status|ack`. */
export function migrateGroup(deps: MigrateDeps) {
  return (program: Command, ctx: Context): void => {
    const group = program.command("migrate").description(
      "move this node between isolation modes (host, nspawn) through blue/green slots, with a write-ahead journal and automatic rollback",
    ).addHelpText(
      "after",
      "\nA typical migration:\n" +
        "  stratum migrate plan --to nspawn --bundle /srv/stratum-bundle   # changes nothing\n" +
        "  stratum migrate run  --to nspawn --bundle /srv/stratum-bundle\n" +
        "  stratum migrate status\n" +
        "  stratum migrate ack                                             # once reported\n" +
        "After a crash or power loss, `stratum migrate resume` finishes or rolls back;\n" +
        "at every boot stratum-boot.service does it before starting the node stack\n" +
        "(`stratum node boot`). See docs/migration.md.",
    );

    common(group.command("plan"))
      .description(
        "check the target's requirements and the bundle, and print each step, what it changes and how it is undone; changes nothing",
      )
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
      .addOption(
        new Option("--wait-ready <duration>", "how long the target may take to become healthy")
          .default("2m"),
      )
      .action(
        async (
          opts: Common & {
            to: string;
            strategy: string;
            bundle?: string;
            requireSignature?: boolean;
            waitReady: string;
          },
        ) => {
          const out = ctx.output(opts);
          const to = checkMode(opts.to);
          checkStrategy(opts.strategy);
          const waitReadyMs = parseDuration("--wait-ready", opts.waitReady);
          const paths = await rootPaths(opts.root);
          const store = new migrate.JournalStore(paths.journal);
          const j = await loadJournal(store);
          const current = await appliedNode(paths);
          const steps = node.plan({
            paths,
            from: current.mode,
            to,
            sourceSlot: current.slot,
            ...(opts.bundle ? { bundle: opts.bundle } : {}),
            waitReadyMs,
          });
          let refused: string | undefined = j
            ? `A migration journal exists (step ${j.step}): ${nextFor(j)}`
            : undefined;
          let checked: Awaited<ReturnType<typeof node.preflight>> | undefined;
          if (!refused) {
            try {
              checked = await node.preflight({
                paths,
                from: current.mode,
                to,
                sourceSlot: current.slot,
                bundleModeDir: opts.bundle ? `${opts.bundle}/${to}` : paths.bundle(to),
                ...(opts.requireSignature ? { requireSignature: true } : {}),
              });
              for (const w of checked.warnings) out.log(`warning: ${w}`);
            } catch (err) {
              refused = messageOf(err);
            }
          }
          out.result(
            {
              outcome: refused ? "refused" : "planned",
              from: current.mode,
              to,
              strategy: "in-place",
              sourceSlot: current.slot,
              targetSlot: isolation.otherSlot(current.slot),
              preflight: refused ? { ok: false, message: refused } : { ok: true, ...checked },
              steps,
              nextAction: refused
                ? "fix what the message names; nothing was changed"
                : "stratum migrate run with the same flags",
            },
            () => [
              `Migration of this node from ${current.mode} (slot ${current.slot}) to ${to} (slot ${
                isolation.otherSlot(current.slot)
              }), in place:`,
              ...steps.flatMap((s, i) => [
                `${String(i + 1).padStart(2)}. ${s.step}: ${s.does}`,
                `      changes: ${s.changes}`,
                `      undone by: ${s.undo}`,
              ]),
              "",
              refused
                ? `Refused: ${refused}`
                : `Preflight passed: bundle of ${checked!.bundleFiles} files verified${
                  checked!.keyId ? `, signed by trusted key ${checked!.keyId}` : ""
                }, ${Math.round(checked!.freeBytes / 1048576)} MiB free. Nothing was changed.`,
              ...(checked?.warnings ?? []).map((w) => `warning: ${w}`),
            ],
          );
          ctx.exitCode = refused ? ExitUsage : ExitOK;
        },
      );

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
          waitLock: string;
          waitReady: string;
        },
      ) => {
        const out = ctx.output(opts);
        const to = checkMode(opts.to);
        const strategy = checkStrategy(opts.strategy);
        const waitLockMs = parseDuration("--wait-lock", opts.waitLock, true);
        const waitReadyMs = parseDuration("--wait-ready", opts.waitReady);
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

    common(group.command("resume"))
      .description(
        "finish or roll back a migration a crash interrupted; with no journal, do nothing (safe at every boot)",
      )
      .addOption(waitLockOption())
      .addOption(
        new Option("--wait-ready <duration>", "how long the target may take to become healthy")
          .default("2m"),
      )
      .action(async (opts: Common & { waitLock: string; waitReady: string }) => {
        const out = ctx.output(opts);
        const waitLockMs = parseDuration("--wait-lock", opts.waitLock, true);
        const waitReadyMs = parseDuration("--wait-ready", opts.waitReady);
        const paths = await rootPaths(opts.root);
        ctx.exitCode = await locked(paths, out, "stratum migrate resume", waitLockMs, async () => {
          const r = await resumeRecorded({
            paths,
            systemctl: deps.systemctl(),
            waitReadyMs,
            signal: deps.interrupted,
            log: (l) => out.log(l),
            self: deps.selfCommand,
            failpoint: deps.failpoint,
            killSelf: deps.killSelf,
          });
          return report(out, "resume", resumeOutcome(r), r?.journal);
        });
      });

    common(group.command("status"))
      .description("show the migration journal and the node's applied mode")
      .action(async (opts: Common) => {
        const out = ctx.output(opts);
        const paths = await rootPaths(opts.root);
        const store = new migrate.JournalStore(paths.journal);
        const j = await loadJournal(store);
        const applied = await isolation.readNodeConfig(paths.nodeConfig).catch((e) => {
          throw new UsageError(messageOf(e));
        });
        const o = j ? outcomeOf(j) : undefined;
        const state = !j ? "none" : migrate.isTerminal(j.step) ? (o!.outcome) : "in-progress";
        const handoff = j?.strategy === migrate.StrategyReprovision && !migrate.isTerminal(j.step)
          ? {
            unit: handoffUnit,
            running: await deps.systemctl().isActive(handoffUnit).catch(() => false),
          }
          : null;
        const next = !j
          ? "none"
          : migrate.isTerminal(j.step)
          ? o!.nextAction
          : handoff?.running
          ? `wait: ${handoffUnit} is carrying it out (journalctl -u ${handoffUnit} -f)`
          : "run `stratum migrate resume`";
        out.result(
          {
            outcome: state,
            applied: applied ?? null,
            journal: journalDoc(j),
            message: j?.message ?? null,
            handoff,
            nextAction: next,
          },
          () => [
            `applied: ${
              applied
                ? `${applied.mode} mode, slot ${applied.slot}, node ${applied.node}`
                : "none (no node.json)"
            }`,
            j
              ? `migration: ${j.from} → ${j.to}, step ${j.step} (${state}), started ${j.startedAt.toISOString()}, updated ${j.updatedAt.toISOString()}${
                j.attempts ? `, ${j.attempts} attempts` : ""
              }`
              : "migration: none recorded",
            ...(j?.message ? [`message: ${j.message}`] : []),
            ...(handoff
              ? [`handoff: ${handoff.unit} ${handoff.running ? "running" : "not running"}`]
              : []),
            `next: ${next}`,
          ],
        );
        ctx.exitCode = ExitOK;
      });

    common(group.command("ack"))
      .description(
        "remove a finished journal (complete, rolled-back, failed, bootstrapped) once its outcome was reported",
      )
      .addOption(waitLockOption())
      .action(async (opts: Common & { waitLock: string }) => {
        const out = ctx.output(opts);
        const waitLockMs = parseDuration("--wait-lock", opts.waitLock, true);
        const paths = await rootPaths(opts.root);
        ctx.exitCode = await locked(paths, out, "stratum migrate ack", waitLockMs, async () => {
          const store = new migrate.JournalStore(paths.journal);
          const j = await loadJournal(store);
          if (!j) {
            out.result(
              { outcome: "nothing-to-do", nextAction: "none" },
              () => ["No migration journal: nothing to acknowledge"],
            );
            return ExitOK;
          }
          if (!migrate.isTerminal(j.step)) {
            throw new UsageError(
              `The migration is still in progress (step ${j.step}): run \`stratum migrate resume\` first`,
            );
          }
          await store.remove();
          // What the migration kept for its rollback goes with it: a snapshot
          // left behind must never be restored by a later migration.
          await host.removeFileDurable(paths.nodeConfigSaved);
          await host.removeTreeDurable(paths.snapshotDir);
          out.result(
            { outcome: "acknowledged", journal: journalDoc(j), nextAction: "none" },
            () => [
              `Acknowledged the ${j.from} → ${j.to} migration that ended ${j.step}; journal removed`,
            ],
          );
          return ExitOK;
        });
      });
  };
}

function common(c: Command): Command {
  return c.option("--root <dir>", "prefix for every host path (tests use a scratch tree)", "/")
    .addOption(jsonOption());
}

function toOption(): Option {
  return new Option("--to <mode>", `target isolation mode (${isolation.modes.join(", ")})`)
    .makeOptionMandatory();
}

function strategyOption(): Option {
  return new Option("--strategy <strategy>", "in-place (blue/green slots) or reprovision").default(
    "in-place",
  );
}

function waitLockOption(): Option {
  return new Option(
    "--wait-lock <duration>",
    "wait this long for another migration's lock (default: fail at once, exit 75)",
  )
    .default("0s");
}

function checkMode(s: string): isolation.Mode {
  if (!isolation.isMode(s)) {
    throw new UsageError(`unknown mode ${JSON.stringify(s)}: want ${isolation.modes.join(" or ")}`);
  }
  return s;
}

function checkStrategy(s: string): migrate.Strategy {
  if (!migrate.isStrategy(s)) {
    throw new UsageError(
      `unknown strategy ${JSON.stringify(s)}: want ${migrate.strategies.join(" or ")}`,
    );
  }
  return s;
}

async function isDir(p: string): Promise<boolean> {
  return await Deno.stat(p).then((s) => s.isDirectory, () => false);
}

export async function rootPaths(root: string): Promise<host.HostPaths> {
  if (!(await isDir(root))) throw new UsageError(`--root ${root} is not a directory`);
  return host.hostPaths(root);
}

async function appliedNode(paths: host.HostPaths): Promise<isolation.NodeConfig> {
  let cfg: isolation.NodeConfig | undefined;
  try {
    cfg = await isolation.readNodeConfig(paths.nodeConfig);
  } catch (err) {
    throw new UsageError(messageOf(err));
  }
  if (!cfg) {
    throw new UsageError(
      `${paths.nodeConfig} does not exist: this node runs no stratum stack to migrate`,
    );
  }
  return cfg;
}

function nextFor(j: migrate.Journal): string {
  return migrate.isTerminal(j.step)
    ? "report it with `stratum migrate status`, then `stratum migrate ack`"
    : "run `stratum migrate resume`";
}

/** Runs `fn` under the migration lock; busy is exit 75 with the holder named. */
export async function locked(
  paths: host.HostPaths,
  out: Output,
  command: string,
  waitMs: number,
  fn: () => Promise<number>,
): Promise<number> {
  let lock: host.MigrationLock;
  try {
    lock = await host.MigrationLock.acquire(paths.lock, {
      command,
      waitMs,
      onWait: (h) =>
        out.log(
          `waiting up to ${waitMs / 1000} s for the migration lock${
            h ? ` held by pid ${h.pid} (${h.command})` : ""
          }`,
        ),
    });
  } catch (err) {
    if (err instanceof host.ErrBusy) {
      out.result(
        {
          outcome: "busy",
          holder: err.holder ?? null,
          message: err.message,
          nextAction: "try again when it has finished, or pass --wait-lock",
        },
        () => [],
      );
      out.error(err.message);
      return ExitBusy;
    }
    throw err;
  }
  try {
    return await fn();
  } finally {
    await lock.release();
  }
}

/**
 * The outcome of a resume: over a terminal journal it did nothing, which is
 * `nothing-to-do` (exit 0) except for a failed migration, which still needs
 * a person (exit 3). The journal is in the document either way.
 */
export function resumeOutcome(r: migrate.ResumeOutcome | undefined): Outcome {
  if (!r) return outcomeOf(undefined);
  if (r.acted) return outcomeOf(r.journal, r);
  const o = outcomeOf(r.journal);
  return o.outcome === "failed" ? o : {
    ...o,
    outcome: "nothing-to-do",
    exitCode: ExitOK,
    nextAction: `none: the migration already ended ${r.journal.step}; ${o.nextAction}`,
  };
}

export function report(
  out: Output,
  command: string,
  o: Outcome,
  journal?: migrate.Journal,
): number {
  if (o.exitCode !== ExitOK) {
    out.error(`migrate ${command}: ${o.outcome}${o.message ? `: ${o.message}` : ""}`);
  }
  out.result(
    { command, ...o, journal: journalDoc(journal) },
    () => [
      `${command}: ${o.outcome}`,
      ...(o.failedStep
        ? [
          `failed at: ${o.failedStep.action}${
            o.failedStep.step ? ` (journal step ${o.failedStep.step})` : ""
          }`,
        ]
        : []),
      ...(o.rollback !== "not-needed" ? [`rollback: ${o.rollback}`] : []),
      ...(o.message ? [`message: ${o.message}`] : []),
      `next: ${o.nextAction}`,
    ],
  );
  return o.exitCode;
}
