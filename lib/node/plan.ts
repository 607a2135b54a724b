import type * as host from "../host/mod.ts";
import { messageOf } from "../errors/mod.ts";
import * as isolation from "../isolation/mod.ts";
import * as migrate from "../migrate/mod.ts";
import { appliedNode, nextFor } from "./applied.ts";
import { preflight } from "./preflight.ts";
import { loadJournal } from "./recorded.ts";

/** One step of a migration as `stratum migrate plan` shows it. */
export interface PlannedStep {
  /** The journal step recorded before it, or the unrecorded checks. */
  readonly step: string;
  readonly does: string;
  readonly changes: string;
  readonly undo: string;
}

/** The checks and the download both strategies start with, before the journal. */
function unrecorded(
  paths: host.HostPaths,
  to: isolation.Mode,
  bundle: string | undefined,
  slot: string,
  more: string,
): PlannedStep[] {
  return [
    {
      step: "(preflight)",
      does: `check: modes differ, ${
        to === "nspawn" ? "systemd-nspawn installed, " : ""
      }bundle verifies, ${slot}disk space, the target's state directories are the node's marked data (or new to it)${more}`,
      changes: "nothing",
      undo: "-",
    },
    {
      step: "(download)",
      does: bundle
        ? `copy ${bundle}/${to} to ${paths.bundle(to)} and verify every file`
        : `verify the installed bundle ${paths.bundle(to)}`,
      changes: bundle ? paths.bundle(to) : "nothing",
      undo: "not needed: the source does not use it",
    },
  ];
}

/** The steps an in-place migration will take on this node, with what each changes and how it is undone. */
export function plan(o: {
  paths: host.HostPaths;
  from: isolation.Mode;
  to: isolation.Mode;
  sourceSlot: isolation.Slot;
  bundle?: string;
  waitReadyMs: number;
  /**
   * An upgrade or rollback (the same mode): the release's mode directory
   * (the operator's bundle, or the kept release), staged beside the
   * installed one rather than replacing it.
   */
  release?: { readonly modeDir: string; readonly downgrade: boolean };
}): PlannedStep[] {
  const { paths, from, to } = o;
  const a = o.sourceSlot;
  const b = isolation.otherSlot(a);
  const ta = isolation.targetUnit(a);
  const tb = isolation.targetUnit(b);
  const r = o.release;
  return [
    ...(r
      ? [
        {
          step: "(preflight)",
          does: `check: the release verifies${
            r.downgrade ? "" : ", is not older than the running one"
          }, slot ${b} free, disk space, the state directories are the node's marked data (or new to it)`,
          changes: "nothing",
          undo: "-",
        },
        {
          step: "(download)",
          does: `copy ${r.modeDir} beside ${paths.bundle(to)} and verify every file`,
          changes: `${
            paths.bundle(to)
          }'s staged copy (the installed link moves once ${tb} is healthy)`,
          undo: "the staged copy is removed",
        },
      ]
      : unrecorded(paths, to, o.bundle, `slot ${b} free, `, "")),
    {
      step: "preparing",
      does: `snapshot host config; build slot ${b} (${to} mode) and load its units, not started`,
      changes: `${paths.snapshotDir}, ${paths.slot(b)}, ${tb} and its services, ${
        isolation.snapshotFiles().join(", ")
      }`,
      undo: `destroy slot ${b}; restore the host config from the snapshot`,
    },
    {
      step: "stopping-source",
      does: `stop ${ta} (${from} mode); remove leftover links, chains and BPF pins`,
      changes: "the node stack stops: downtime starts here",
      undo: `start ${ta}`,
    },
    {
      step: "starting-target",
      does: `check the state directories are the node's marked data, then start ${tb}`,
      changes:
        `the ${to} stack runs on the node's data (state directories are never copied or removed)`,
      undo: `destroy slot ${b}`,
    },
    {
      step: "persisting",
      does: `point ${paths.nodeConfig} at ${to} mode, slot ${b}`,
      changes: `${paths.nodeConfig} (the source's kept as ${paths.nodeConfigSaved})`,
      undo: `put the source's ${paths.nodeConfig} back`,
    },
    {
      step: "awaiting-ready",
      does: `wait up to ${
        Math.round(o.waitReadyMs / 1000)
      } s for ${tb} active and its health endpoint answering`,
      changes: "nothing",
      undo: "on timeout: everything above, in reverse, and start the source",
    },
    {
      step: "ready",
      does: `remove slot ${a} and its units; install ${to} mode's firewall flush unit and ${
        to === "nspawn" ? "apt pins" : "remove stratum's apt pins"
      }; discard the snapshot`,
      changes: `${paths.slot(a)}, ${ta}, ${paths.aptPreferencesDir}, ${isolation.firewallUnit}`,
      undo: "not undone: the target is proven; an interrupted cleanup is finished by resume",
    },
    { step: "complete", does: "done", changes: "-", undo: "-" },
  ];
}

/** The steps a reprovision will take: the handoff resets the node, then installs it in the target mode. */
export function planReprovision(o: {
  paths: host.HostPaths;
  from: isolation.Mode;
  to: isolation.Mode;
  bundle?: string;
  wipeState?: boolean;
}): PlannedStep[] {
  const { paths, from, to } = o;
  return [
    ...unrecorded(
      paths,
      to,
      o.bundle,
      "",
      o.wipeState ? ", the wipe can finish (no mount below a state directory)" : "",
    ),
    {
      step: "reprovisioning",
      does:
        `record the journal, install the boot unit, start the handoff (${"stratum-reprovision.service"}), which resets the node: stop and destroy both slots (${from} mode)${
          o.wipeState ? ", empty the state directories (--wipe-state)" : ", the node's data kept"
        }, remove leftover links and chains, move ${paths.nodeConfig} aside, undo ${from} mode's host preparation`,
      changes: `the node stack stops: downtime starts here; ${paths.slotsDir}, ${paths.nodeConfig}`,
      undo: "not undone: the handoff goes on to the bootstrap (a reprovision replaces the node)",
    },
    {
      step: "bootstrapping",
      does: `install the node in ${to} mode from ${
        paths.bundle(to)
      } (node install), retried up to 3 times`,
      changes: `slot a (${to} mode), ${paths.nodeConfig}, ${to} mode's host preparation`,
      undo: "not undone: after the third failed attempt the journal says failed (needs attention)",
    },
    { step: "bootstrapped", does: "done", changes: "-", undo: "-" },
  ];
}

/** What `stratum migrate plan` found: the steps, and preflight's verdict. */
export interface Planned {
  readonly current: isolation.NodeConfig;
  readonly to: isolation.Mode;
  readonly strategy: migrate.Strategy;
  readonly steps: readonly PlannedStep[];
  /** Why the migration would be refused, or undefined when preflight passed. */
  readonly refused?: string;
  readonly checked?: Awaited<ReturnType<typeof preflight>>;
}

/**
 * `stratum migrate plan`: the steps a migration of this node would take,
 * in the strategy asked for, and whether preflight passes. Changes nothing:
 * no lock, no journal, no download (preflight verifies the bundle where it
 * is). A journal in the way is a refusal naming what to do about it.
 */
export async function planMigration(o: {
  paths: host.HostPaths;
  to: isolation.Mode;
  strategy: migrate.Strategy;
  bundle?: string;
  requireSignature?: boolean;
  allowDowngrade?: boolean;
  wipeState?: boolean;
  waitReadyMs: number;
}): Promise<Planned> {
  const { paths, to } = o;
  const j = await loadJournal(new migrate.JournalStore(paths.journal));
  const current = await appliedNode(paths);
  const reprovision = o.strategy === migrate.StrategyReprovision;
  const steps = reprovision
    ? planReprovision({
      paths,
      from: current.mode,
      to,
      ...(o.bundle ? { bundle: o.bundle } : {}),
      ...(o.wipeState ? { wipeState: true } : {}),
    })
    : plan({
      paths,
      from: current.mode,
      to,
      sourceSlot: current.slot,
      ...(o.bundle ? { bundle: o.bundle } : {}),
      waitReadyMs: o.waitReadyMs,
    });
  const base = { current, to, strategy: o.strategy, steps };
  if (j) return { ...base, refused: `A migration journal exists (step ${j.step}): ${nextFor(j)}` };
  try {
    const checked = await preflight({
      paths,
      from: current.mode,
      to,
      sourceSlot: current.slot,
      bundleModeDir: o.bundle ? `${o.bundle}/${to}` : paths.bundle(to),
      ...(o.requireSignature ? { requireSignature: true } : {}),
      ...(o.allowDowngrade ? { allowDowngrade: true } : {}),
    });
    if (reprovision && o.wipeState) {
      const source = await isolation.readStack(paths.slot(current.slot)).then(
        (s) => s.state,
        () => [] as readonly string[],
      );
      const target = checked.state.map((p) => p.path);
      await isolation.checkWipe(paths, [...new Set([...source, ...target])]);
    }
    return { ...base, checked };
  } catch (err) {
    return { ...base, refused: messageOf(err) };
  }
}
