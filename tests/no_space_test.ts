// A full file system, through the real CLI (the artifact under test) in a
// private mount namespace with a small tmpfs:
//
// Invariant: `bundle make` on a full file system exits 1 with one line that
// names the file it could not write — never exit 3 "unexpected error" —
// and leaves no torn BUNDLE.json or SHA256SUMS (each is written to a temp
// file, fsynced and renamed: the old one whole, or none), so once space is
// freed the same command succeeds (issue 38: a 0-byte BUNDLE.json, then
// "BUNDLE.json is not JSON" on the rerun).

import { join } from "node:path";
import { assert, assertEquals } from "./support/assert.ts";
import { makeBundle } from "./support/bundle.ts";
import { stratumArgv, stratumEnv } from "./support/stratum_bin.ts";
import { nspawnUnavailable } from "./support/sandbox.ts";
import { Node } from "./support/sandbox_node.ts";

const unshareRefused = await new Deno.Command("unshare", {
  args: ["-m", "sh", "-c", "mount -t tmpfs -o size=64k tmpfs /mnt"],
  stdout: "null",
  stderr: "null",
}).output().then(
  (o) => o.success ? undefined : "unshare -m with a tmpfs is refused here",
  () => "unshare is missing",
);
// deno-lint-ignore no-console
if (unshareRefused) console.error(`no-space tests are skipped: ${unshareRefused}`);

/** Runs `script` as root in a mount namespace of its own (its tmpfs mounts die with it). */
async function inOwnMounts(script: string, env: Record<string, string>) {
  const o = await new Deno.Command("unshare", {
    args: ["-m", "sh", "-c", script],
    env: { NO_COLOR: "1", ...stratumEnv(), ...env },
    stdin: "null",
  }).output();
  const text = new TextDecoder();
  return { code: o.code, stdout: text.decode(o.stdout), stderr: text.decode(o.stderr) };
}

Deno.test({
  name:
    "bundle make on a full file system: exit 1, one line naming the file, nothing torn; the rerun works",
  ignore: unshareRefused !== undefined,
  async fn() {
    const src = await makeBundle(await Deno.makeTempDir({ prefix: "stratum-nospace-src-" }));
    const work = await Deno.makeTempDir({ prefix: "stratum-nospace-" });
    try {
      const mnt = join(work, "fs");
      const out = join(work, "out");
      await Deno.mkdir(mnt);
      await Deno.mkdir(out);
      const stratum = stratumArgv([]).map((a) => `'${a}'`).join(" ");
      // The bundle without its BUNDLE.json and SHA256SUMS, on a tmpfs, the
      // rest of which a filler file takes; then make, free, make again.
      const r = await inOwnMounts(
        `set -u
mount -t tmpfs -o size=512k tmpfs "$MNT"
mkdir -p "$MNT/b" && cp -a "$SRC/host" "$MNT/b/host"
rm -f "$MNT/b/host/BUNDLE.json" "$MNT/b/host/SHA256SUMS" "$MNT/b/host/SHA256SUMS.sig"
dd if=/dev/zero of="$MNT/filler" bs=1k 2>/dev/null
${stratum} bundle make "$MNT/b" --version 1.0.0 --json >"$OUT/first.json" 2>"$OUT/first.err"
echo $? >"$OUT/first.code"
ls -a "$MNT/b/host" >"$OUT/after-first.ls"
rm "$MNT/filler"
${stratum} bundle make "$MNT/b" --version 1.0.0 >"$OUT/second.out" 2>&1
echo $? >"$OUT/second.code"
cat "$MNT/b/host/BUNDLE.json" >"$OUT/bundle.json"
cd "$MNT/b/host" && sha256sum -c --quiet SHA256SUMS >"$OUT/sums" 2>&1
echo $? >"$OUT/sums.code"`,
        { MNT: mnt, OUT: out, SRC: src },
      );
      assertEquals(r.code, 0, r.stderr);
      const read = (f: string) => Deno.readTextFile(join(out, f));
      const firstErr = await read("first.err");
      assertEquals(Number(await read("first.code")), 1, firstErr);
      const lines = firstErr.trim().split("\n");
      assertEquals(lines.length, 1, firstErr);
      assert(lines[0]!.startsWith("stratum: no space left"), firstErr);
      assert(lines[0]!.includes(`${mnt}/b/host/`), `names the file: ${firstErr}`);
      assert(!firstErr.includes("unexpected"), firstErr);
      assertEquals(JSON.parse(await read("first.json")).outcome, "no-space");
      // Nothing torn: no BUNDLE.json or SHA256SUMS at all (there were none), no temp file.
      const left = (await read("after-first.ls")).split("\n").filter((l) =>
        l.includes("BUNDLE") || l.includes("SHA256SUMS") || l.includes(".tmp-")
      );
      assertEquals(left, [], "no partial file is left");
      assertEquals(Number(await read("second.code")), 0, await read("second.out"));
      assertEquals(JSON.parse(await read("bundle.json")), { mode: "host", version: "1.0.0" });
      assertEquals(Number(await read("sums.code")), 0, await read("sums"));
    } finally {
      await Deno.remove(work, { recursive: true });
      await Deno.remove(src, { recursive: true });
    }
  },
});

Deno.test({
  name:
    "node install with no space for the bundle's copy: exit 1 naming the file, not unexpected; with space it installs",
  ignore: unshareRefused !== undefined || nspawnUnavailable !== undefined,
  async fn() {
    // Invariant: a full file system under /var/lib/stratum is reported as
    // itself (outcome failed, the message naming the file that could not be
    // written), and the install runs once there is space.
    await using n = await Node.fresh("host");
    await n.sb.sh(
      "mkdir -p /var/lib/stratum/bundles && mount -t tmpfs -o size=16k tmpfs /var/lib/stratum/bundles",
    );
    const install = ["node", "install", "--mode", "host", "--bundle", n.bundle, "--node", "node-1"];
    const r = await n.stratum([...install, "--json"]);
    assertEquals([r.code, r.doc?.outcome], [1, "failed"], r.stdout + r.stderr);
    assert(
      /no space left on the file system of \/var\/lib\/stratum\/bundles\/\S+/.test(r.doc.message),
      r.doc.message,
    );
    assert(!r.stderr.includes("unexpected"), r.stderr);
    await n.sb.sh("umount /var/lib/stratum/bundles");
    const ok = await n.stratum(install);
    assertEquals(ok.code, 0, ok.stderr);
  },
});
