import type { Command } from "commander";
import * as node from "../../node/mod.ts";
import type { Deps } from "../deps.ts";
import { parseDuration } from "../duration.ts";
import { ExitAttention, ExitFailed, ExitOK } from "../exit.ts";
import { lockOptions, rootPaths } from "../flags.ts";
import { type Context, jsonOption } from "../program.ts";
import { journalDoc, resumeOutcome } from "../report.ts";

/** `stratum node boot`: parses flags, calls node.bootNode, reports. */
export function bootCommand(group: Command, ctx: Context, deps: Deps): void {
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
        const r = await node.bootNode({
          paths,
          systemctl: deps.systemctl(),
          waitReadyMs,
          lock: lockOptions(out, "stratum node boot", waitLockMs),
          self: deps.selfCommand,
          signal: deps.interrupted,
          log: (l) => out.log(l),
        });
        const migration = r.resumed ? resumeOutcome(r.resumed) : undefined;
        const code = r.attention ? ExitAttention : r.error ? ExitFailed : ExitOK;
        const damaged = r.error instanceof node.ErrDamagedRelease;
        const outcome = r.started
          ? "started"
          : damaged
          ? "damaged"
          : r.attention
          ? (r.error ? "start-failed" : "held")
          : "nothing-to-start";
        const nextAction = damaged
          ? "needs attention: the applied release does not match what was signed and is not " +
            "started (stratum-boot.service does not retry it): rebuild it from the operator's " +
            "copy of the same release with `stratum node repair --bundle DIR`"
          : r.error
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
        ctx.exitCode = code;
      },
    );
}
