import type * as host from "../host/mod.ts";
import * as isolation from "../isolation/mod.ts";

/** One step of a migration as `stratum migrate plan` shows it. */
export interface PlannedStep {
  /** The journal step recorded before it, or the unrecorded checks. */
  readonly step: string;
  readonly does: string;
  readonly changes: string;
  readonly undo: string;
}

/** The steps an in-place migration will take on this node, with what each changes and how it is undone. */
export function plan(o: {
  paths: host.HostPaths;
  from: isolation.Mode;
  to: isolation.Mode;
  sourceSlot: isolation.Slot;
  bundle?: string;
  waitReadyMs: number;
}): PlannedStep[] {
  const { paths, from, to } = o;
  const a = o.sourceSlot;
  const b = isolation.otherSlot(a);
  const ta = isolation.targetUnit(a);
  const tb = isolation.targetUnit(b);
  return [
    {
      step: "(preflight)",
      does: `check: modes differ, ${
        to === "nspawn" ? "systemd-nspawn installed, " : ""
      }bundle verifies, slot ${b} free, disk space, the target's state directories are the node's marked data (or new to it)`,
      changes: "nothing",
      undo: "-",
    },
    {
      step: "(download)",
      does: o.bundle
        ? `copy ${o.bundle}/${to} to ${paths.bundle(to)} and verify every file`
        : `verify the installed bundle ${paths.bundle(to)}`,
      changes: o.bundle ? paths.bundle(to) : "nothing",
      undo: "not needed: the source does not use it",
    },
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
      does:
        `remove slot ${a} and its units; install ${to} mode's firewall flush unit and apt pins; discard the snapshot`,
      changes: `${paths.slot(a)}, ${ta}, ${paths.aptPreferencesDir}, ${isolation.firewallUnit}`,
      undo: "not undone: the target is proven; an interrupted cleanup is finished by resume",
    },
    { step: "complete", does: "done", changes: "-", undo: "-" },
  ];
}
