import type { Mode } from "./mode.ts";
import type { NodeSpec, SlotRef } from "./slot.ts";

/** Options every backend call takes: a deadline the call must honour. */
export interface CallOptions {
  /** Aborts the call; a backend kills what it started and rejects. */
  readonly signal?: AbortSignal;
}

/**
 * Backend runs a node stack in one isolation mode. The migration is written
 * against this interface only, so it does not know how a mode works.
 *
 * Every method is idempotent: a resume after a crash repeats the call that may
 * have been under way, so repeating a finished call must succeed and change
 * nothing.
 */
export interface Backend {
  readonly mode: Mode;
  /**
   * Builds the slot named by `spec` and loads its units, never starting them.
   * A slot left half-built by a crash is rebuilt.
   */
  prepare(spec: NodeSpec, opts?: CallOptions): Promise<SlotRef>;
  /** Starts the slot's stack and returns once systemd reports it started. */
  start(ref: SlotRef, opts?: CallOptions): Promise<void>;
  /** Stops the slot's stack; a stack already stopped is fine. */
  stop(ref: SlotRef, opts?: CallOptions): Promise<void>;
  /** Stops the stack and removes its units and slot; a missing slot is fine. */
  destroy(ref: SlotRef, opts?: CallOptions): Promise<void>;
}
