// Bundles a node can trust. Invariants: with trusted keys installed, only a
// bundle whose manifest one of them signed is used, and every file matches
// that manifest; a refused bundle exits 2, names the file or key, and leaves
// the node's installed bundle as it was; signatures interoperate with stock
// openssl both ways. Expected key ids come from openssl, not from stratum.

import { join, relative } from "node:path";
import * as bundle from "../lib/bundle/mod.ts";
import * as host from "../lib/host/mod.ts";
import * as node from "../lib/node/mod.ts";
import { assert, assertEquals, assertRejects } from "./support/assert.ts";
import { makeBundle } from "./support/bundle.ts";
import { stratum } from "./support/cli.ts";
import { makeSigningKey, noOpenssl } from "./support/tls.ts";

const ignore = noOpenssl !== undefined;

async function openssl(args: string[], stdin?: Uint8Array): Promise<Deno.CommandOutput> {
  const child = new Deno.Command("openssl", {
    args,
    stdin: stdin ? "piped" : "null",
    stdout: "piped",
    stderr: "piped",
  }).spawn();
  if (stdin) {
    const w = child.stdin.getWriter();
    await w.write(stdin);
    await w.close();
  }
  return await child.output();
}

/** A key pair made by openssl, and its id computed the way the docs tell an operator to. */
async function keyPair(dir: string, name: string) {
  const { key: priv, pub } = await makeSigningKey(dir, name);
  const der = await openssl(["pkey", "-pubin", "-in", pub, "-outform", "DER"]);
  const sum = new Uint8Array(await crypto.subtle.digest("SHA-256", der.stdout));
  const id = [...sum.slice(0, 8)].map((b) => b.toString(16).padStart(2, "0")).join("");
  return { priv, pub, id };
}

/** A scratch node root that trusts `keys` (public PEM paths). */
async function nodeRoot(keys: string[]): Promise<string> {
  const root = await Deno.makeTempDir({ prefix: "stratum-trust-" });
  const trust = join(root, "etc/stratum/trust");
  await Deno.mkdir(trust, { recursive: true });
  for (const [i, k] of keys.entries()) await Deno.copyFile(k, join(trust, `key${i}.pem`));
  return root;
}

async function verify(dir: string, root: string, ...extra: string[]) {
  const r = await stratum(["bundle", "verify", dir, "--root", root, "--json", ...extra]);
  return { ...r, doc: r.stdout ? JSON.parse(r.stdout) : undefined };
}

Deno.test({
  name: "bundle make, sign and verify: trust decides, key ids match openssl's",
  ignore,
  async fn(t) {
    const tmp = await Deno.makeTempDir();
    const a = await keyPair(tmp, "a");
    const b = await keyPair(tmp, "b");
    const dir = await makeBundle(join(tmp, "bundle"));
    const none = await nodeRoot([]);
    const trustsA = await nodeRoot([a.pub]);
    const trustsB = await nodeRoot([b.pub]);
    const trustsBoth = await nodeRoot([a.pub, b.pub]);

    await t.step(
      "unsigned, no keys: verifies with a warning; --require-signature: exit 2",
      async () => {
        const r = await verify(dir, none);
        assertEquals(r.code, 0, r.stderr);
        assert(r.stderr.includes("not signed"), r.stderr);
        const req = await verify(dir, none, "--require-signature");
        assertEquals(req.code, 2, req.stderr);
      },
    );
    await t.step("unsigned, keys installed: exit 2, naming the trusted key", async () => {
      const r = await verify(dir, trustsA);
      assertEquals(r.code, 2);
      assert(r.doc.message.includes("not signed") && r.doc.message.includes(a.id), r.doc.message);
    });
    const signed = await stratum(["bundle", "sign", dir, "--key", a.priv, "--json"]);
    assertEquals(signed.code, 0, signed.stderr);
    assertEquals(JSON.parse(signed.stdout).keyId, a.id);
    await t.step("signed by A: verifies where A is trusted, with A's id", async () => {
      const r = await verify(dir, trustsA);
      assertEquals(r.code, 0, r.stderr);
      assertEquals(r.doc.modes.map((m: { keyId: string }) => m.keyId), [a.id, a.id]);
    });
    await t.step("signed by A, only B trusted: exit 2 naming B", async () => {
      const r = await verify(dir, trustsB);
      assertEquals(r.code, 2);
      assert(r.doc.message.includes(b.id) && r.doc.message.includes("not"), r.doc.message);
    });
    await t.step("rotation: A and B trusted, either signature verifies", async () => {
      assertEquals((await verify(dir, trustsBoth)).code, 0);
      assertEquals((await stratum(["bundle", "sign", dir, "--key", b.priv])).code, 0);
      const r = await verify(dir, trustsBoth);
      assertEquals(r.code, 0, r.stderr);
      assertEquals(r.doc.modes[0].keyId, b.id);
      assertEquals(
        (await verify(dir, trustsA)).code,
        2,
        "A alone no longer verifies B's signature",
      );
    });
    await t.step("a trust store file that is not a key: exit 2", async () => {
      const bad = await nodeRoot([a.pub]);
      await Deno.writeTextFile(join(bad, "etc/stratum/trust/broken.pem"), "not a key\n");
      const r = await verify(dir, bad);
      assertEquals(r.code, 2, r.stderr);
      assert(r.stderr.includes("broken.pem"), r.stderr);
    });
  },
});

Deno.test({
  name:
    "a tampered signed bundle exits 2 naming what is wrong, and an installed bundle stays as it was",
  ignore,
  async fn(t) {
    const tmp = await Deno.makeTempDir();
    const a = await keyPair(tmp, "a");
    const root = await nodeRoot([a.pub]);
    const policy = await node.bundlePolicy(host.hostPaths(root));
    const sign = async (d: string) =>
      assertEquals((await stratum(["bundle", "sign", d, "--key", a.priv])).code, 0);
    const cases: [string, (m: string) => Promise<void>, RegExp][] = [
      [
        "altered file",
        (m) => Deno.writeTextFile(join(m, "stack/stack.py"), "evil\n"),
        /stack\/stack\.py/,
      ],
      [
        "added file",
        (m) => Deno.writeTextFile(join(m, "stack/extra.sh"), "#!/bin/sh\n"),
        /stack\/extra\.sh/,
      ],
      ["removed file", (m) => Deno.remove(join(m, "stack.json")), /stack\.json is missing/],
      [
        "removed manifest line",
        async (m) => {
          const lines = (await Deno.readTextFile(join(m, "SHA256SUMS"))).split("\n");
          await Deno.writeTextFile(join(m, "SHA256SUMS"), lines.slice(1).join("\n"));
        },
        /SHA256SUMS\.sig is not a signature/,
      ],
      [
        "symlink",
        (m) => Deno.symlink("/etc/shadow", join(m, "stack/link")),
        /stack\/link is a symlink/,
      ],
      [
        "FIFO",
        async (m) => {
          assert((await new Deno.Command("mkfifo", { args: [join(m, "pipe")] }).output()).success);
        },
        /pipe is a device, FIFO or socket/,
      ],
      [
        "truncated signature",
        async (m) => {
          const sig = await Deno.readFile(join(m, "SHA256SUMS.sig"));
          await Deno.writeFile(join(m, "SHA256SUMS.sig"), sig.slice(0, 40));
        },
        /malformed \(40 bytes/,
      ],
      ["signature removed", (m) => Deno.remove(join(m, "SHA256SUMS.sig")), /not signed/],
    ];
    const good = await makeBundle(join(tmp, "good"));
    await sign(good);
    const dest = join(root, "var/lib/stratum/bundles/host");
    await bundle.installBundle(join(good, "host"), dest, policy);
    const snapshot = async () =>
      JSON.stringify(await treeOf(join(root, "var/lib/stratum/bundles")));
    const before = await snapshot();
    for (const [name, tamper, says] of cases) {
      await t.step(name, async () => {
        const dir = await makeBundle(join(tmp, name.replaceAll(" ", "-")));
        await sign(dir);
        await tamper(join(dir, "host"));
        const r = await verify(dir, root, "--mode", "host");
        assertEquals(r.code, 2, r.stderr);
        assert(says.test(r.doc.message), r.doc.message);
        assertEquals(r.stderr.trim().split("\n").length, 1, r.stderr);
        await assertRejects(
          () => bundle.installBundle(join(dir, "host"), dest, policy),
          (e) => e instanceof bundle.BundleError,
        );
        assertEquals(await snapshot(), before, "the installed bundle changed");
      });
    }
    await t.step("a signed manifest with a path that leaves the bundle: exit 2", async () => {
      const dir = await makeBundle(join(tmp, "dotdot"));
      const m = join(dir, "host/SHA256SUMS");
      await Deno.writeTextFile(
        m,
        (await Deno.readTextFile(m)) + `${"0".repeat(64)}  ../../etc/passwd\n`,
      );
      await sign(dir);
      const r = await verify(dir, root, "--mode", "host");
      assertEquals(r.code, 2, r.stderr);
      assert(r.doc.message.includes("leaves the bundle"), r.doc.message);
    });
    await t.step(
      "swapped after it was verified, even for another signed bundle: the copy is refused",
      async () => {
        // A run verifies the source once (preflight) and holds the copy to
        // that verification: a carrier that swaps the bundle in between
        // must not get another one installed, signed or not.
        const checked = await bundle.verifyBundle(join(good, "host"), { ...policy, mode: "host" });
        const other = await makeBundle(join(tmp, "swapped"), { release: "2" });
        await sign(other);
        const e = await assertRejects(
          () => bundle.installBundle(join(other, "host"), dest, policy, checked),
          (e) => e instanceof bundle.BundleError && e.fault === "changed",
        );
        assert(String(e).includes(checked.manifestDigest), String(e));
        assertEquals(await snapshot(), before, "the installed bundle changed");
        assertEquals(await Deno.stat(bundle.stagedPath(dest)).catch(() => undefined), undefined);
        // The same bundle, held to its own verification, installs.
        const v = await bundle.installBundle(join(good, "host"), dest, policy, checked);
        assertEquals(v.manifestDigest, checked.manifestDigest);
      },
    );
  },
});

Deno.test({
  name: "signatures interoperate with openssl pkeyutl -rawin, both ways",
  ignore,
  async fn() {
    const tmp = await Deno.makeTempDir();
    const a = await keyPair(tmp, "a");
    const root = await nodeRoot([a.pub]);
    const dir = await makeBundle(join(tmp, "bundle"));
    const m = join(dir, "host");
    // openssl signs, stratum verifies.
    const s = await openssl([
      "pkeyutl",
      "-sign",
      "-rawin",
      "-inkey",
      a.priv,
      "-in",
      join(m, "SHA256SUMS"),
      "-out",
      join(m, "SHA256SUMS.sig"),
    ]); // deno-fmt-ignore
    assert(s.success, new TextDecoder().decode(s.stderr));
    const r = await verify(dir, root, "--mode", "host");
    assertEquals(r.code, 0, r.stderr);
    assertEquals(r.doc.modes[0].keyId, a.id);
    // stratum signs, openssl verifies.
    assertEquals((await stratum(["bundle", "sign", dir, "--key", a.priv])).code, 0);
    const v = await openssl([
      "pkeyutl",
      "-verify",
      "-pubin",
      "-inkey",
      a.pub,
      "-rawin",
      "-in",
      join(m, "SHA256SUMS"),
      "-sigfile",
      join(m, "SHA256SUMS.sig"),
    ]); // deno-fmt-ignore
    assert(v.success, new TextDecoder().decode(v.stdout) + new TextDecoder().decode(v.stderr));
    // And openssl refuses it once the manifest changes: the check is real.
    await Deno.writeTextFile(join(m, "SHA256SUMS"), "\n", { append: true });
    const bad = await openssl([
      "pkeyutl",
      "-verify",
      "-pubin",
      "-inkey",
      a.pub,
      "-rawin",
      "-in",
      join(m, "SHA256SUMS"),
      "-sigfile",
      join(m, "SHA256SUMS.sig"),
    ]); // deno-fmt-ignore
    assert(!bad.success);
  },
});

Deno.test({
  name: "migrate preflight refuses a bundle no trusted key signed, before anything changes",
  ignore,
  async fn() {
    const tmp = await Deno.makeTempDir();
    const a = await keyPair(tmp, "a");
    const b = await keyPair(tmp, "b");
    const root = await nodeRoot([b.pub]);
    const dir = await makeBundle(join(tmp, "bundle"));
    assertEquals((await stratum(["bundle", "sign", dir, "--key", a.priv])).code, 0);
    const paths = host.hostPaths(root);
    const before = JSON.stringify(await treeOf(root));
    const err = await assertRejects(
      () =>
        node.preflight({
          paths,
          from: "host",
          to: "nspawn",
          sourceSlot: "a",
          bundleModeDir: join(dir, "nspawn"),
          nspawn: "/bin/sh",
        }),
      (e) => e instanceof node.ErrPreflight,
    );
    assert((err as Error).message.includes(b.id), (err as Error).message);
    assertEquals(JSON.stringify(await treeOf(root)), before);
  },
});

Deno.test("bundle commands: bad input exits 2 with one line and writes nothing", async (t) => {
  const tmp = await Deno.makeTempDir();
  const dir = await makeBundle(join(tmp, "bundle"));
  for (
    const args of [
      ["bundle", "make", join(tmp, "nothing-here")],
      ["bundle", "verify", join(tmp, "nothing-here")],
      ["bundle", "sign", dir, "--key", join(tmp, "no-key.pem")],
      ["bundle", "sign", dir, "--key", join(dir, "host/stack.json")],
      ["bundle", "verify", dir, "--mode", "vm"],
    ]
  ) {
    await t.step(args.slice(1, 3).join(" "), async () => {
      const before = JSON.stringify(await treeOf(dir));
      const r = await stratum(args);
      assertEquals(r.code, 2, r.stderr);
      assertEquals(r.stderr.trim().split("\n").length, 1, r.stderr);
      assertEquals(JSON.stringify(await treeOf(dir)), before);
    });
  }
});

/** path → sha256 of every file under `dir` (symlinks by target). */
async function treeOf(dir: string): Promise<Record<string, string>> {
  const out: Record<string, string> = {};
  const walk = async (d: string) => {
    for await (const e of Deno.readDir(d)) {
      const p = join(d, e.name);
      if (e.isSymlink) out[p] = `-> ${await Deno.readLink(p)}`;
      else if (e.isDirectory) await walk(p);
      else out[p] = await bundle.hashFile(p);
    }
  };
  await walk(dir).catch((err) => {
    if (!(err instanceof Deno.errors.NotFound)) throw err;
  });
  return out;
}

Deno.test("hashFile is sha256sum's digest, whole or streamed, at every size around the chunk", async () => {
  // Files that fit in one chunk are hashed whole (WebCrypto), larger ones
  // streamed: both must be the digest `sha256sum -c` checks.
  const dir = await Deno.makeTempDir();
  try {
    for (const n of [0, 1, (1 << 20) - 1, 1 << 20, (1 << 20) + 1, 3 * (1 << 20) + 7]) {
      const p = join(dir, `f${n}`);
      await Deno.writeFile(p, Uint8Array.from({ length: n }, (_, i) => (i * 31 + 7) & 255));
      const o = await new Deno.Command("sha256sum", { args: [p], stdout: "piped" }).output();
      const want = new TextDecoder().decode(o.stdout).split(" ")[0];
      assertEquals(await bundle.hashFile(p), want, `${n} bytes`);
    }
  } finally {
    await Deno.remove(dir, { recursive: true });
  }
});

Deno.test("an installed copy's cheap check: signature, sizes and modes, no hash (node status without --verify)", async () => {
  const tmp = await Deno.makeTempDir();
  const src = await makeBundle(join(tmp, "bundle"));
  const dest = join(tmp, "bundles/host");
  await bundle.installBundle(join(src, "host"), dest);
  const dir = await bundle.installedDir(dest);
  const ok = await bundle.checkInstalled(dir);
  assertEquals(
    ok.manifestDigest,
    (await bundle.verifyBundle(dir, { installed: true })).manifestDigest,
  );
  // A byte changed in place, size kept: only the full check sees it.
  const py = join(dir, "stack/stack.py");
  const text = await Deno.readTextFile(py);
  await Deno.writeTextFile(py, text.replace("import", "imporT"));
  await bundle.checkInstalled(dir);
  await assertRejects(
    () => bundle.verifyBundle(dir, { installed: true }),
    (e) => e instanceof bundle.BundleError && e.file === "stack/stack.py",
  );
  // A size or a mode that is not what was installed: the cheap check refuses.
  await Deno.writeTextFile(py, text + "\n");
  await assertRejects(
    () => bundle.checkInstalled(dir),
    (e) => e instanceof bundle.BundleError && e.file === "stack/stack.py",
  );
  await Deno.writeTextFile(py, text);
  const mode = (await Deno.stat(py)).mode! & 0o777;
  await Deno.chmod(py, 0o4755);
  await assertRejects(
    () => bundle.checkInstalled(dir),
    (e) => e instanceof bundle.BundleError && e.message.includes("mode 4755"),
  );
  await Deno.chmod(py, mode);
  await bundle.checkInstalled(dir);
  // A missing listed file, and BUNDLE.json or stack.json altered (they are hashed: small).
  const json = join(dir, "stack.json");
  const stack = await Deno.readTextFile(json);
  await Deno.writeTextFile(json, stack.replace("{", "["));
  await assertRejects(
    () => bundle.checkInstalled(dir),
    (e) => e instanceof bundle.BundleError && e.file === "stack.json",
  );
  await Deno.writeTextFile(json, stack);
  await Deno.rename(py, `${py}.gone`);
  await assertRejects(
    () => bundle.checkInstalled(dir),
    (e) => e instanceof bundle.BundleError && e.message.includes("is missing"),
  );
  await Deno.rename(`${py}.gone`, py);
  // A carrier's bundle is never taken with a record it brought.
  await Deno.writeTextFile(join(src, "host", bundle.recordName), "{}");
  await assertRejects(
    () => bundle.verifyBundle(join(src, "host")),
    (e) => e instanceof bundle.BundleError && e.file === bundle.recordName,
  );
});

Deno.test("a file the node already holds is linked from its installed copy, hashed again; a changed, foreign or other-mode one is written", async (t) => {
  const tmp = await Deno.makeTempDir();
  const src = await makeBundle(join(tmp, "bundle"));
  const py = "stack/stack.py"; // byte for byte the same in both modes of the test bundle
  const inode = async (p: string) => (await Deno.lstat(p)).ino;
  /** Installs host mode, lets `spoil` change its copy, installs nspawn mode beside it. */
  const twoModes = async (name: string, spoil: (hostDir: string) => Promise<void>) => {
    const bundles = join(tmp, name, "bundles");
    await bundle.installBundle(join(src, "host"), join(bundles, "host"));
    const hostDir = await bundle.installedDir(join(bundles, "host"));
    await spoil(hostDir);
    await bundle.installBundle(join(src, "nspawn"), join(bundles, "nspawn"));
    const nspawnDir = await bundle.installedDir(join(bundles, "nspawn"));
    // Whatever was linked or written, the copy is what the manifest says.
    await bundle.verifyBundle(nspawnDir, { installed: true });
    await bundle.checkInstalled(nspawnDir);
    return { hostDir, nspawnDir, bundles };
  };
  await t.step("the same bytes, mode and owner: one inode in both copies", async () => {
    const { hostDir, nspawnDir } = await twoModes("same", async () => {});
    assertEquals(await inode(join(nspawnDir, py)), await inode(join(hostDir, py)));
    // What differs between the modes is written.
    assert(await inode(join(nspawnDir, "stack.json")) !== await inode(join(hostDir, "stack.json")));
  });
  await t.step(
    "the operator's file is still hashed: a tampered one is refused, though the node holds its bytes",
    async () => {
      const bad = await makeBundle(join(tmp, "tampered"));
      const text = await Deno.readTextFile(join(bad, "nspawn", py));
      await Deno.writeTextFile(join(bad, "nspawn", py), text.replace("import", "imporT"));
      const bundles = join(tmp, "tampered-node", "bundles");
      await bundle.installBundle(join(bad, "host"), join(bundles, "host"));
      // Whole, or with the hashes deferred to the copy (what preflight does).
      const deferred = await bundle.verifyBundle(join(bad, "nspawn"), { deferHashes: true });
      for (const checked of [undefined, deferred]) {
        await assertRejects(
          () => bundle.installBundle(join(bad, "nspawn"), join(bundles, "nspawn"), {}, checked),
          (e) => e instanceof bundle.BundleError && e.file === py,
        );
      }
      assertEquals(await Deno.lstat(join(bundles, "nspawn")).catch(() => "none"), "none");
    },
  );
  await t.step("a held file changed since it was installed (same size): written", async () => {
    const { hostDir, nspawnDir } = await twoModes("changed", async (dir) => {
      const text = await Deno.readTextFile(join(dir, py));
      await Deno.writeTextFile(join(dir, py), text.replace("import", "imporT"));
    });
    assert(await inode(join(nspawnDir, py)) !== await inode(join(hostDir, py)));
  });
  await t.step("a held file with another mode: written (a chmod would change both)", async () => {
    const { hostDir, nspawnDir } = await twoModes(
      "mode",
      (dir) => Deno.chmod(join(dir, py), 0o755),
    );
    assert(await inode(join(nspawnDir, py)) !== await inode(join(hostDir, py)));
    assertEquals((await Deno.lstat(join(nspawnDir, py))).mode! & 0o777, 0o644);
  });
  await t.step({
    name: "a held file another user owns: written",
    ignore: Deno.uid() !== 0,
    fn: async () => {
      const { hostDir, nspawnDir } = await twoModes(
        "owner",
        (dir) => Deno.chown(join(dir, py), 65534, 65534),
      );
      assert(await inode(join(nspawnDir, py)) !== await inode(join(hostDir, py)));
      assertEquals((await Deno.lstat(join(nspawnDir, py))).uid, 0);
    },
  });
  await t.step(
    "a link to a directory elsewhere offers nothing: only stratum's `.NAME-VERSION` beside it",
    async () => {
      const away = await makeBundle(join(tmp, "away"));
      await bundle.installBundle(join(away, "host"), join(tmp, "away-installed"));
      const awayDir = await bundle.installedDir(join(tmp, "away-installed"));
      const { hostDir, nspawnDir } = await twoModes("away", async (dir) => {
        await Deno.chmod(join(dir, py), 0o755);
        await Deno.symlink(relative(join(dir, ".."), awayDir), join(dir, "..", "away"));
      });
      assert(await inode(join(nspawnDir, py)) !== await inode(join(awayDir, py)));
      assert(await inode(join(nspawnDir, py)) !== await inode(join(hostDir, py)));
    },
  );
  await t.step("a release link to a link elsewhere offers nothing", async () => {
    const elsewhere = await makeBundle(join(tmp, "elsewhere"));
    const { hostDir, nspawnDir } = await twoModes("link", async (dir) => {
      // Only the decoy is held: the host copy's own file is not a match (its mode differs).
      await Deno.chmod(join(dir, py), 0o755);
      const bundles = join(dir, "..");
      await bundle.installBundle(join(elsewhere, "host"), join(tmp, "decoy"));
      await Deno.symlink(await bundle.installedDir(join(tmp, "decoy")), join(bundles, ".decoy-1"));
      await Deno.symlink(".decoy-1", join(bundles, "decoy"));
    });
    const decoy = join(await bundle.installedDir(join(tmp, "decoy")), py);
    assert(await inode(join(nspawnDir, py)) !== await inode(decoy));
    assert(await inode(join(nspawnDir, py)) !== await inode(join(hostDir, py)));
  });
});
