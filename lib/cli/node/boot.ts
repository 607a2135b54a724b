import type { Command } from "commander";
import { messageOf } from "../../errors/mod.ts";
import * as isolation from "../../isolation/mod.ts";
import * as node from "../../node/mod.ts";
import { parseDuration } from "../duration.ts";
import { ExitAttention, ExitFailed, ExitOK, UsageError } from "../exit.ts";
import { journalDoc } from "../migrate/mod.ts";
import { locked, resumeOutcome, rootPaths } from "../migrate/mod.ts";
import { type Context, jsonOption } from "../program.ts";
import type { NodeDeps } from "./deps.ts";
import { resumeRecorded } from "../migrate/mod.ts";

/** `stratum node boot`. */
export function bootCommand(group: Command, ctx: Context, deps: NodeDeps): void {
  group.command("boot")
    .description(
      "what stratum-boot.service runs at every boot: finish or roll back an interrupted migration, then start the slot /etc/stratum/node.json names (idempotent)",
    )
    .option("--root <dir>", "prefix for every host path (tests use a scratch tree)", "/")
    .option("--wait-lock <duration>", "wait this long for a migration's lock", "10m")
    .option("--wait-ready <duration>", "how long a resumed target may take to be healthy", "2m")
    .addOption(jsonOption())
    .action(
      async (opts: { root: string; json?: boolean; waitLock: string; waitReady: string }) => {
        const out = ctx.output(opts);
        const waitLockMs = parseDuration("--wait-lock", opts.waitLock, true);
        const waitReadyMs = parseDuration("--wait-ready", opts.waitReady);
        const paths = await rootPaths(opts.root);
        const systemctl = deps.systemctl();
        ctx.exitCode = await locked(paths, out, "stratum node boot", waitLockMs, async () => {
          const r = await node.boot({
            resume: () =>
              resumeRecorded({
                paths,
                systemctl,
                waitReadyMs,
                signal: deps.interrupted,
                log: (l) => out.log(l),
                self: deps.selfCommand,
              }),
            applied: async () => {
              const cfg = await isolation.readNodeConfig(paths.nodeConfig).catch((e) => {
                throw new UsageError(messageOf(e));
              });
              return cfg && { mode: cfg.mode, slot: cfg.slot };
            },
            start: (ref) =>
              isolation.backendFor(ref.mode, { paths, systemctl }).start(ref, {
                signal: deps.interrupted,
              }),
          });
          const migration = r.resumed ? resumeOutcome(r.resumed) : undefined;
          const code = r.attention ? ExitAttention : r.error ? ExitFailed : ExitOK;
          const outcome = r.started
            ? "started"
            : r.attention
            ? (r.error ? "start-failed" : "held")
            : "nothing-to-start";
          const nextAction = r.error
            ? `the node stack did not start (${r.error.message}); stratum-boot.service retries it: check \`systemctl status 'stratum-*'\``
            : r.attention
            ? migration?.nextAction ?? "needs attention"
            : r.started
            ? "none"
            : "none: this node has no applied stack (no /etc/stratum/node.json)";
          if (code !== ExitOK) {
            out.error(`node boot: ${outcome}: ${r.error?.message ?? migration?.message ?? ""}`);
          }
          out.result(
            {
              outcome,
              started: r.started ?? null,
              migration: migration ?? null,
              journal: journalDoc(r.resumed?.journal),
              message: r.error?.message ?? null,
              nextAction,
            },
            () => [
              ...(migration ? [`migration: ${migration.outcome}`] : []),
              r.started
                ? `started: slot ${r.started.slot} (${r.started.mode} mode)`
                : `started: nothing (${outcome})`,
              `next: ${nextAction}`,
            ],
          );
          return code;
        });
      },
    );
}
