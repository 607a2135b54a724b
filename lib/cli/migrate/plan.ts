import type { Command } from "commander";
import * as isolation from "../../isolation/mod.ts";
import * as migrate from "../../migrate/mod.ts";
import * as node from "../../node/mod.ts";
import { ExitOK, ExitUsage } from "../exit.ts";
import type { Deps } from "../deps.ts";
import { rootPaths } from "../flags.ts";
import type { Context } from "../program.ts";
import { checkTarget, targetCommand, type TargetFlags } from "./target.ts";

/** `stratum migrate plan`. */
export function planCommand(group: Command, ctx: Context, _deps: Deps): void {
  targetCommand(group.command("plan"))
    .description(
      "check the target's requirements and the bundle, and print each step, what it changes and how it is undone; changes nothing",
    )
    .action(
      async (opts: TargetFlags) => {
        const out = ctx.output(opts);
        const t = checkTarget(opts);
        const { to, strategy } = t;
        const paths = await rootPaths(opts.root);
        const p = await node.planMigration({
          paths,
          to,
          strategy,
          ...(t.bundle ? { bundle: t.bundle } : {}),
          ...(t.requireSignature ? { requireSignature: true } : {}),
          ...(t.allowDowngrade ? { allowDowngrade: true } : {}),
          ...(t.wipeState ? { wipeState: true } : {}),
          waitReadyMs: t.waitReadyMs,
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
