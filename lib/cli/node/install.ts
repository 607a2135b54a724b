import type { Command } from "commander";
import { join } from "node:path";
import * as bundle from "../../bundle/mod.ts";
import { is, messageOf } from "../../errors/mod.ts";
import * as host from "../../host/mod.ts";
import * as isolation from "../../isolation/mod.ts";
import * as migrate from "../../migrate/mod.ts";
import * as node from "../../node/mod.ts";
import { parseDuration } from "../duration.ts";
import { ErrUsage, ExitFailed, ExitOK, ExitUsage, Interrupted } from "../exit.ts";
import { checkMode, lockOptions, rootPaths } from "../flags.ts";
import { type Context, jsonOption } from "../program.ts";
import type { Deps } from "../deps.ts";
import { planHelp, reportPlan } from "./plan.ts";

interface InstallFlags {
  mode: string;
  bundle: string;
  node?: string;
  root: string;
  requireSignature?: boolean;
  adoptState: string[];
  waitReady: string;
  waitLock: string;
  json?: boolean;
  plan?: boolean;
}

/** `stratum node install`: first-boot provisioning, what cloud-init runs. */
export function installCommand(group: Command, ctx: Context, deps: Deps): void {
  group.command("install")
    .description(
      "first-boot provisioning (cloud-init's command): verify and install the bundle, build and " +
        "start slot a, wait until healthy, write /etc/stratum/node.json, and make the stack come " +
        "up at every boot. Idempotent.",
    )
    .requiredOption("--mode <mode>", `isolation mode (${isolation.modes.join(", ")})`)
    .requiredOption("--bundle <dir>", "bundle directory with one subdirectory per mode")
    .option("--node <name>", "the node's name (default: this host's name)")
    .option("--root <dir>", "prefix for every host path (tests use a scratch tree)", "/")
    .option("--require-signature", "refuse an unsigned bundle even when no key is trusted")
    .option(
      "--adopt-state <dir>",
      "a state directory of the stack that already holds this node's data (what cloud-init or " +
        "kubeadm join provisioned): adopted as it is; repeat for each",
      (v: string, all: string[]) => [...all, v],
      [] as string[],
    )
    .option("--wait-ready <duration>", "how long the stack may take to become healthy", "2m")
    .option("--wait-lock <duration>", "wait this long for a migration's lock", "0s")
    .option("--plan", planHelp)
    .addOption(jsonOption())
    .addHelpText(
      "after",
      "\nRun it again on an installed node with the same mode and bundle: it changes nothing\n" +
        "and exits 0. Another mode or another bundle: exit 2, nothing changed (a mode change is\n" +
        "`stratum migrate run`). A failure part-way exits 1, removes what it wrote, and leaves\n" +
        "the node retryable: run the same command again. /etc/stratum/node.json is written only\n" +
        "once the stack is healthy; an install that died before that is redone from the start.\n" +
        "\nA state directory of the stack that already holds data (a kubelet's credentials that\n" +
        "cloud-init or kubeadm join wrote) is refused unless named with --adopt-state DIR: it is\n" +
        "then marked as this node's, and nothing in it is changed or copied.\n" +
        "\nExit codes: 0 installed or already installed, 1 failed (retry it), 2 bad input or\n" +
        "refused (nothing changed), 3 node.json or the journal cannot be read, 75 a migration\n" +
        "holds the lock, 128+N interrupted by signal N (130 SIGINT, 143 SIGTERM, 129 SIGHUP).\n" +
        "With --plan: the checks only, the version and the steps, nothing changed; 0 it would\n" +
        "install (or has nothing to do), else the code the install would refuse with.\n" +
        "\nExample (cloud-init runcmd):\n" +
        "  stratum node install --mode nspawn --bundle /srv/stratum-bundle --json",
    )
    .action(async (opts: InstallFlags) => {
      const out = ctx.output(opts);
      const mode = checkMode(opts.mode);
      const waitReadyMs = parseDuration("--wait-ready", opts.waitReady);
      const waitLockMs = parseDuration("--wait-lock", opts.waitLock, true);
      const modeDir = await Deno.stat(join(opts.bundle, mode)).catch(() => undefined);
      if (!modeDir?.isDirectory) {
        throw new ErrUsage(`--bundle ${opts.bundle} has no ${mode} directory`);
      }
      const name = opts.node ?? Deno.hostname();
      if (!/^[A-Za-z0-9][A-Za-z0-9.-]{0,62}$/.test(name)) {
        throw new ErrUsage(`--node ${JSON.stringify(name)} is not a host name`);
      }
      const paths = await rootPaths(opts.root);
      if (opts.plan) {
        const p = await node.planInstall({
          paths,
          mode,
          node: name,
          ...(opts.node !== undefined ? { nodeAsked: true } : {}),
          bundle: opts.bundle,
          ...(opts.requireSignature ? { requireSignature: true } : {}),
          ...(opts.adoptState.length ? { adoptState: opts.adoptState } : {}),
          waitReadyMs,
          lock: lockOptions(out, `stratum node install --mode ${mode}`, waitLockMs),
        });
        ctx.exitCode = reportPlan(out, p, "stratum node install");
        return;
      }
      const refuse = (message: string) => {
        out.error(message);
        out.result(
          { outcome: "refused", mode, message, nextAction: "nothing was changed; see the message" },
          () => [],
        );
        return ExitUsage;
      };
      let r: node.Installed;
      try {
        r = await node.provision({
          paths,
          systemctl: deps.systemctl(),
          mode,
          node: name,
          ...(opts.node !== undefined ? { nodeAsked: true } : {}),
          bundle: opts.bundle,
          self: deps.selfCommand,
          waitReadyMs,
          ...(opts.requireSignature ? { requireSignature: true } : {}),
          ...(opts.adoptState.length ? { adoptState: opts.adoptState } : {}),
          lock: lockOptions(out, `stratum node install --mode ${mode}`, waitLockMs),
          signal: deps.interrupted,
          log: (l) => out.log(l),
          ...afterStep(deps),
        });
      } catch (err) {
        if (
          err instanceof bundle.BundleError || err instanceof node.ErrInstalledOtherwise ||
          err instanceof isolation.ErrBadStack || err instanceof isolation.ErrState
        ) {
          ctx.exitCode = refuse(err.message);
          return;
        }
        // Bad input, a held lock, an unreadable node.json or journal are the
        // program's to report (exit 2, 75, 3), as for every command.
        if (
          err instanceof node.ErrBadRequest || err instanceof host.ErrBusy ||
          err instanceof isolation.ErrBadNodeConfig || is(err, migrate.ErrCorruptJournal)
        ) throw err;
        const reason = deps.interrupted.aborted ? deps.interrupted.reason : undefined;
        const message = messageOf(err);
        out.error(`node install failed: ${message}`);
        out.result(
          {
            outcome: reason instanceof Interrupted ? "interrupted" : "failed",
            mode,
            message,
            nextAction:
              "fix what the message names, then run the same stratum node install again: it redoes what did not finish",
          },
          () => [],
        );
        ctx.exitCode = reason instanceof Interrupted ? reason.exitCode : ExitFailed;
        return;
      }
      for (const w of r.warnings) out.log(`warning: ${w}`);
      out.result(
        {
          outcome: r.changed ? "installed" : "already-installed",
          changed: r.changed,
          mode: r.mode,
          slot: r.slot,
          node: r.node,
          bundle: { digest: r.bundleDigest, ...(r.keyId ? { keyId: r.keyId } : {}) },
          warnings: r.warnings,
          nextAction: "none",
        },
        () => [
          r.changed
            ? `installed: ${r.mode} mode, slot ${r.slot}, node ${r.node}, healthy`
            : `already installed: ${r.mode} mode, slot ${r.slot}, node ${r.node}, healthy; nothing changed`,
          `bundle: manifest sha256 ${r.bundleDigest}${
            r.keyId ? `, signed by trusted key ${r.keyId}` : ""
          }`,
        ],
      );
      ctx.exitCode = ExitOK;
    });
}

function afterStep(deps: Deps): { afterStep?: (step: string) => Promise<void> } {
  const hook = deps.killSelf && node.installFailpoint(deps.failpoint, deps.killSelf);
  return hook ? { afterStep: hook } : {};
}
