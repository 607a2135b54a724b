import type { Command } from "commander";
import * as bundle from "../../bundle/mod.ts";
import * as node from "../../node/mod.ts";
import type { Deps } from "../deps.ts";
import { parseDuration } from "../duration.ts";
import { ErrUsage, ExitOK, ExitUsage } from "../exit.ts";
import { isDir, lockOptions, rootPaths } from "../flags.ts";
import { type Context, jsonOption } from "../program.ts";
import { outcomeOf, report } from "../report.ts";

/** `stratum node upgrade`: parses flags, calls node.upgrade, reports. */
export function upgradeCommand(group: Command, ctx: Context, deps: Deps): void {
  group.command("upgrade")
    .description(
      "upgrade this node's stack to a new bundle in the mode it runs in, A/B through the other " +
        "slot, with the same write-ahead journal, rollback, resume and boot path as a mode change",
    )
    .requiredOption("--bundle <dir>", "the new bundle: a directory with one subdirectory per mode")
    .option("--root <dir>", "prefix for every host path (tests use a scratch tree)", "/")
    .option("--require-signature", "refuse an unsigned bundle even when no key is trusted")
    .option(
      "--allow-downgrade",
      "accept a bundle older (BUNDLE.json's version) than the one this node runs",
    )
    .option("--wait-ready <duration>", "how long the new stack may take to become healthy", "2m")
    .option("--wait-lock <duration>", "wait this long for a migration's lock", "0s")
    .addOption(jsonOption())
    .addHelpText(
      "after",
      "\nThe new stack is built in the slot the node does not run, started once the running one\n" +
        "stopped, and kept only when it is healthy within --wait-ready; otherwise the running\n" +
        "version is started again (exit 1, rolled-back). The node's state directories are used\n" +
        "in place by both versions. The same bundle again: already-installed, exit 0. A bundle\n" +
        "that does not verify, or is not signed by a trusted key when keys are installed: exit 2,\n" +
        "nothing changed. After a crash or power cut, `stratum migrate resume` or the next boot\n" +
        "finishes or rolls back; `stratum migrate status` shows it, `stratum migrate ack` ends it.\n" +
        "\nExit codes: 0 upgraded or already installed, 1 rolled back, 2 bad input or refused,\n" +
        "3 needs attention, 75 a migration holds the lock.\n" +
        "\nExample:\n  stratum node upgrade --bundle /srv/stratum-bundle-1.2 --json",
    )
    .action(
      async (
        opts: {
          bundle: string;
          root: string;
          requireSignature?: boolean;
          allowDowngrade?: boolean;
          waitReady: string;
          waitLock: string;
          json?: boolean;
        },
      ) => {
        const out = ctx.output(opts);
        const waitReadyMs = parseDuration("--wait-ready", opts.waitReady);
        const waitLockMs = parseDuration("--wait-lock", opts.waitLock, true);
        if (!(await isDir(opts.bundle))) {
          throw new ErrUsage(`--bundle ${opts.bundle} is not a directory`);
        }
        const paths = await rootPaths(opts.root);
        let r: node.Upgraded;
        try {
          r = await node.upgrade({
            paths,
            systemctl: deps.systemctl(),
            bundle: opts.bundle,
            requireSignature: opts.requireSignature === true,
            allowDowngrade: opts.allowDowngrade === true,
            waitReadyMs,
            lock: lockOptions(out, "stratum node upgrade", waitLockMs),
            self: deps.selfCommand,
            signal: deps.interrupted,
            log: (l) => out.log(l),
            failpoint: deps.failpoint,
            killSelf: deps.killSelf,
          });
        } catch (err) {
          if (!(err instanceof bundle.BundleError)) throw err;
          out.error(`node upgrade: refused: ${err.message}`);
          out.result(
            {
              command: "upgrade",
              outcome: "refused",
              exitCode: ExitUsage,
              message: err.message,
              nextAction: "nothing was changed; see the message",
              journal: null,
            },
            () => [`upgrade: refused`, `message: ${err.message}`],
          );
          ctx.exitCode = ExitUsage;
          return;
        }
        if (r.alreadyInstalled) {
          out.result(
            {
              command: "upgrade",
              outcome: "already-installed",
              exitCode: ExitOK,
              mode: r.mode,
              bundle: { digest: r.digest },
              nextAction: "none",
              journal: null,
            },
            () => [`upgrade: already-installed (bundle ${r.digest} runs); nothing changed`],
          );
          ctx.exitCode = ExitOK;
          return;
        }
        ctx.exitCode = report(out, "upgrade", outcomeOf(r.journal, r.result), r.journal, "node");
      },
    );
}
