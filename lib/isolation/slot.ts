import type { Mode } from "./mode.ts";

/**
 * The blue/green slots a node stack is built in. A migration prepares the
 * target in the slot the source does not use, so both exist until the target
 * is proven ready.
 */
export type Slot = "a" | "b";

/** Every slot. */
export const slots: readonly Slot[] = Object.freeze(["a", "b"]);

/** Reports whether `s` names a slot. */
export function isSlot(s: unknown): s is Slot {
  return s === "a" || s === "b";
}

/** The slot a migration away from `slot` builds its target in. */
export function otherSlot(slot: Slot): Slot {
  return slot === "a" ? "b" : "a";
}

/** Names one built slot and the mode whose stack it holds. */
export interface SlotRef {
  readonly mode: Mode;
  readonly slot: Slot;
}

/** What a backend needs to build a slot: which slot, and the node it runs. */
export interface NodeSpec {
  readonly slot: Slot;
  /** The node's name, as the stack reports it. */
  readonly node: string;
  /**
   * The verified artifacts for this mode (a bundle directory), laid into the
   * slot by prepare. Backends that need none may ignore it.
   */
  readonly bundleDir?: string;
  /**
   * State directories prepare may make (absent) or claim (empty, unmarked)
   * as this node's: those no running stack uses, which the caller found with
   * planState. Any other state directory must already be the node's marked
   * data, or the stack will not start.
   */
  readonly claim?: readonly string[];
  /**
   * Of `claim`, the directories that hold data the operator said is this
   * node's (`node install --adopt-state`): marked, nothing else changed.
   */
  readonly adopt?: readonly string[];
}
