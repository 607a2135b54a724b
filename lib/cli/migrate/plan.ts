import type { Command } from "commander";
import { Option } from "commander";
import * as isolation from "../../isolation/mod.ts";
import * as migrate from "../../migrate/mod.ts";
import * as node from "../../node/mod.ts";
import { parseDuration } from "../duration.ts";
import { ErrUsage, ExitOK, ExitUsage } from "../exit.ts";
import type { Deps } from "../deps.ts";
import {
  checkMode,
  checkStrategy,
  type Common,
  common,
  rootPaths,
  strategyOption,
  toOption,
} from "../flags.ts";
import type { Context } from "../program.ts";

/** `stratum migrate plan`. */
export function planCommand(group: Command, ctx: Context, _deps: Deps): void {
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
    .option(
      "--allow-downgrade",
      "accept a bundle older (BUNDLE.json's version) than the one this node runs",
    )
    .addOption(
      new Option("--wait-ready <duration>", "how long the target may take to become healthy")
        .default("2m"),
    )
    .option(
      "--wipe-state",
      "with --strategy reprovision: the reset empties the node's state directories (the plan checks the wipe can finish)",
    )
    .action(
      async (
        opts: Common & {
          to: string;
          strategy: string;
          bundle?: string;
          requireSignature?: boolean;
          allowDowngrade?: boolean;
          wipeState?: boolean;
          waitReady: string;
        },
      ) => {
        const out = ctx.output(opts);
        const to = checkMode(opts.to);
        const strategy = checkStrategy(opts.strategy);
        if (opts.wipeState && strategy !== migrate.StrategyReprovision) {
          throw new ErrUsage("--wipe-state goes with --strategy reprovision only");
        }
        const waitReadyMs = parseDuration("--wait-ready", opts.waitReady);
        const paths = await rootPaths(opts.root);
        const p = await node.planMigration({
          paths,
          to,
          strategy,
          ...(opts.bundle ? { bundle: opts.bundle } : {}),
          ...(opts.requireSignature ? { requireSignature: true } : {}),
          ...(opts.allowDowngrade ? { allowDowngrade: true } : {}),
          ...(opts.wipeState ? { wipeState: true } : {}),
          waitReadyMs,
        });
        const { current, steps, refused, checked } = p;
        for (const w of checked?.warnings ?? []) out.log(`warning: ${w}`);
        const inPlace = strategy === migrate.StrategyInPlace;
        out.result(
          {
            outcome: refused ? "refused" : "planned",
            from: current.mode,
            to,
            strategy,
            sourceSlot: current.slot,
            targetSlot: inPlace ? isolation.otherSlot(current.slot) : "a",
            preflight: refused || !checked ? { ok: false, message: refused } : {
              ok: true,
              bundle: {
                digest: checked.verified.manifestDigest,
                files: checked.bundleFiles,
                bytes: checked.bundleBytes,
                ...(checked.keyId ? { keyId: checked.keyId } : {}),
                ...(checked.verified.identity
                  ? { version: checked.verified.identity.version }
                  : {}),
              },
              freeBytes: checked.freeBytes,
              state: checked.state,
              warnings: checked.warnings,
            },
            steps,
            nextAction: refused
              ? "fix what the message names; nothing was changed"
              : "stratum migrate run with the same flags",
          },
          () => [
            inPlace
              ? `Migration of this node from ${current.mode} (slot ${current.slot}) to ${to} (slot ${
                isolation.otherSlot(current.slot)
              }), in place:`
              : `Reprovision of this node from ${current.mode} to ${to}: a reset, then a fresh install in ${to} mode (slot a):`,
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
            ...(checked?.state ?? []).map((s) =>
              `state ${s.path}: ${
                opts.wipeState
                  ? "emptied by the reset (--wipe-state), then claimed by the install"
                  : s.action === "keep"
                  ? "the node's data, used in place (never copied or removed)"
                  : "new to the target: made and marked at prepare"
              }`
            ),
            ...(checked?.warnings ?? []).map((w) => `warning: ${w}`),
          ],
        );
        ctx.exitCode = refused ? ExitUsage : ExitOK;
      },
    );
}
