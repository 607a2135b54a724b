// What root runs is what was signed (docs/bundles.md, "Threat model"): the
// bundle's carrier and other local users are not trusted. Each test is one
// attack that worked before the checks existed; real files, links, FIFOs and
// an unprivileged user (setpriv), no mocks.
import { join } from "node:path";
import * as bundle from "../lib/bundle/mod.ts";
import * as host from "../lib/host/mod.ts";
import * as isolation from "../lib/isolation/mod.ts";
import { assert, assertEquals, assertRejects } from "./support/assert.ts";
import { makeBundle } from "./support/bundle.ts";

const root = Deno.uid() === 0;

/** A fresh test bundle in a scratch directory; returns its host mode directory. */
async function hostBundle(): Promise<{ dir: string; mode: string }> {
  const dir = await makeBundle(await Deno.makeTempDir({ prefix: "stratum-trust-" }));
  return { dir, mode: join(dir, "host") };
}

async function refuses(p: Promise<unknown>, fault: string, words: string) {
  const err = await assertRejects(() => p);
  assert(err instanceof bundle.BundleError, String(err));
  assertEquals(err.fault, fault, err.message);
  assert(err.message.includes(words), err.message);
}

Deno.test("a bundle mode directory that is a symlink is refused by verify and install", async () => {
  const { dir, mode } = await hostBundle();
  const link = join(dir, "linked");
  await Deno.symlink(mode, link);
  await refuses(bundle.verifyBundle(link), "unsafe", "is a symlink");
  const dest = join(await Deno.makeTempDir(), "bundles/host");
  await refuses(bundle.installBundle(link, dest), "unsafe", "is a symlink");
  assertEquals(await Deno.lstat(dest).then(() => true, () => false), false, "nothing installed");
});

Deno.test("the installed copy and its slot get safe modes whatever the bundle carried", async () => {
  const { mode } = await hostBundle();
  await Deno.chmod(join(mode, "stack/stack.py"), 0o4777);
  await Deno.chmod(join(mode, "stack"), 0o777);
  const dest = join(await Deno.makeTempDir(), "bundles/host");
  await bundle.installBundle(mode, dest);
  const real = await bundle.installedDir(dest);
  assertEquals((await Deno.stat(join(real, "stack/stack.py"))).mode! & 0o7777, 0o755);
  assertEquals((await Deno.stat(join(real, "stack"))).mode! & 0o7777, 0o755);
  assertEquals((await Deno.stat(join(real, "stack.json"))).mode! & 0o7777, 0o644);
});

Deno.test({
  name: "an unprivileged user cannot rewrite what root installed",
  ignore: !root,
  async fn() {
    const { mode } = await hostBundle();
    await Deno.chmod(join(mode, "stack/stack.py"), 0o777);
    const base = await Deno.makeTempDir();
    await Deno.chmod(base, 0o755);
    const dest = join(base, "bundles/host");
    await bundle.installBundle(mode, dest);
    const script = join(await bundle.installedDir(dest), "stack/stack.py");
    const o = await new Deno.Command("setpriv", {
      args: [
        "--reuid=65534",
        "--regid=65534",
        "--clear-groups",
        "sh",
        "-c",
        `echo evil >> ${script}`,
      ],
      stderr: "null",
    }).output();
    assert(!o.success, "nobody appended to root's script");
    assert(!(await Deno.readTextFile(script)).includes("evil"));
  },
});

Deno.test("a slot whose file changed, or that became writable by others, is refused before start", async () => {
  const { mode } = await hostBundle();
  const slot = join(await Deno.makeTempDir(), "slot");
  await new Deno.Command("cp", { args: ["-a", mode, slot] }).output();
  await bundle.normalizeModes(slot);
  await bundle.checkSlot(slot);
  await Deno.chmod(join(slot, "stack"), 0o777);
  await refuses(bundle.checkSlot(slot), "unsafe", "stack has mode 777");
  await Deno.chmod(join(slot, "stack"), 0o755);
  await Deno.writeTextFile(join(slot, "stack/stack.py"), "# evil\n", { append: true });
  await refuses(bundle.checkSlot(slot), "file", "stack/stack.py does not match");
});

// Invariant: a slot is root's tree: a file or directory another user or
// group owns (a node image's uid 1000, a group that could read it) is
// refused before the slot's stack starts.
Deno.test({
  name: "a slot entry owned by another user or group is refused before start",
  ignore: !root,
  async fn() {
    const { mode } = await hostBundle();
    const slot = join(await Deno.makeTempDir(), "slot");
    await new Deno.Command("cp", { args: ["-a", mode, slot] }).output();
    await bundle.normalizeModes(slot);
    await bundle.checkSlot(slot);
    await Deno.chown(join(slot, "stack/stack.py"), 1000, 0);
    await refuses(bundle.checkSlot(slot), "unsafe", "stack/stack.py is owned by 1000:0, not root");
    await Deno.chown(join(slot, "stack/stack.py"), 0, 42);
    await refuses(bundle.checkSlot(slot), "unsafe", "stack/stack.py is owned by 0:42, not root");
    await Deno.chown(join(slot, "stack/stack.py"), 0, 0);
    await Deno.mkdir(join(slot, "srv"));
    await Deno.chown(join(slot, "srv"), 1000, 1000);
    await refuses(bundle.checkSlot(slot), "unsafe", "srv is owned by 1000:1000");
  },
});

// Invariant: a host file is copied only from a file of the bundle (its
// manifest lists it), reached through real directories of the slot: a
// link component (a node image's `lnk -> /etc`) or an unlisted file is
// refused, and nothing is written to the host path.
Deno.test("the prepare copies a host file only from a listed file of the slot, never through a link", async (t) => {
  const base = {
    services: [{ name: "n", exec: ["/bin/true"] }],
    health: { url: "http://127.0.0.1:1/" },
    state: [],
  };
  const { writeHostFiles } = await import("../lib/isolation/_slot_layout.ts");
  for (
    const [what, inSlot, words] of [
      ["an unlisted file", "lnk/secret", "its manifest does not list it"],
      ["a listed file reached through a link", "d/f", "d is a link"],
    ] as const
  ) {
    await t.step(what, async () => {
      const scratch = await Deno.makeTempDir();
      const outside = join(scratch, "outside");
      await Deno.mkdir(outside);
      await Deno.writeTextFile(join(outside, "secret"), "root-only\n", { mode: 0o600 });
      await Deno.writeTextFile(join(outside, "f"), "net.ipv4.ip_forward = 1\n");
      const slot = join(scratch, "slot");
      await Deno.mkdir(join(slot, "d"), { recursive: true });
      await Deno.writeTextFile(join(slot, "d/f"), "net.ipv4.ip_forward = 1\n");
      await bundle.makeManifest(slot);
      // What a node image's links would make of the slot after its unpack.
      await Deno.symlink(outside, join(slot, "lnk"));
      await Deno.remove(join(slot, "d"), { recursive: true });
      await Deno.symlink(outside, join(slot, "d"));
      const hostRoot = join(scratch, "root");
      const stack = { ...base, hostFiles: { "/etc/sysctl.d/90-stratum.conf": inSlot } };
      const err = await assertRejects(() => writeHostFiles(host.hostPaths(hostRoot), slot, stack));
      assert(err instanceof isolation.ErrBadStack && err.message.includes(words), String(err));
      assertEquals(
        await Deno.lstat(join(hostRoot, "etc/sysctl.d/90-stratum.conf")).then(() => 1, () => 0),
        0,
        "nothing written",
      );
    });
  }
});

for (
  const [what, make] of [
    ["a FIFO", (p: string) => new Deno.Command("mkfifo", { args: [p] }).output().then(() => {})],
    ["a link to /dev/zero", (p: string) => Deno.symlink("/dev/zero", p)],
  ] as const
) {
  Deno.test(`a manifest that is ${what} is refused at once, never read`, async () => {
    const { mode } = await hostBundle();
    await Deno.remove(join(mode, "SHA256SUMS"));
    await make(join(mode, "SHA256SUMS"));
    let timer: ReturnType<typeof setTimeout> | undefined;
    const hung = new Promise<"hung">((r) => timer = setTimeout(() => r("hung"), 10_000));
    const r = await Promise.race([bundle.verifyBundle(mode).catch((e) => e), hung]);
    clearTimeout(timer);
    assert(r instanceof bundle.BundleError && r.fault === "unsafe", String(r));
  });
}

Deno.test("hostFiles may write only the snapshotted config files, from inside the slot", async (t) => {
  const base = {
    services: [{ name: "n", exec: ["/bin/true"] }],
    health: { url: "http://127.0.0.1:1/" },
  };
  for (
    const [what, hostFiles, words] of [
      ["/etc/shadow", { "/etc/shadow": "f" }, "hostFiles may write only"],
      ["a trust key", { "/etc/stratum/trust/evil.pem": "f" }, "hostFiles may write only"],
      [
        "a value leaving the slot",
        { "/etc/sysctl.d/90-stratum.conf": "../../etc/shadow" },
        "inside the slot",
      ],
      ["an absolute value", { "/etc/sysctl.d/90-stratum.conf": "/etc/shadow" }, "inside the slot"],
    ] as const
  ) {
    await t.step(what, async () => {
      const dir = await Deno.makeTempDir();
      await Deno.writeTextFile(join(dir, "stack.json"), JSON.stringify({ ...base, hostFiles }));
      const err = await assertRejects(() => isolation.readStack(dir));
      assert(err instanceof isolation.ErrBadStack && err.message.includes(words), String(err));
    });
  }
});

Deno.test("a node image (root) is a plain path inside the mode directory", async (t) => {
  const base = {
    services: [{ name: "n", exec: ["/bin/true"] }],
    health: { url: "http://127.0.0.1:1/" },
  };
  for (const root of ["../rootfs.tar", "/srv/rootfs.tar", "./rootfs.tar", "a//b.tar", "", 7]) {
    await t.step(JSON.stringify(root), async () => {
      const dir = await Deno.makeTempDir();
      await Deno.writeTextFile(join(dir, "stack.json"), JSON.stringify({ ...base, root }));
      const err = await assertRejects(() => isolation.readStack(dir));
      assert(
        err instanceof isolation.ErrBadStack && err.message.includes("inside the mode directory"),
        String(err),
      );
    });
  }
  const dir = await Deno.makeTempDir();
  await Deno.writeTextFile(join(dir, "stack.json"), JSON.stringify({ ...base, root: "img/r.tar" }));
  assertEquals((await isolation.readStack(dir)).root, "img/r.tar");
});

Deno.test("trust fails closed: a link, a stray file, another owner, a writable key", async (t) => {
  const { dir: keyDir } = await hostBundle();
  const { makeSigningKey } = await import("./support/tls.ts");
  const { pub } = await makeSigningKey(keyDir, "k");
  const fresh = async () => {
    const d = join(await Deno.makeTempDir(), "trust");
    await Deno.mkdir(d, { mode: 0o755 });
    await Deno.chmod(d, 0o755);
    await Deno.copyFile(pub, join(d, "release.pem"));
    await Deno.chmod(join(d, "release.pem"), 0o644);
    return d;
  };
  assertEquals((await bundle.loadTrust(await fresh())).length, 1);
  assertEquals(await bundle.loadTrust(join(await Deno.makeTempDir(), "none")), []);
  const cases: [string, (d: string) => Promise<string>, string][] = [
    ["a stray release.pub", async (d) => {
      await Deno.copyFile(pub, join(d, "release.pub"));
      return d;
    }, "not a *.pem key"],
    ["a key writable by others", async (d) => {
      await Deno.chmod(join(d, "release.pem"), 0o666);
      return d;
    }, "writable by group or others"],
    ["a directory writable by others", async (d) => {
      await Deno.chmod(d, 0o777);
      return d;
    }, "writable by group or others"],
    ["a key that is a link", async (d) => {
      await Deno.remove(join(d, "release.pem"));
      await Deno.symlink(pub, join(d, "release.pem"));
      return d;
    }, "symlink"],
    ["a dangling trust directory link", async (d) => {
      const l = `${d}-link`;
      await Deno.symlink(`${d}-gone`, l);
      return l;
    }, "symlink"],
  ];
  if (root) {
    cases.push(["a key owned by nobody", async (d) => {
      await Deno.chown(join(d, "release.pem"), 65534, 65534);
      return d;
    }, "owned by uid 65534"]);
  }
  for (const [what, spoil, words] of cases) {
    await t.step(what, async () => {
      const d = await spoil(await fresh());
      await refuses(bundle.loadTrust(d), "trust", words);
    });
  }
});

Deno.test("the source cannot be the destination: --bundle pointed at the installed bundles", async () => {
  const { mode } = await hostBundle();
  const dest = join(await Deno.makeTempDir(), "bundles/host");
  await bundle.installBundle(mode, dest);
  const before = await Deno.readTextFile(join(dest, "SHA256SUMS"));
  // `--bundle /var/lib/stratum/bundles` makes the source bundles/host: stratum's own link.
  await refuses(bundle.installBundle(dest, dest), "unsafe", "is a symlink");
  assertEquals(
    await Deno.readTextFile(join(dest, "SHA256SUMS")),
    before,
    "the installed copy is whole",
  );
});

Deno.test("directories stratum makes have their mode whatever the umask", async () => {
  const old = Deno.umask(0o000);
  try {
    const d = join(await Deno.makeTempDir(), "var/lib/stratum/slots");
    await host.ensureDir(d);
    assertEquals((await Deno.stat(d)).mode! & 0o777, 0o755);
    assertEquals((await Deno.stat(join(d, ".."))).mode! & 0o777, 0o755);
  } finally {
    Deno.umask(old);
  }
});

Deno.test("bundle make refuses a file name the manifest cannot carry", async () => {
  const { mode } = await hostBundle();
  await Deno.writeTextFile(join(mode, "evil\nname"), "x");
  await refuses(bundle.makeManifest(mode), "manifest", "cannot be listed");
});

Deno.test({
  name: "the migration lock lives in a directory closed to others, and a planted link is refused",
  ignore: !root,
  async fn() {
    const paths = host.hostPaths(await Deno.makeTempDir());
    assertEquals(paths.lock, paths.at("/run/stratum/migrate.lock"));
    const lock = await host.MigrationLock.acquire(paths.lock, { command: "test", waitMs: 0 });
    await lock.release();
    assertEquals((await Deno.stat(paths.at("/run/stratum"))).mode! & 0o777, 0o700);
    await Deno.remove(paths.lock);
    const victim = await Deno.makeTempFile();
    await Deno.writeTextFile(victim, "keep");
    await Deno.symlink(victim, paths.lock);
    const err = await assertRejects(() =>
      host.MigrationLock.acquire(paths.lock, { command: "test", waitMs: 0 })
    );
    assert(err instanceof host.ErrUnsafeFile, String(err));
    assertEquals(await Deno.readTextFile(victim), "keep", "the link's target was not truncated");
  },
});

Deno.test("a signed bundle names its mode and version: a host bundle cannot pass as nspawn", async () => {
  const { dir } = await hostBundle();
  const { makeSigningKey } = await import("./support/tls.ts");
  const { key, pub } = await makeSigningKey(dir, "k");
  const signing = await bundle.readPrivateKey(await Deno.readTextFile(key), key);
  const trust = [await bundle.readPublicKey(await Deno.readTextFile(pub), pub)];
  // The carrier copies the signed host directory over nspawn/, signature and all.
  await Deno.remove(join(dir, "nspawn"), { recursive: true });
  const sig = await bundle.sign(await Deno.readFile(join(dir, "host/SHA256SUMS")), signing);
  await Deno.writeFile(join(dir, "host/SHA256SUMS.sig"), sig);
  await new Deno.Command("cp", { args: ["-a", join(dir, "host"), join(dir, "nspawn")] }).output();
  const ok = await bundle.verifyBundle(join(dir, "host"), { trust, mode: "host" });
  assertEquals([ok.identity?.mode, ok.identity?.version], ["host", "1"]);
  await refuses(
    bundle.verifyBundle(join(dir, "nspawn"), { trust, mode: "nspawn" }),
    "mode",
    "is a host bundle",
  );
  // A signed bundle without BUNDLE.json is refused: it could be any mode, any version.
  await Deno.remove(join(dir, "host/BUNDLE.json"));
  await bundle.makeManifest(join(dir, "host"));
  const sig2 = await bundle.sign(await Deno.readFile(join(dir, "host/SHA256SUMS")), signing);
  await Deno.writeFile(join(dir, "host/SHA256SUMS.sig"), sig2);
  await refuses(
    bundle.verifyBundle(join(dir, "host"), { trust, mode: "host" }),
    "manifest",
    "names no mode and version",
  );
});

Deno.test("versions compare as dotted numbers", () => {
  assert(bundle.compareVersions("1.10", "1.9") > 0);
  assert(bundle.compareVersions("1.2", "1.2.0") === 0);
  assert(bundle.compareVersions("2", "10") < 0);
  assertEquals(bundle.versionProblem("1.2.3"), undefined);
  assert(bundle.versionProblem("v1.2")?.includes("not dotted numbers"));
});

// Between verification and the copy (the second review's cases): the carrier
// owns the bundle's directory and acts at the moment a hook names, not after
// a sleep. What root copies is what was verified, from what was verified.

/** A directory only root may enter, with a private file and a setuid program: what a swap aims at. */
async function rootOnlyTree(): Promise<{ dir: string; modes: () => Promise<string[]> }> {
  const dir = await Deno.makeTempDir({ prefix: "stratum-rootonly-" });
  await Deno.chmod(dir, 0o700);
  await Deno.mkdir(join(dir, "stack"));
  await Deno.writeTextFile(join(dir, "stack/stack.py"), "secret\n");
  await Deno.chmod(join(dir, "stack/stack.py"), 0o600);
  await Deno.copyFile("/bin/true", join(dir, "suid"));
  await Deno.chmod(join(dir, "suid"), 0o4755);
  const modes = async () => {
    const out: string[] = [];
    for (const p of ["", "stack", "stack/stack.py", "suid"]) {
      out.push(`${p || "."} ${((await Deno.lstat(join(dir, p))).mode! & 0o7777).toString(8)}`);
    }
    return out;
  };
  return { dir, modes };
}

/** Every path under `dir` whose mode has a setuid or setgid bit. */
async function setuidUnder(dir: string): Promise<string[]> {
  const found: string[] = [];
  const walk = async (d: string) => {
    for await (const e of Deno.readDir(d)) {
      const p = join(d, e.name);
      if (((await Deno.lstat(p)).mode ?? 0) & 0o6000) found.push(p);
      if (e.isDirectory) await walk(p);
    }
  };
  await walk(dir).catch(() => {});
  return found;
}

Deno.test("a mode directory swapped for a link after verification: refused, and the link's target keeps its modes", async () => {
  const { mode } = await hostBundle();
  const checked = await bundle.verifyBundle(mode);
  const target = await rootOnlyTree();
  const before = await target.modes();
  // Right after preflight's last read, the carrier swaps the directory.
  await Deno.rename(mode, `${mode}.real`);
  await Deno.symlink(target.dir, mode);
  const dest = join(await Deno.makeTempDir(), "bundles/host");
  await refuses(bundle.installBundle(mode, dest, {}, checked), "changed", "is a symlink");
  assertEquals(await target.modes(), before, "root changed the modes of a tree it never verified");
  assertEquals(await Deno.lstat(bundle.stagedPath(dest)).catch(() => undefined), undefined);
  assertEquals(await Deno.lstat(dest).catch(() => undefined), undefined, "nothing installed");
});

Deno.test("a subdirectory swapped for a link during the copy is not read through", async () => {
  const { mode } = await hostBundle();
  const checked = await bundle.verifyBundle(mode);
  const target = await rootOnlyTree();
  const before = await target.modes();
  const dest = join(await Deno.makeTempDir(), "bundles/host");
  let swapped = false;
  const err = await assertRejects(() =>
    bundle.installBundle(mode, dest, {}, checked, {
      beforeCopy: async (f) => {
        if (swapped || !f.startsWith("stack/")) return;
        swapped = true;
        await Deno.rename(join(mode, "stack"), join(mode, "stack.real"));
        await Deno.symlink(join(target.dir, "stack"), join(mode, "stack"));
      },
    })
  );
  assert(swapped, "the hook ran");
  assert(err instanceof bundle.BundleError && err.fault === "changed", String(err));
  assert(err.message.includes("reached through a link"), err.message);
  assertEquals(await target.modes(), before);
  assertEquals(await Deno.lstat(bundle.stagedPath(dest)).catch(() => undefined), undefined);
});

Deno.test("a setuid file planted during the copy is never copied, and a failed copy leaves nothing", async () => {
  const { mode } = await hostBundle();
  const checked = await bundle.verifyBundle(mode);
  const dest = join(await Deno.makeTempDir(), "bundles/host");
  const staged = bundle.stagedPath(dest);
  const plant = async () => {
    await Deno.copyFile("/bin/true", join(mode, "x"));
    await Deno.chmod(join(mode, "x"), 0o4755);
  };
  // 1. Planted, then a FIFO where a listed file was, which ends the copy.
  const stagingModes: number[] = [];
  const listed = [...checked.content.listed.keys()];
  const last = listed[listed.length - 1]!;
  await refuses(
    bundle.installBundle(mode, dest, {}, checked, {
      beforeCopy: async (f) => {
        stagingModes.push((await Deno.stat(staged)).mode! & 0o777);
        if (f === listed[0]) await plant();
        if (f === last) {
          await Deno.remove(join(mode, f));
          await new Deno.Command("mkfifo", { args: [join(mode, f)] }).output();
        }
      },
    }),
    "changed",
    "not a regular file",
  );
  assert(stagingModes.length > 0 && stagingModes.every((m) => m === 0o700), `${stagingModes}`);
  assertEquals(await Deno.lstat(staged).catch(() => undefined), undefined, "staging removed");
  assertEquals(await setuidUnder(join(dest, "..")), []);
  // 2. Planted, and the copy completes: only the listed files are there.
  await Deno.remove(join(mode, last));
  await Deno.remove(join(mode, "x"));
  const fresh = await hostBundle();
  const checked2 = await bundle.verifyBundle(fresh.mode);
  await bundle.installBundle(fresh.mode, dest, {}, checked2, {
    beforeCopy: async (f) => {
      if (f === listed[0]) {
        await Deno.copyFile("/bin/true", join(fresh.mode, "x"));
        await Deno.chmod(join(fresh.mode, "x"), 0o4755);
      }
    },
  });
  const real = await bundle.installedDir(dest);
  assertEquals(await Deno.lstat(join(real, "x")).catch(() => undefined), undefined);
  assertEquals(await setuidUnder(join(dest, "..")), []);
  assertEquals((await Deno.stat(real)).mode! & 0o777, 0o755, "opened once whole");
  await bundle.verifyBundle(real, { installed: true });
});

Deno.test("a FIFO where a listed file was, after verification, is refused at once and never blocks", async () => {
  const { mode } = await hostBundle();
  const checked = await bundle.verifyBundle(mode);
  const dest = join(await Deno.makeTempDir(), "bundles/host");
  // A FIFO with no writer blocks a plain open forever: a copy that still
  // did one would never settle. The deadline only tells a hang from a
  // refusal; it measures nothing.
  let timer: ReturnType<typeof setTimeout> | undefined;
  const hung = new Promise<never>((_, reject) => {
    timer = setTimeout(() => reject(new Error("the copy blocked on a FIFO")), 60_000);
  });
  try {
    await refuses(
      Promise.race([
        bundle.installBundle(mode, dest, {}, checked, {
          beforeCopy: async (f) => {
            if (f !== "stack.json") return;
            await Deno.remove(join(mode, f));
            await new Deno.Command("mkfifo", { args: [join(mode, f)] }).output();
          },
        }),
        hung,
      ]),
      "changed",
      "not a regular file",
    );
  } finally {
    clearTimeout(timer);
  }
  // The hash of a path that is a FIFO is refused too, without blocking.
  const fifo = join(await Deno.makeTempDir(), "fifo");
  await new Deno.Command("mkfifo", { args: [fifo] }).output();
  await refuses(bundle.hashFile(fifo), "unsafe", "not a regular file");
});

Deno.test("the version checked is the one that was hashed: BUNDLE.json rewritten after its hash is not read", async () => {
  const { dir, mode } = await hostBundle();
  const { makeSigningKey } = await import("./support/tls.ts");
  const { key, pub } = await makeSigningKey(dir, "k");
  const signing = await bundle.readPrivateKey(await Deno.readTextFile(key), key);
  const trust = [await bundle.readPublicKey(await Deno.readTextFile(pub), pub)];
  const sig = await bundle.sign(await Deno.readFile(join(mode, "SHA256SUMS")), signing);
  await Deno.writeFile(join(mode, "SHA256SUMS.sig"), sig);
  // An old signed release (version 1); right after its BUNDLE.json is
  // hashed, the carrier makes it say 9.0 for any later read.
  const v = await bundle.verifyBundle(mode, {
    trust,
    mode: "host",
    afterHash: async (f) => {
      if (f === "BUNDLE.json") {
        await Deno.writeTextFile(join(mode, f), JSON.stringify({ mode: "host", version: "9.0" }));
      }
    },
  });
  assertEquals(v.identity, { mode: "host", version: "1" });
});

Deno.test("bundle make DIR --version V writes that version (the subcommand's option, in any position)", async () => {
  const { dir } = await hostBundle();
  const cli = async (...args: string[]) => {
    const o = await new Deno.Command(Deno.execPath(), {
      args: ["run", "-A", join(import.meta.dirname!, "../main.ts"), ...args],
      env: { NO_COLOR: "1" },
    }).output();
    return { code: o.code, out: new TextDecoder().decode(o.stdout) };
  };
  const version = async () =>
    JSON.parse(await Deno.readTextFile(join(dir, "host/BUNDLE.json"))).version;
  await Deno.remove(join(dir, "host/SHA256SUMS"));
  assertEquals((await cli("bundle", "make", dir, "--version", "1.2.0")).code, 0);
  assertEquals(await version(), "1.2.0");
  assert(await Deno.stat(join(dir, "host/SHA256SUMS")).then(() => true), "manifest written");
  assertEquals((await cli("bundle", "make", "--version", "1.3.0", dir)).code, 0);
  assertEquals(await version(), "1.3.0");
  await bundle.verifyBundle(join(dir, "host"), { mode: "host" });
  const own = await cli("--version");
  assertEquals(own.code, 0);
  assert(own.out.startsWith("stratum "), own.out);
  assertEquals(await version(), "1.3.0", "the program's --version writes nothing");
});

Deno.test({
  name:
    "--wipe-state empties a state directory that is a mount point, and refuses one with a mount below it before removing anything",
  ignore: !root,
  async fn() {
    const scratch = await Deno.makeTempDir({ prefix: "stratum-wipe-" });
    try {
      const o = await new Deno.Command("unshare", {
        args: [
          "--mount",
          "--propagation",
          "private",
          Deno.execPath(),
          "run",
          "-A",
          join(import.meta.dirname!, "support/wipe_mount.ts"),
          scratch,
        ],
        env: { NO_COLOR: "1" },
      }).output();
      const err = new TextDecoder().decode(o.stderr);
      assertEquals(o.code, 0, err);
      const r = JSON.parse(new TextDecoder().decode(o.stdout));
      assertEquals(r.wiped, { exists: true, left: [], mounted: true }, "emptied, still the disk");
      assert(r.refused.startsWith("ErrState: "), r.refused);
      assert(r.refused.includes("/var/lib/kubelet/pods"), r.refused);
      assertEquals(r.nestedLeft, ["keep", "pods"], "nothing removed before the refusal");
    } finally {
      await Deno.remove(scratch, { recursive: true });
    }
  },
});
