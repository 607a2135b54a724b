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
