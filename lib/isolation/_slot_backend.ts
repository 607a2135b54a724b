// What both real backends share: a slot's stack is started, stopped and
// destroyed through its stratum-<slot>.target the same way in every mode;
// only how a slot is prepared differs.

import type { HostPaths, Systemctl } from "../host/mod.ts";
import { destroySlot, startSlot, stopSlot } from "./_units.ts";
import { readStack, type Stack } from "./stack.ts";
import { checkState, claimState, ensureIdentity } from "./state.ts";
import type { Backend, CallOptions } from "./backend.ts";
import type { Mode } from "./mode.ts";
import type { NodeSpec, SlotRef } from "./slot.ts";

/** What the real backends need: where host paths are, and systemctl. */
export interface BackendDeps {
  readonly paths: HostPaths;
  readonly systemctl: Systemctl;
}

export abstract class SlotBackend implements Backend {
  abstract readonly mode: Mode;
  protected readonly deps: BackendDeps;

  constructor(deps: BackendDeps) {
    this.deps = deps;
  }

  abstract prepare(spec: NodeSpec, opts?: CallOptions): Promise<SlotRef>;

  /**
   * Starts the slot's stack once its state directories are checked to be
   * this node's own marked data: a stack never starts on an empty or foreign
   * directory (ErrState), whether for a migration, a rollback, a resume or a
   * boot.
   */
  async start(ref: SlotRef, opts: CallOptions = {}): Promise<void> {
    const stack = await readStack(this.deps.paths.slot(ref.slot));
    await checkState(this.deps.paths, stack.state);
    await startSlot(this.deps.paths, this.deps.systemctl, ref.slot, opts);
  }

  async stop(ref: SlotRef, opts: CallOptions = {}): Promise<void> {
    await stopSlot(this.deps.paths, this.deps.systemctl, ref.slot, opts);
  }

  async destroy(ref: SlotRef, opts: CallOptions = {}): Promise<void> {
    await destroySlot(this.deps.paths, this.deps.systemctl, ref.slot, opts);
  }
}

/**
 * Makes and marks the state directories `spec.claim` names that the stack
 * declares (absent ones, or empty unmarked ones no running stack uses), with
 * the node identity, made by the first of them.
 */
export async function claimFor(paths: HostPaths, spec: NodeSpec, stack: Stack): Promise<void> {
  const claim = stack.state.filter((p) => spec.claim?.includes(p));
  if (claim.length === 0) return;
  await claimState(paths, claim, await ensureIdentity(paths, spec.node));
}
