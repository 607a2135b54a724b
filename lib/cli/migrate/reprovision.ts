// `stratum migrate run --strategy reprovision`: checks, downloads, records
// `reprovisioning`, and hands the rest to a transient systemd unit running
// `stratum migrate resume`, because this process may run inside the stack
// the reset stops.

import * as bundle from "../../bundle/mod.ts";
import * as exec from "../../exec/mod.ts";
import { messageOf } from "../../errors/mod.ts";
import type * as host from "../../host/mod.ts";
import * as isolation from "../../isolation/mod.ts";
import * as migrate from "../../migrate/mod.ts";
import * as node from "../../node/mod.ts";
import { ExitOK, ExitUsage } from "../exit.ts";
import { journalDoc } from "./report.ts";
import type { Output } from "../output.ts";

/** The handoff's transient unit: one fixed name, so systemd itself refuses a second. */
export const handoffUnit = "stratum-reprovision.service";

/** What a reprovision run needs. */
export interface ReprovisionRun {
  readonly paths: host.HostPaths;
  readonly out: Output;
  readonly systemctl: host.Systemctl;
  readonly current: isolation.NodeConfig;
  readonly to: isolation.Mode;
  readonly bundle?: string | undefined;
  readonly requireSignature: boolean;
  /** Wipe the node's state directories in the reset (`--wipe-state`). */
  readonly wipeState: boolean;
  readonly waitReadyMs: number;
  readonly self: node.SelfCommand;
  /** STRATUM_FAILPOINT, passed on to the handoff (a test aid). */
  readonly failpoint: string | undefined;
  readonly signal: AbortSignal;
}

/** Runs a reprovision up to the handoff; returns the exit code. The caller holds the lock. */
export async function runReprovision(o: ReprovisionRun): Promise<number> {
  const { paths, out } = o;
  const refuse = (message: string) => {
    out.error(`migrate run: refused: ${message}`);
    out.result(
      {
        command: "run",
        outcome: "refused",
        exitCode: ExitUsage,
        message,
        nextAction: "fix what the message names and run again; nothing was changed",
        journal: null,
      },
      () => [`run: refused`, `message: ${message}`],
    );
    return ExitUsage;
  };
  try {
    const checked = await node.preflight({
      paths,
      from: o.current.mode,
      to: o.to,
      sourceSlot: o.current.slot,
      bundleModeDir: o.bundle ? `${o.bundle}/${o.to}` : paths.bundle(o.to),
      requireSignature: o.requireSignature,
    });
    for (const w of checked.warnings) out.log(`warning: ${w}`);
    if (o.bundle) {
      out.log(`download: copying ${o.bundle}/${o.to} to ${paths.bundle(o.to)} and verifying it`);
      await bundle.installBundle(
        `${o.bundle}/${o.to}`,
        paths.bundle(o.to),
        await node.bundlePolicy(paths, o.requireSignature),
      );
    }
  } catch (err) {
    return refuse(messageOf(err));
  }
  const startedAt = new Date();
  if (o.wipeState) {
    // What the source and the target keep: the reset wipes it, before the
    // bootstrap makes it anew, empty and marked.
    const source = await isolation.readStack(paths.slot(o.current.slot)).then(
      (s) => s.state,
      () => [],
    );
    const target = await isolation.readStack(paths.bundle(o.to)).then((s) => s.state, () => []);
    const state = [...new Set([...source, ...target])];
    out.log(
      `wipe-state: the reset will remove ${state.join(", ") || "nothing (no state declared)"}`,
    );
    await node.requestWipe(paths, startedAt.toISOString(), state);
  }
  const store = new migrate.JournalStore(paths.journal);
  const journal = await store.save({
    version: migrate.JournalVersion,
    strategy: migrate.StrategyReprovision,
    from: o.current.mode,
    to: o.to,
    step: migrate.StepReprovisioning,
    startedAt,
    updatedAt: startedAt,
  }).catch(async (err) => {
    await node.dropWipeRequest(paths).catch(() => {});
    throw err;
  });
  // A power cut from here on is finished by the boot path.
  if (await node.installBootUnit(paths, o.self) && paths.root === "/") {
    await o.systemctl.daemonReload();
  }
  const argv = [
    "systemd-run",
    `--unit=${handoffUnit}`,
    "--collect",
    "--description=Stratum reprovision handoff",
    ...Object.entries(o.self.env ?? {}).map(([k, v]) => `--setenv=${k}=${v}`),
    ...(o.failpoint ? [`--setenv=STRATUM_FAILPOINT=${o.failpoint}`] : []),
    "--",
    ...o.self.argv,
    "migrate",
    "resume",
    "--root",
    paths.root,
    "--wait-lock",
    "10m",
    "--wait-ready",
    `${Math.ceil(o.waitReadyMs / 1000)}s`,
  ];
  const r = await exec.run(argv, { timeoutMs: 60_000, signal: o.signal }).catch((e) => e as Error);
  if (r instanceof Error || r.code !== 0) {
    // Nothing was reset: the journal must not make the next boot do it.
    await store.remove();
    await node.dropWipeRequest(paths);
    return refuse(
      `cannot start the handoff unit ${handoffUnit}: ${
        r instanceof Error ? r.message : r.stderr.trim() || `exit code ${r.code}`
      }`,
    );
  }
  const follow = [
    `journalctl -u ${handoffUnit} -f`,
    "stratum migrate status",
  ];
  out.result(
    {
      command: "run",
      outcome: "handed-off",
      exitCode: ExitOK,
      unit: handoffUnit,
      follow,
      message: null,
      nextAction:
        `the node is being reset and bootstrapped in ${o.to} mode by ${handoffUnit}; follow it with: ${
          follow.join(" ; ")
        }`,
      journal: journalDoc(journal),
    },
    () => [
      `run: handed off to ${handoffUnit} (reset, then bootstrap in ${o.to} mode)`,
      ...follow.map((f) => `follow: ${f}`),
    ],
  );
  return ExitOK;
}
