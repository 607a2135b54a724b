import type { Command } from "commander";
import { Option } from "commander";
import { messageOf } from "../../errors/mod.ts";
import * as isolation from "../../isolation/mod.ts";
import * as migrate from "../../migrate/mod.ts";
import * as node from "../../node/mod.ts";
import { parseDuration } from "../duration.ts";
import { ExitOK, ExitUsage } from "../exit.ts";
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
    .action(
      async (
        opts: Common & {
          to: string;
          strategy: string;
          bundle?: string;
          requireSignature?: boolean;
          allowDowngrade?: boolean;
          waitReady: string;
        },
      ) => {
        const out = ctx.output(opts);
        const to = checkMode(opts.to);
        checkStrategy(opts.strategy);
        const waitReadyMs = parseDuration("--wait-ready", opts.waitReady);
        const paths = await rootPaths(opts.root);
        const store = new migrate.JournalStore(paths.journal);
        const j = await node.loadJournal(store);
        const current = await node.appliedNode(paths);
        const steps = node.plan({
          paths,
          from: current.mode,
          to,
          sourceSlot: current.slot,
          ...(opts.bundle ? { bundle: opts.bundle } : {}),
          waitReadyMs,
        });
        let refused: string | undefined = j
          ? `A migration journal exists (step ${j.step}): ${node.nextFor(j)}`
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
              ...(opts.allowDowngrade ? { allowDowngrade: true } : {}),
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
            ...(checked?.state ?? []).map((p) =>
              `state ${p.path}: ${
                p.action === "keep"
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
