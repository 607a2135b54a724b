// deno-lint-ignore-file no-console
// A node image (stack.json `root`, docs/nspawn.md): an nspawn-mode slot
// that brings its own root tree runs on the image's userland, not the
// host's, in the real systemd sandbox. Invariants:
// - the machine boots the image (the host's /usr is not bound), and the
//   stack's command probe, which passes only where the image's mark is,
//   passes; node status says healthy;
// - the node moves to host mode (the host's userland) and back, its data
//   kept, exactly one stack running after each move;
// - an image that cannot boot (no systemd) or would overwrite a file of
//   the bundle fails the prepare, saying why (the clash is refused, never
//   written over a slot file, which is a hard link to the installed copy),
//   and rolls back: the source runs;
// - "root" in a host-mode stack, or naming a file the manifest does not
//   list, is bad input: exit 2, one line, nothing changed.

import { join } from "node:path";
import { assert, assertEquals } from "./support/assert.ts";
import { makeBundle, nodeImageMark, withNodeImage } from "./support/bundle.ts";
import { nspawnUnavailable, repoRoot } from "./support/sandbox.ts";
import { Node } from "./support/sandbox_node.ts";
import { nodeImage } from "./support/node_image.ts";
import * as bundle from "../lib/bundle/mod.ts";
import { lacking } from "../scripts/packages.ts";

const ignore = nspawnUnavailable !== undefined;
const imageSkip = nspawnUnavailable ??
  (Deno.uid() !== 0 ? "building a node image needs root" : undefined) ??
  lacking("mmdebstrap");
if (imageSkip) console.error(`node image tests that boot an image are skipped: ${imageSkip}`);

/** A fresh test bundle under the checkout (the sandbox sees the checkout). */
async function bundleDir(): Promise<string> {
  await Deno.mkdir(join(repoRoot, ".test-tmp"), { recursive: true });
  return await makeBundle(
    await Deno.makeTempDir({ dir: join(repoRoot, ".test-tmp"), prefix: "bundle-" }),
  );
}

/** A tar of `files` (name → text), made with the machine's tar, at `out`. */
async function tarOf(out: string, files: Record<string, string>): Promise<void> {
  const dir = await Deno.makeTempDir({ dir: join(repoRoot, ".test-tmp"), prefix: "tree-" });
  for (const [f, text] of Object.entries(files)) {
    await Deno.mkdir(join(dir, f, ".."), { recursive: true });
    await Deno.writeTextFile(join(dir, f), text);
  }
  const o = await new Deno.Command("tar", { args: ["-C", dir, "-cf", out, "."] }).output();
  assert(o.success, "tar");
  await Deno.remove(dir, { recursive: true });
}

Deno.test({
  name:
    "a node image: the nspawn machine runs the image's userland, moves to host mode and back with its data",
  ignore: imageSkip !== undefined,
  sanitizeResources: false,
  async fn() {
    const image = await nodeImage();
    const dir = await withNodeImage(await bundleDir(), image);
    await using n = await Node.boot("nspawn", undefined, { bundleDir: dir });
    // The mark is the image's alone: the host has none.
    assertEquals(await n.sb.sh(`test -e ${nodeImageMark} && echo host || echo none`), "none\n");
    assertEquals(
      (await n.inMachine("a", `cat ${nodeImageMark}`)).trim(),
      "stratum-test-node-image",
    );
    const unit = await n.sb.sh("systemctl cat stratum-a-machine.service");
    assert(!unit.includes("--bind-ro=/usr"), `the host's /usr is not bound:\n${unit}`);
    const status = await n.stratum(["node", "status", "--json"]);
    assertEquals([status.code, status.doc?.health?.healthy], [0, true], status.stdout);
    const starts = async () => (await n.sb.sh("cat /var/lib/stratum-test-node/starts-node")).trim();
    assertEquals(await starts(), "1");

    for (const [to, expect] of [["host", "2"], ["nspawn", "3"]] as const) {
      const r = await n.stratum(["migrate", "run", "--to", to, "--bundle", n.bundle, "--json"]);
      assertEquals([r.code, r.doc?.outcome], [0, "complete"], r.stderr);
      const s = await n.state();
      assertEquals(s.active.a !== s.active.b, true, `→ ${to}: exactly one stack runs`);
      assertEquals(s.node.mode, to);
      assertEquals(s.health, `200 ok ${to} node-1`, `→ ${to}`);
      // The node's data: the stack's start counter, kept and counted on.
      assertEquals(await starts(), expect, `→ ${to}: the node's data`);
      assertEquals((await n.stratum(["migrate", "ack"])).code, 0);
    }
    const slot = JSON.parse(await n.sb.sh("cat /etc/stratum/node.json")).slot;
    assertEquals(
      (await n.inMachine(slot, `cat ${nodeImageMark}`)).trim(),
      "stratum-test-node-image",
      "back in nspawn mode: the image's userland again",
    );
  },
});

for (
  const [label, files, says] of [
    ["no systemd in it", { "etc/hostname": "x\n" }, "a booted machine needs systemd"],
    ["a file that overwrites one of the bundle's", { "stack.json": "{}\n" }, "File exists"],
  ] as const
) {
  Deno.test({
    name: `a node image with ${label} fails the prepare and rolls back: the source runs`,
    ignore,
    async fn() {
      const dir = await bundleDir();
      await tarOf(join(dir, "nspawn", "rootfs.tar"), files);
      const stackPath = join(dir, "nspawn", "stack.json");
      const stack = JSON.parse(await Deno.readTextFile(stackPath));
      await Deno.writeTextFile(stackPath, JSON.stringify({ ...stack, root: "rootfs.tar" }));
      await bundle.makeManifest(join(dir, "nspawn"));
      await using n = await Node.boot("host", undefined, { bundleDir: dir });
      const r = await n.stratum(["migrate", "run", "--to", "nspawn", "--bundle", dir, "--json"]);
      assertEquals([r.code, r.doc?.outcome], [1, "rolled-back"], r.stderr);
      assert(JSON.stringify(r.doc).includes(says), `says ${says}: ${JSON.stringify(r.doc)}`);
      assertEquals(await n.assertInvariant(label), "rolled-back");
    },
  });
}

Deno.test({
  name:
    '"root" in a host-mode stack, or naming a file the manifest does not list, is bad input: exit 2, nothing changed',
  ignore,
  async fn() {
    const dir = await bundleDir();
    await using n = await Node.boot("nspawn", undefined, { bundleDir: dir });
    const before = await n.sb.sh(
      "cat /etc/stratum/node.json; ls /var/lib/stratum/slots; systemctl list-units --no-legend 'stratum-*'",
    );
    const cases: [string, string, string][] = [
      ["host", "rootfs.tar", "is for nspawn mode"],
      ["nspawn", "missing.tar", "does not list"],
    ];
    for (const [mode, root, says] of cases) {
      const bad = await bundleDir();
      const m = join(bad, mode);
      await tarOf(join(m, "rootfs.tar"), { "usr/lib/systemd/systemd": "" });
      const stack = JSON.parse(await Deno.readTextFile(join(m, "stack.json")));
      await Deno.writeTextFile(join(m, "stack.json"), JSON.stringify({ ...stack, root }));
      await bundle.makeManifest(m);
      const to = mode === "host" ? "host" : "nspawn";
      const args = to === "nspawn"
        ? ["node", "upgrade", "--bundle", bad]
        : ["migrate", "run", "--to", "host", "--bundle", bad];
      const r = await n.stratum(args);
      assertEquals(r.code, 2, `${mode}: ${r.stderr}`);
      assert(r.stderr.includes(says), `${mode}: says ${says}: ${r.stderr}`);
      assertEquals(r.stderr.trim().split("\n").length, 1, `one line: ${r.stderr}`);
      const v = await n.stratum(["bundle", "verify", bad, "--mode", mode]);
      assertEquals(v.code, 2, `bundle verify ${mode}: ${v.stdout}${v.stderr}`);
      await Deno.remove(bad, { recursive: true });
    }
    assertEquals(
      await n.sb.sh(
        "cat /etc/stratum/node.json; ls /var/lib/stratum/slots; systemctl list-units --no-legend 'stratum-*'",
      ),
      before,
      "nothing changed",
    );
  },
});

/**
 * A bundle (under the checkout) whose nspawn mode brings the image the
 * shell `script` makes in an empty directory (as root: owners, modes,
 * special files), tarred with `tarFlags`; `stack` edits its stack.json.
 * The image has the files a booted machine needs, empty: it unpacks, and
 * fails to boot.
 */
async function imageBundle(
  script: string,
  opts: { tarFlags?: string[]; stack?: (s: Record<string, unknown>) => void } = {},
): Promise<string> {
  const dir = await bundleDir();
  const tree = await Deno.makeTempDir({ dir: join(repoRoot, ".test-tmp"), prefix: "tree-" });
  const made = await new Deno.Command("bash", {
    args: [
      "-euc",
      "mkdir -p usr/lib/systemd usr/bin && : > usr/lib/systemd/systemd && : > usr/bin/sh && " +
      `: > usr/bin/timeout\n${script}`,
    ],
    cwd: tree,
  }).output();
  assert(made.success, `image script: ${new TextDecoder().decode(made.stderr)}`);
  const tar = await new Deno.Command("tar", {
    args: [
      ...(opts.tarFlags ?? []),
      "--numeric-owner",
      "-C",
      tree,
      "-cf",
      join(dir, "nspawn/rootfs.tar"),
      ".",
    ],
  }).output();
  assert(tar.success, `tar: ${new TextDecoder().decode(tar.stderr)}`);
  await Deno.remove(tree, { recursive: true });
  const stackPath = join(dir, "nspawn", "stack.json");
  const stack = JSON.parse(await Deno.readTextFile(stackPath));
  stack.root = "rootfs.tar";
  opts.stack?.(stack);
  await Deno.writeTextFile(stackPath, JSON.stringify(stack));
  await bundle.makeManifest(join(dir, "nspawn"));
  return dir;
}

// Invariant: a node image is root's tree from its first byte: every entry
// root:root (the archive's uids and gids are not the host's users), no
// setuid, device, FIFO or world-writable entry, the slot's own mode kept;
// and no other user reaches any of it (the slots' parent is 0700 from the
// install on). Seen with the slot just prepared (the run killed right after).
Deno.test({
  name:
    "a node image unpacks as root's tree, without setuid, devices or other owners, in slots no other user reaches",
  ignore,
  sanitizeResources: false,
  async fn() {
    const dir = await imageBundle(`
      chmod 777 .
      mkdir -p etc srv/d
      printf su > usr/bin/su && chown 1000:1000 usr/bin/su && chmod 4755 usr/bin/su
      printf ws > srv/open && chmod 666 srv/open
      printf sh > etc/shadow && chown 0:42 etc/shadow && chmod 640 etc/shadow
      chown 1000:1000 srv/d && chmod 777 srv/d
      mknod srv/null c 1 3 && chmod 666 srv/null
      mkfifo srv/fifo`);
    await using n = await Node.boot("host", undefined, { bundleDir: dir });
    const slots = "/var/lib/stratum/slots";
    assertEquals(await n.sb.sh(`stat -c %a ${slots}`), "700\n", "closed from the install on");
    const r = await n.stratum(["migrate", "run", "--to", "nspawn", "--bundle", dir], {
      STRATUM_FAILPOINT: "kill-after-record:stopping-source",
    });
    assertEquals(r.code, 137, `killed right after the prepare: ${r.stderr}`);
    const b = `${slots}/b`;
    assertEquals(await n.sb.sh(`cat ${b}/usr/bin/su`), "su", "slot b holds the image");
    assertEquals(
      await n.sb.sh(`find ${b} \\( ! -user 0 -o ! -group 0 \\) -printf '%p %U:%G\\n'`),
      "",
      "every entry is root's",
    );
    assertEquals(await n.sb.sh(`find ${b} ! -type l -perm /7022 -printf '%p %m\\n'`), "");
    assertEquals(await n.sb.sh(`find ${b} \\( -type b -o -type c -o -type p -o -type s \\)`), "");
    assertEquals(await n.sb.sh(`stat -c %a ${slots} ${b}`), "700\n755\n");
    const nobody = await n.sb.exec([
      "setpriv",
      "--reuid=65534",
      "--regid=65534",
      "--clear-groups",
      "cat",
      `${b}/etc/shadow`,
    ]);
    assert(nobody.code !== 0 && !nobody.stdout.includes("sh"), "another user reads nothing");
  },
});

// Invariant: an image is an uncompressed tar whose listed size fits where
// the slot is, checked before anything is unpacked; else the prepare fails
// saying so, and the migration rolls back.
for (
  const [label, script, tarFlags, says] of [
    ["gzip-compressed", "", ["-z"], "is not an uncompressed tar archive (it is gzip-compressed)"],
    [
      "larger, as listed, than the free space",
      "truncate -s 4T big",
      ["--sparse"],
      "bytes free under",
    ],
  ] as const
) {
  Deno.test({
    name:
      `a node image that is ${label} is refused before it is unpacked, and the migration rolls back`,
    ignore,
    async fn() {
      const dir = await imageBundle(script, { tarFlags: [...tarFlags] });
      await using n = await Node.boot("host", undefined, { bundleDir: dir });
      const r = await n.stratum(["migrate", "run", "--to", "nspawn", "--bundle", dir, "--json"]);
      assertEquals([r.code, r.doc?.outcome], [1, "rolled-back"], r.stderr);
      assert(JSON.stringify(r.doc).includes(says), `says ${says}: ${JSON.stringify(r.doc)}`);
      assertEquals(await n.assertInvariant(label), "rolled-back");
    },
  });
}

// Invariant (3a): a host file comes from a file of the bundle, never from
// an image's entry or through its link: an image's `lnk -> /etc` and
// hostFiles naming lnk/<a root-only host file> is refused (bundle verify
// and the migration, exit 2), and the host file is never copied out.
Deno.test({
  name:
    "hostFiles naming a path through a node image's link to /etc is refused: nothing is copied out of the host",
  ignore,
  async fn() {
    const dir = await imageBundle("ln -s /etc lnk", {
      stack: (s) => {
        s.hostFiles = { "/etc/containerd/config.toml": "lnk/stratum-secret" };
      },
    });
    await using n = await Node.boot("host", undefined, { bundleDir: dir });
    await n.sb.sh("umask 077 && echo root-only-secret > /etc/stratum-secret");
    const config = "cat /etc/containerd/config.toml 2>/dev/null || echo absent";
    const before = await n.sb.sh(config);
    const v = await n.stratum(["bundle", "verify", dir, "--mode", "nspawn"]);
    assertEquals(v.code, 2, `bundle verify: ${v.stdout}${v.stderr}`);
    const r = await n.stratum(["migrate", "run", "--to", "nspawn", "--bundle", dir, "--json"]);
    assertEquals([r.code, r.doc?.outcome], [2, "refused"], r.stderr);
    assert(r.doc.message.includes("lnk/stratum-secret"), r.doc.message);
    const after = await n.sb.sh(config);
    assertEquals(after, before, "the host file is as it was");
    assert(!after.includes("root-only-secret"), "the secret was not copied out");
  },
});

// Invariant (3b): nothing stratum writes into a slot goes through a link of
// the image: an image with etc/systemd/system -> /etc/systemd/system fails
// the prepare naming the link, and the rollback leaves the host's unit
// directory as it was (no stratum-stack.target, no new default target).
Deno.test({
  name:
    "a node image linking etc/systemd/system to the host's fails the prepare; the host's units are untouched",
  ignore,
  async fn() {
    const dir = await imageBundle(
      "mkdir -p etc/systemd && ln -s /etc/systemd/system etc/systemd/system",
    );
    await using n = await Node.boot("host", undefined, { bundleDir: dir });
    const units = "ls -A /etc/systemd/system; readlink /etc/systemd/system/default.target; true";
    const before = await n.sb.sh(units);
    const r = await n.stratum(["migrate", "run", "--to", "nspawn", "--bundle", dir, "--json"]);
    assertEquals([r.code, r.doc?.outcome], [1, "rolled-back"], r.stderr);
    assert(
      JSON.stringify(r.doc).includes("etc/systemd/system is a link"),
      JSON.stringify(r.doc),
    );
    assertEquals(await n.sb.sh(units), before, "the host's unit directory is as it was");
    assertEquals(await n.assertInvariant("link to the host's units"), "rolled-back");
  },
});
