// What both real backends share: a slot's stack is started, stopped and
// destroyed through its stratum-<slot>.target the same way in every mode;
// only how a slot is prepared differs.

import * as bundle from "../bundle/mod.ts";
import type { HostPaths, Systemctl } from "../host/mod.ts";
import { destroySlot, startSlot, stopSlot } from "./_slot_control.ts";
import { readStack, type Stack } from "./stack.ts";
import { checkState, claimState, ensureIdentity } from "./state.ts";
import type { Backend, CallOptions } from "./backend.ts";
import type { Mode } from "./mode.ts";
import type { NodeSpec, Slot, SlotRef } from "./slot.ts";

/** What the real backends need: where host paths are, and systemctl. */
export interface BackendDeps {
  readonly paths: HostPaths;
  readonly systemctl: Systemctl;
}

export abstract class SlotBackend implements Backend {
  abstract readonly mode: Mode;
  protected readonly deps: BackendDeps;
  /** Slots this process built and checked (see {@linkcode built}). */
  readonly #checked = new Set<Slot>();

  /** Checks a slot prepare just built against its manifest, so start need not again. */
  protected async built(slot: Slot): Promise<void> {
    await bundle.checkSlot(this.deps.paths.slot(slot));
    this.#checked.add(slot);
  }

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
    const slotDir = this.deps.paths.slot(ref.slot);
    // What root is about to run is what was verified: one hash pass over the
    // slot's files against its manifest, unless this process just built and
    // checked it (a migration's target, between prepare and start).
    if (!this.#checked.has(ref.slot)) await bundle.checkSlot(slotDir);
    const stack = await readStack(slotDir);
    await checkState(this.deps.paths, stack.state);
    await startSlot(this.deps.paths, this.deps.systemctl, ref.slot, opts);
  }

  async stop(ref: SlotRef, opts: CallOptions = {}): Promise<void> {
    await stopSlot(this.deps.paths, this.deps.systemctl, ref.slot, opts);
  }

  async destroy(ref: SlotRef, opts: CallOptions = {}): Promise<void> {
    this.#checked.delete(ref.slot);
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
  await claimState(paths, claim, await ensureIdentity(paths, spec.node), spec.adopt ?? []);
}
