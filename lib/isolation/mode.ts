/** Where the node stack runs: on the host under systemd, or in a systemd-nspawn machine. */
export type Mode = "host" | "nspawn";

/** Every mode, in the order help texts list them. */
export const modes: readonly Mode[] = Object.freeze(["host", "nspawn"]);

/** Reports whether `s` names a mode, for input checks at the CLI boundary. */
export function isMode(s: unknown): s is Mode {
  return typeof s === "string" && (modes as readonly string[]).includes(s);
}
