import type { Command } from "commander";
import * as bundle from "../../bundle/mod.ts";
import { is, messageOf } from "../../errors/mod.ts";
import * as exec from "../../exec/mod.ts";
import * as isolation from "../../isolation/mod.ts";
import * as migrate from "../../migrate/mod.ts";
import * as node from "../../node/mod.ts";
import { ExitAttention, ExitFailed, ExitOK } from "../exit.ts";
import { type Common, common, rootPaths } from "../root_flags.ts";
import type { Context } from "../program.ts";
import type { Deps } from "../deps.ts";
import { journalDoc } from "../report.ts";
import { guard } from "../guard.ts";
import { currentHolder, unitLine, waitFor } from "../holder.ts";

/** How long a health verdict is retried before it says "not healthy". */
export const healthDeadlineMs = 5000;

/** `node status`'s flags: the common ones, and --verify. */
export type StatusOptions = Common & { verify?: boolean };

/** `stratum node status`: applied mode, slot, bundle, health. */
export function statusCommand(group: Command, ctx: Context, deps: Deps): void {
  common(group.command("status"))
    .description("the applied mode, slot, bundle digest and health of this node's stack")
    .option(
      "--verify",
      "hash every file of the installed bundle (default: the signature over its manifest, and " +
        "every file present with the size and mode recorded when it was installed)",
    )
    .addHelpText(
      "after",
      `\nThe health check is asked again for up to ${
        healthDeadlineMs / 1000
      } s, and at least twice, before it says "not healthy" (and why).\n` +
        "Exit codes: 0 installed and healthy (also key-retired: the running release was verified\n" +
        "by a key since removed from the trust store, a warning), 1 not installed or not\n" +
        "healthy, 3 node.json or\n" +
        "the journal cannot be read, the journal says failed (neither stack is known to run),\n" +
        "or the installed bundle does not verify.\n\n" +
        "Examples:\n  stratum node status --json\n  stratum node status --verify",
    )
    .action((opts: StatusOptions) => nodeStatus(opts, ctx, deps));
}

/** The body of `stratum node status`, for commander and for the fast path. */
export async function nodeStatus(opts: StatusOptions, ctx: Context, deps: Deps): Promise<void> {
  guard("node status", opts.root);
  const out = ctx.output(opts);
  const paths = await rootPaths(opts.root);
  let applied: isolation.NodeConfig | undefined;
  try {
    applied = await isolation.readNodeConfig(paths.nodeConfig);
  } catch (err) {
    out.error(messageOf(err));
    out.result({
      outcome: "needs-attention",
      installed: null,
      message: messageOf(err),
      nextAction: `inspect ${paths.nodeConfig}: it cannot be read`,
    }, () => ["needs-attention", `${paths.nodeConfig} cannot be read: ${messageOf(err)}`]);
    ctx.exitCode = ExitAttention;
    return;
  }
  // A journal that cannot be read is never "no journal": it is reported,
  // and the command needs attention (exit 3), as migrate status does.
  let journalError: string | undefined;
  const journal = await new migrate.JournalStore(paths.journal).load().catch((err) => {
    if (!is(err, migrate.ErrNoJournal)) journalError = messageOf(err);
    return undefined;
  });
  if (!applied) {
    out.result(
      {
        outcome: journalError ? "needs-attention" : "not-installed",
        installed: false,
        journal: journalDoc(journal),
        ...(journalError ? { journalError } : {}),
        nextAction: "stratum node install",
      },
      () => [
        journalError ? "needs-attention" : "not-installed",
        "not installed (no /etc/stratum/node.json): run stratum node install",
        ...(journalError ? [`migration journal cannot be read: ${journalError}`] : []),
      ],
    );
    ctx.exitCode = journalError ? ExitAttention : ExitFailed;
    return;
  }
  const modeDir = paths.bundle(applied.mode);
  const digest = await node.bundleDigest(modeDir);
  // What runs is the slot's copy; the other slot, while it exists (an
  // upgrade or migration in progress), is the previous or next version.
  const running = await node.bundleDigest(paths.slot(applied.slot));
  const other = isolation.otherSlot(applied.slot);
  const previous = await node.bundleDigest(paths.slot(other));
  // The release `node rollback` goes back to, while one is kept.
  const keptDir = await bundle.previousDir(modeDir).catch(() => undefined);
  // `trusted`: whether `node rollback` would take it under the trust store
  // as it is now (its signature by a trusted key, its files as installed);
  // after a key rotation, a release signed by the removed key is not.
  const kept = keptDir
    ? {
      digest: (await node.bundleDigest(keptDir)) ?? null,
      version: (await bundle.readIdentity(keptDir).catch(() => undefined))?.version ?? null,
      trusted: await node.bundlePolicy(paths, false, applied.mode)
        .then((policy) => bundle.checkInstalled(keptDir, policy))
        .then(() => true, () => false),
    }
    : null;
  // Independent checks, side by side: the bundle's hashes, systemd's view
  // of the slot, the stack's health endpoint (an operator waits on them).
  const unit = isolation.targetUnit(applied.slot);
  // By default the cheap check (no file hashed: every slot start hashes the
  // slot); --verify, or a copy an older stratum installed without its
  // record, hashes every file.
  //
  // A release whose signer was trusted when it was installed and has since
  // been removed from the trust store (a key rotation, docs/bundles.md) is
  // checked against the key its record names: still verified, with
  // `trusted: false` and a warning, so that the node is not "needs
  // attention" (exit 3) before the upgrade that moves it to the new key.
  // Files that do not match, or a signature that key did not make, are
  // still NOT verified (exit 3).
  const checkBundle = async (): Promise<
    {
      verified: boolean;
      check: string;
      keyId?: string;
      trusted?: boolean;
      warnings?: string[];
      message?: string;
    }
  > => {
    const dir = await bundle.installedDir(modeDir).catch(() => modeDir);
    const recordedSigner = await bundle.readRecordedSigner(dir);
    const policy = {
      ...await node.bundlePolicy(paths, false, applied.mode),
      ...(recordedSigner ? { recordedSigner } : {}),
    };
    const signed = (v: { keyId?: string; keyRetired?: true; warnings: readonly string[] }) =>
      v.keyId
        ? {
          keyId: v.keyId,
          trusted: v.keyRetired !== true,
          ...(v.keyRetired ? { warnings: v.warnings.filter((w) => w.includes("no longer")) } : {}),
        }
        : {};
    const full = async () => {
      const v = await bundle.verifyBundle(dir, { ...policy, installed: true });
      return { verified: true, check: "every file hashed", ...signed(v) };
    };
    try {
      if (opts.verify) return await full();
      try {
        const v = await bundle.checkInstalled(dir, policy);
        return { verified: true, check: "signature, sizes and modes", ...signed(v) };
      } catch (err) {
        if (err instanceof bundle.BundleError && err.file === bundle.recordName) {
          return await full();
        }
        throw err;
      }
    } catch (err) {
      return {
        verified: false,
        check: opts.verify ? "every file hashed" : "signature, sizes and modes",
        message: messageOf(err),
      };
    }
  };
  const probe = async () => {
    const stack = await isolation.readStack(paths.slot(applied.slot)).catch(() => undefined);
    const c = {
      paths,
      systemctl: deps.systemctl(),
      ref: { mode: applied.mode, slot: applied.slot },
      node: applied.node,
    };
    return {
      stack,
      answers: stack
        ? await isolation.probeStackWithin(stack, c, healthDeadlineMs)
        : { ok: false, detail: "the slot's stack.json cannot be read" },
    };
  };
  // dax loaded before the timed probe starts beside the first systemctl
  // call: its load holds the main thread, and a probe's timer running
  // meanwhile said "no answer" of a stack that answered (issue 37).
  await exec.load();
  // A change under way (it holds the migration lock): who, and, run with
  // --detach, the unit whose journal shows it.
  const [bundleCheck, active, { stack, answers }, holder] = await Promise.all([
    checkBundle(),
    deps.systemctl().isActive(unit).catch(() => false),
    probe(),
    currentHolder(paths.lock),
  ]);
  const healthy = active && answers.ok;
  // A failed journal: neither stack is known to run, whatever answers now.
  const failedJournal = journal?.step === migrate.StepFailed;
  const needsAttention = !bundleCheck.verified || journalError !== undefined || failedJournal;
  // Verified, but by a key since removed from the trust store: a warning
  // with an outcome of its own, `key-retired`, where it would be `healthy`
  // (exit 0: the stack runs what was signed, and the playbooks go on to the
  // upgrade that moves the node to the new key). Not `healthy`, so that
  // whatever reads the outcome sees the rotation is unfinished on this
  // node; not `needs-attention` (3), which is kept for what a person must
  // look at (files that do not match, a signature no recorded key made).
  const keyRetired = bundleCheck.verified && bundleCheck.trusted === false;
  const { warnings: _said, ...bundleFacts } = bundleCheck;
  const outcome = needsAttention
    ? "needs-attention"
    : !healthy
    ? "not-healthy"
    : keyRetired
    ? "key-retired"
    : "healthy";
  const runningVersion =
    (await bundle.readIdentity(paths.slot(applied.slot)).catch(() => undefined))?.version ?? null;
  out.result(
    {
      outcome,
      installed: true,
      mode: applied.mode,
      slot: applied.slot,
      node: applied.node,
      bundle: { digest: digest ?? null, ...bundleFacts },
      running: {
        slot: applied.slot,
        digest: running ?? null,
        version: runningVersion,
      },
      previous: previous ? { slot: other, digest: previous } : null,
      kept,
      health: {
        unit,
        active,
        url: stack?.health.url ?? null,
        healthy,
        ...(answers.ok ? {} : { detail: answers.detail }),
      },
      journal: journalDoc(journal),
      holder: holder ?? null,
      ...(journalError ? { journalError } : {}),
      ...(bundleCheck.warnings ? { warnings: bundleCheck.warnings } : {}),
      nextAction: !bundleCheck.verified
        ? "the installed bundle does not verify: rebuild the release from the operator's copy of it (stratum node repair --bundle DIR), or inspect it"
        : journalError
        ? "the journal cannot be read: stratum migrate status"
        : failedJournal
        ? "needs attention: a migration's rollback failed (journal failed), neither stack is known to run: stratum migrate status says what to check"
        : holder
        ? waitFor(holder, "stratum node status")
        : journal
        ? "a migration journal exists: stratum migrate status"
        : healthy && keyRetired
        ? `the running release was verified by key ${bundleCheck.keyId}, no longer trusted: upgrade to a release signed by a trusted key (stratum node upgrade --bundle DIR)`
        : healthy
        ? "none"
        : `the stack is not healthy: systemctl status ${unit}`,
    },
    // The verdict first, as one word: what a person or a script reads first.
    () => [
      outcome,
      `mode: ${applied.mode}, slot ${applied.slot}, node ${applied.node}`,
      `bundle: manifest sha256 ${digest ?? "missing"}, ${
        bundleCheck.verified
          ? `verified (${bundleCheck.check})${
            bundleCheck.keyId
              ? keyRetired
                ? `, signed by ${bundleCheck.keyId}: verified by a key no longer trusted (upgrade to a release signed by a trusted key)`
                : `, signed by ${bundleCheck.keyId}`
              : ""
          }`
          : `NOT verified (${bundleCheck.check}): ${bundleCheck.message}`
      }`,
      `running: release ${runningVersion ?? "?"}, slot ${applied.slot}, manifest sha256 ${
        running ?? "missing"
      }`,
      ...(previous
        ? [`other slot ${other}: manifest sha256 ${previous} (kept until the move ends)`]
        : []),
      kept
        ? `kept: release ${kept.version ?? "?"}, manifest sha256 ${kept.digest} (${
          kept.trusted
            ? "stratum node rollback"
            : "not verified by a trusted key: stratum node rollback would refuse it"
        })`
        : "kept: none",
      `health: ${unit} ${active ? "active" : "not active"}, ${stack?.health.url ?? "?"} ${
        healthy ? "answers" : `does not answer (${answers.detail})`
      }`,
      ...(journal ? [`migration journal: ${journal.step} (stratum migrate status)`] : []),
      ...(holder
        ? [
          holder.unit
            ? `change: "${holder.command}" ${unitLine({ ...holder, unit: holder.unit })}`
            : `change: "${holder.command}" runs (pid ${holder.pid}, since ${holder.startedAt}), holding the migration lock`,
        ]
        : []),
      ...(journalError
        ? [`migration journal cannot be read: ${journalError} (stratum migrate status)`]
        : []),
    ],
  );
  // A copy that does not verify, or a failed journal, needs attention
  // whatever the stack does.
  ctx.exitCode = needsAttention ? ExitAttention : active && healthy ? ExitOK : ExitFailed;
}
