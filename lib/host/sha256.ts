// sha256 without Node's crypto at start-up: loading node:crypto costs about
// as much as the runtime's whole start, and the status commands hash at
// most a manifest. Small inputs go through WebCrypto; the streaming hash of
// a bundle's files loads node:crypto the first time it is needed.

import type { Hash } from "node:crypto";

let nodeCrypto: Promise<typeof import("node:crypto")> | undefined;

/** The hex sha256 of `data`, held whole in memory. */
export async function sha256Hex(data: Uint8Array<ArrayBuffer>): Promise<string> {
  const d = new Uint8Array(await crypto.subtle.digest("SHA-256", data));
  return Array.from(d, (b) => b.toString(16).padStart(2, "0")).join("");
}

/** A streaming sha256, for inputs too large to hold. */
export async function sha256Stream(): Promise<Hash> {
  const { createHash } = await (nodeCrypto ??= import("node:crypto"));
  return createHash("sha256");
}
