// A signing-key rotation on a live node (the sandbox's real systemd, through
// the artifact), run as docs/bundles.md ("Rotating the signing key") writes
// it, across two releases: release 1 signed by key A is installed; key B is
// added; release 2 is signed by B; key A is removed; the node upgrades.
//
// Issue 38's defect: with the old key removed, `node status` exited 3 on
// every node still running a release signed by it ("NOT verified … not a
// signature of SHA256SUMS by a trusted key"), and the playbooks stopped at
// their first task, before the upgrade that moves the node to the new key.
// Invariants: a release verified with a key since removed is `key-retired`,
// exit 0, with the warning "verified by a key no longer trusted"; the
// upgrade to the new key's release then works and status is clean; an
// installed copy whose files do not match, or whose signature is not by the
// key recorded at install, is still exit 3.

import { dirname, join } from "node:path";
import { assert, assertEquals } from "./support/assert.ts";
import { makeBundle } from "./support/bundle.ts";
import { nspawnUnavailable } from "./support/sandbox.ts";
import type { Node } from "./support/sandbox_node.ts";
import { scratchDir } from "./support/scratch.ts";
import { noOpenssl } from "./support/tls.ts";
import { addKey, releaseKey, removeKey, signBundle, signedNode } from "./support/rotation.ts";

const why = nspawnUnavailable ?? noOpenssl;
// deno-lint-ignore no-console
if (why) console.error(`key rotation tests are skipped: ${why}`);
const ignore = why !== undefined;

/** The key id docs/bundles.md computes with openssl. */
async function keyId(n: Node, pub: string): Promise<string> {
  return (await n.sb.sh(`openssl pkey -pubin -in ${pub} -outform DER | sha256sum | cut -c1-16`))
    .trim();
}

const installed = "/var/lib/stratum/bundles/host";

async function status(n: Node, ...more: string[]) {
  return await n.stratum(["node", "status", "--json", ...more]);
}

Deno.test({
  name:
    "key rotation, old key removed before the upgrade: key-retired (exit 0), the upgrade to the new key works, tampering is still 3",
  ignore,
  async fn() {
    const a = await releaseKey("release-a");
    const b = await releaseKey("release-b");
    await using n = await signedNode(a, "release-a");
    const idA = await keyId(n, a.pub);
    const idB = await keyId(n, b.pub);
    const s0 = await status(n);
    assertEquals([s0.code, s0.doc?.outcome], [0, "healthy"], s0.stdout + s0.stderr);
    assertEquals([s0.doc.bundle.keyId, s0.doc.bundle.trusted], [idA, true]);

    // 1. The new key on every node: both trusted, nothing else changes.
    await addKey(n, b.pub, "release-b");
    const s1 = await status(n);
    assertEquals([s1.code, s1.doc?.outcome, s1.doc.bundle.keyId], [0, "healthy", idA]);
    // 2. The next release signed with the new key.
    const v2 = await makeBundle(await scratchDir("bundle-v2-"), { release: "2" });
    await signBundle(n, v2, b.key);
    // The old key removed before this node upgraded.
    await removeKey(n, "release-a");

    // The running release is still what key A signed: a warning, exit 0.
    for (const more of [[], ["--verify"]]) {
      const s = await status(n, ...more);
      assertEquals([s.code, s.doc?.outcome], [0, "key-retired"], s.stdout + s.stderr);
      assertEquals(
        [s.doc.bundle.verified, s.doc.bundle.trusted, s.doc.bundle.keyId],
        [true, false, idA],
      );
      assert(s.doc.warnings?.[0]?.includes("verified by a key no longer trusted"), s.stdout);
      assert(s.doc.nextAction.includes("stratum node upgrade"), s.doc.nextAction);
    }
    const human = await n.stratum(["node", "status"]);
    assertEquals(human.code, 0, human.stdout + human.stderr);
    assert(human.stdout.includes("verified by a key no longer trusted"), human.stdout);

    // Tampering is still caught, with the key retired: 3.
    const real = join(dirname(installed), (await n.sb.sh(`readlink ${installed}`)).trim());
    // A signature of the installed manifest by a key the node never recorded.
    const c = await releaseKey("other");
    await n.sb.sh(
      `cp ${real}/SHA256SUMS.sig /run/sig.orig && openssl pkeyutl -sign -rawin -inkey ${c.key} ` +
        `-in ${real}/SHA256SUMS -out ${real}/SHA256SUMS.sig`,
    );
    const forged = await status(n);
    assertEquals([forged.code, forged.doc?.outcome], [3, "needs-attention"], forged.stdout);
    assertEquals(forged.doc.bundle.verified, false);
    assert(forged.doc.bundle.message.includes("not a signature"), forged.doc.bundle.message);
    await n.sb.sh(`cat /run/sig.orig > ${real}/SHA256SUMS.sig`);
    // A byte of an installed file changed, its size kept: --verify hashes it.
    const file = `${real}/stack/stack.py`;
    await n.sb.sh(`cp ${file} /run/file.orig && printf X | dd of=${file} bs=1 seek=0 conv=notrunc`);
    const flipped = await status(n, "--verify");
    assertEquals([flipped.code, flipped.doc?.outcome], [3, "needs-attention"], flipped.stdout);
    assert(flipped.doc.bundle.message.includes("stack/stack.py"), flipped.doc.bundle.message);
    // A file grown: the cheap check sees it.
    await n.sb.sh(`echo >> ${file}`);
    const grown = await status(n);
    assertEquals([grown.code, grown.doc?.outcome], [3, "needs-attention"], grown.stdout);
    await n.sb.sh(`cat /run/file.orig > ${file}`);
    const back = await status(n, "--verify");
    assertEquals([back.code, back.doc?.outcome], [0, "key-retired"], back.stdout + back.stderr);

    // 3. The upgrade moves the node to the new key.
    const up = await n.stratum(["node", "upgrade", "--bundle", v2, "--json"]);
    assertEquals([up.code, up.doc?.outcome], [0, "complete"], up.stdout + up.stderr);
    assertEquals((await n.stratum(["migrate", "ack"])).code, 0);
    const s3 = await status(n, "--verify");
    assertEquals([s3.code, s3.doc?.outcome], [0, "healthy"], s3.stdout + s3.stderr);
    assertEquals([s3.doc.bundle.keyId, s3.doc.bundle.trusted, s3.doc.warnings], [
      idB,
      true,
      undefined,
    ]);
    assertEquals(s3.doc.running.version, "2");
    // The kept release 1 is key A's: `node rollback` would refuse it, and status says so.
    assertEquals([s3.doc.kept?.version, s3.doc.kept?.trusted], ["1", false]);
    const before = await n.state();
    const rb = await n.stratum(["node", "rollback", "--json"]);
    assertEquals(rb.code, 2, rb.stdout + rb.stderr);
    assert(rb.stderr.includes("does not verify under this node's trust now"), rb.stderr);
    assertEquals((await n.state()).files, before.files, "a refused rollback changed nothing");
  },
});

Deno.test({
  name:
    "key rotation in the documented order (add, sign, upgrade, remove): status clean at every step",
  ignore,
  async fn() {
    const a = await releaseKey("release-a");
    const b = await releaseKey("release-b");
    await using n = await signedNode(a, "release-a");
    const idB = await keyId(n, b.pub);
    await addKey(n, b.pub, "release-b");
    const v2 = await makeBundle(await scratchDir("bundle-v2-"), { release: "2" });
    await signBundle(n, v2, b.key);
    const up = await n.stratum(["node", "upgrade", "--bundle", v2, "--json"]);
    assertEquals([up.code, up.doc?.outcome], [0, "complete"], up.stdout + up.stderr);
    assertEquals((await n.stratum(["migrate", "ack"])).code, 0);
    const s = await status(n);
    // Both keys trusted: the kept release 1 can still be rolled back to.
    assertEquals([s.code, s.doc?.outcome, s.doc.bundle.keyId], [0, "healthy", idB]);
    assertEquals(s.doc.kept?.trusted, true);
    await removeKey(n, "release-a");
    const done = await status(n, "--verify");
    assertEquals([done.code, done.doc?.outcome], [0, "healthy"], done.stdout + done.stderr);
    assertEquals([done.doc.bundle.trusted, done.doc.warnings], [true, undefined]);
    assertEquals(done.doc.kept?.trusted, false);
  },
});
