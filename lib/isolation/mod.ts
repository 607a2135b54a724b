/**
 * Isolation modes and the backend interface a migration drives.
 *
 * A node stack runs in one {@linkcode Mode}: `host` (systemd units on the
 * host) or `nspawn` (a systemd-nspawn machine). Each mode's stack lives in a
 * blue/green {@linkcode Slot}; a migration builds the target in the slot the
 * source does not use.
 *
 * @example Name the slot a migration from slot a builds
 * ```ts
 * import * as isolation from "./mod.ts";
 * const target: isolation.SlotRef = { mode: "nspawn", slot: isolation.otherSlot("a") };
 * ```
 *
 * @module
 */

export { isMode, type Mode, modes } from "./mode.ts";
export { isSlot, type NodeSpec, otherSlot, type Slot, type SlotRef, slots } from "./slot.ts";
export type { Backend, CallOptions } from "./backend.ts";
