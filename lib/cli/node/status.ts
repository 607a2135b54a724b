import type { Command } from "commander";
import * as bundle from "../../bundle/mod.ts";
import { messageOf } from "../../errors/mod.ts";
import * as isolation from "../../isolation/mod.ts";
import * as migrate from "../../migrate/mod.ts";
import * as node from "../../node/mod.ts";
import { ExitAttention, ExitFailed, ExitOK } from "../exit.ts";
import { type Common, common, rootPaths } from "../root_flags.ts";
import type { Context } from "../program.ts";
import type { Deps } from "../deps.ts";

/** `stratum node status`: applied mode, slot, bundle, health. */
export function statusCommand(group: Command, ctx: Context, deps: Deps): void {
  common(group.command("status"))
    .description("the applied mode, slot, bundle digest and health of this node's stack")
    .addHelpText(
      "after",
      "\nExit codes: 0 installed and healthy, 1 not installed or not healthy, 3 node.json or\n" +
        "the journal cannot be read.",
    )
    .action((opts: Common) => nodeStatus(opts, ctx, deps));
}

/** The body of `stratum node status`, for commander and for the fast path. */
export async function nodeStatus(opts: Common, ctx: Context, deps: Deps): Promise<void> {
  const out = ctx.output(opts);
  const paths = await rootPaths(opts.root);
  let applied: isolation.NodeConfig | undefined;
  try {
    applied = await isolation.readNodeConfig(paths.nodeConfig);
  } catch (err) {
    out.error(messageOf(err));
    out.result({ installed: null, message: messageOf(err) }, () => []);
    ctx.exitCode = ExitAttention;
    return;
  }
  const journal = await new migrate.JournalStore(paths.journal).load().catch(() => undefined);
  if (!applied) {
    out.result(
      { installed: false, journal: journal?.step ?? null, nextAction: "stratum node install" },
      () => ["not installed (no /etc/stratum/node.json): run stratum node install"],
    );
    ctx.exitCode = ExitFailed;
    return;
  }
  const modeDir = paths.bundle(applied.mode);
  const digest = await node.bundleDigest(modeDir);
  // What runs is the slot's copy; the other slot, while it exists (an
  // upgrade or migration in progress), is the previous or next version.
  const running = await node.bundleDigest(paths.slot(applied.slot));
  const other = isolation.otherSlot(applied.slot);
  const previous = await node.bundleDigest(paths.slot(other));
  // Independent checks, side by side: the bundle's hashes, systemd's view
  // of the slot, the stack's health endpoint (an operator waits on them).
  const unit = isolation.targetUnit(applied.slot);
  const checkBundle = async (): Promise<
    { verified: boolean; keyId?: string; message?: string }
  > => {
    try {
      const v = await bundle.verifyBundle(
        await bundle.installedDir(modeDir),
        await node.bundlePolicy(paths, false, applied.mode),
      );
      return { verified: true, ...(v.keyId ? { keyId: v.keyId } : {}) };
    } catch (err) {
      return { verified: false, message: messageOf(err) };
    }
  };
  const probe = async () => {
    const stack = await isolation.readStack(paths.slot(applied.slot)).catch(() => undefined);
    return { stack, answers: stack ? (await isolation.probeHealth(stack.health.url)).ok : false };
  };
  const [bundleCheck, active, { stack, answers }] = await Promise.all([
    checkBundle(),
    deps.systemctl().isActive(unit).catch(() => false),
    probe(),
  ]);
  const healthy = active && answers;
  out.result(
    {
      installed: true,
      mode: applied.mode,
      slot: applied.slot,
      node: applied.node,
      bundle: { digest: digest ?? null, ...bundleCheck },
      running: { slot: applied.slot, digest: running ?? null },
      previous: previous ? { slot: other, digest: previous } : null,
      health: { unit, active, url: stack?.health.url ?? null, healthy },
      journal: journal?.step ?? null,
    },
    () => [
      `mode: ${applied.mode}, slot ${applied.slot}, node ${applied.node}`,
      `bundle: manifest sha256 ${digest ?? "missing"}, ${
        bundleCheck.verified
          ? `verified${bundleCheck.keyId ? `, signed by ${bundleCheck.keyId}` : ""}`
          : `NOT verified: ${bundleCheck.message}`
      }`,
      `running: slot ${applied.slot}, manifest sha256 ${running ?? "missing"}`,
      ...(previous
        ? [`other slot ${other}: manifest sha256 ${previous} (kept until the move ends)`]
        : []),
      `health: ${unit} ${active ? "active" : "not active"}, ${stack?.health.url ?? "?"} ${
        healthy ? "answers" : "does not answer"
      }`,
      ...(journal ? [`migration journal: ${journal.step} (stratum migrate status)`] : []),
    ],
  );
  ctx.exitCode = active && healthy ? ExitOK : ExitFailed;
}
