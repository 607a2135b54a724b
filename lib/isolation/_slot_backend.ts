// What both real backends share: a slot's stack is started, stopped and
// destroyed through its stratum-<slot>.target the same way in every mode;
// only how a slot is prepared differs.

import type { HostPaths, Systemctl } from "../host/mod.ts";
import { destroySlot, startSlot, stopSlot } from "./_units.ts";
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

  async start(ref: SlotRef, opts: CallOptions = {}): Promise<void> {
    await startSlot(this.deps.paths, this.deps.systemctl, ref.slot, opts);
  }

  async stop(ref: SlotRef, opts: CallOptions = {}): Promise<void> {
    await stopSlot(this.deps.paths, this.deps.systemctl, ref.slot, opts);
  }

  async destroy(ref: SlotRef, opts: CallOptions = {}): Promise<void> {
    await destroySlot(this.deps.paths, this.deps.systemctl, ref.slot, opts);
  }
}
