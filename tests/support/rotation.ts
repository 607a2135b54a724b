// A key rotation on sandboxed nodes, each step as docs/bundles.md ("Rotating
// the signing key") tells an operator to run it: keys made with openssl,
// bundles signed with `stratum bundle sign`, public keys installed in and
// removed from the node's /etc/stratum/trust with `install` and `rm`.

import { join } from "node:path";
import { assertEquals } from "./assert.ts";
import { Node } from "./sandbox_node.ts";
import { scratchDir } from "./scratch.ts";
import { makeSigningKey } from "./tls.ts";

export const trustDir = "/etc/stratum/trust";

/** A release key pair (openssl), in a scratch directory the sandboxes see. */
export async function releaseKey(name: string): Promise<{ key: string; pub: string }> {
  return await makeSigningKey(await scratchDir(`key-${name}-`), name);
}

/** `stratum bundle sign DIR --key KEY` (on the release machine; here, the node's sandbox). */
export async function signBundle(n: Node, dir: string, key: string): Promise<void> {
  const r = await n.stratum(["bundle", "sign", dir, "--key", key]);
  assertEquals(r.code, 0, r.stderr);
}

/** `install -D -m 0644 PUB /etc/stratum/trust/NAME.pem` on the node. */
export async function addKey(n: Node, pub: string, name: string): Promise<void> {
  await n.sb.sh(`install -D -m 0644 ${pub} ${join(trustDir, `${name}.pem`)}`);
}

/** `rm /etc/stratum/trust/NAME.pem` on the node. */
export async function removeKey(n: Node, name: string): Promise<void> {
  await n.sb.sh(`rm ${join(trustDir, `${name}.pem`)}`);
}

/**
 * A node whose trust store holds key `name` and whose release 1 is signed by
 * it, installed with `stratum node install` in host mode.
 */
export async function signedNode(k: { key: string; pub: string }, name: string): Promise<Node> {
  const n = await Node.fresh("host");
  try {
    await signBundle(n, n.bundle, k.key);
    await addKey(n, k.pub, name);
    const r = await n.stratum([
      "node",
      "install",
      "--mode",
      "host",
      "--bundle",
      n.bundle,
      "--node",
      "node-1",
      "--json",
    ]);
    assertEquals([r.code, r.doc?.outcome], [0, "installed"], r.stdout + r.stderr);
    return n;
  } catch (err) {
    await n[Symbol.asyncDispose]();
    throw err;
  }
}
