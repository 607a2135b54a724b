import { join } from "node:path";
import * as host from "../lib/host/mod.ts";
import * as isolation from "../lib/isolation/mod.ts";
import { assert, assertEquals } from "./support/assert.ts";

async function listing(root: string): Promise<string[]> {
  const out: string[] = [];
  const walk = async (d: string) => {
    for await (const e of Deno.readDir(d)) {
      const p = join(d, e.name);
      if (e.isDirectory) await walk(p);
      else out.push(p.slice(root.length) + (e.isSymlink ? ` -> ${await Deno.readLink(p)}` : ""));
    }
  };
  await walk(root);
  return out.sort();
}

Deno.test("prepareHost installs the mode's firewall flush unit and apt pins, idempotently", async () => {
  const root = await Deno.makeTempDir({ prefix: "stratum-prep-" });
  const paths = host.hostPaths(root);
  assertEquals(await isolation.prepareHost(paths, "nspawn"), true, "first run writes the unit");
  const once = await listing(root);
  assertEquals(await isolation.prepareHost(paths, "nspawn"), false, "second run changes nothing");
  assertEquals(await listing(root), once);
  assertEquals(once, [
    "/etc/apt/preferences.d/stratum-nspawn.pref",
    "/etc/systemd/system/multi-user.target.wants/stratum-firewall-flush.service -> ../stratum-firewall-flush.service",
    "/etc/systemd/system/stratum-firewall-flush.service",
  ]);
  const pin = await Deno.readTextFile(join(root, "etc/apt/preferences.d/stratum-nspawn.pref"));
  assert(
    pin.includes("Package: kubelet containerd cri-tools") && pin.includes("Pin-Priority: -1"),
    pin,
  );
});

Deno.test("prepareHost for the other mode replaces the first mode's; unprepareHost removes them", async () => {
  const root = await Deno.makeTempDir({ prefix: "stratum-prep-" });
  const paths = host.hostPaths(root);
  await isolation.prepareHost(paths, "host");
  await isolation.unprepareHost(paths, "host");
  await isolation.prepareHost(paths, "nspawn");
  const l = await listing(root);
  assert(!l.some((f) => f.includes("stratum-host.pref")), l.join("\n"));
  const unit = await Deno.readTextFile(
    join(root, "etc/systemd/system/stratum-firewall-flush.service"),
  );
  assert(unit.includes("for nspawn mode"), unit);
  await isolation.unprepareHost(paths, "nspawn");
  await isolation.unprepareHost(paths, "nspawn");
  assertEquals((await listing(root)).filter((f) => f.includes("stratum")), []);
});

/** A dpkg status file under `root` with these packages installed (and one only configured). */
async function dpkgStatus(root: string, installed: string[]) {
  await Deno.mkdir(join(root, "var/lib/dpkg"), { recursive: true });
  await Deno.writeTextFile(
    join(root, "var/lib/dpkg/status"),
    [
      ...installed.map((p) => `Package: ${p}\nStatus: install ok installed\nVersion: 1\n`),
      "Package: cri-tools\nStatus: deinstall ok config-files\nVersion: 1\n",
    ].join("\n"),
  );
}

Deno.test("apt pins hold back only packages that conflict with the mode and are not installed", async () => {
  const root = await Deno.makeTempDir({ prefix: "stratum-prep-" });
  const paths = host.hostPaths(root);
  const pref = (m: string) => join(root, `etc/apt/preferences.d/stratum-${m}.pref`);
  // A pin left by an earlier stratum in host mode (systemd-container at -1) goes.
  await Deno.mkdir(join(root, "etc/apt/preferences.d"), { recursive: true });
  await Deno.writeTextFile(
    pref("host"),
    "Package: systemd-container\nPin: release *\nPin-Priority: -1\n",
  );
  // Host mode pins nothing, not even a systemd-container that is not
  // installed: it conflicts with nothing and a later move into nspawn needs it.
  await dpkgStatus(root, []);
  await isolation.prepareHost(paths, "host");
  assertEquals((await listing(root)).filter((f) => f.includes("preferences.d")), []);
  // nspawn mode: containerd is installed (a pin would only stop its updates),
  // kubelet is not, cri-tools only left its config files.
  await dpkgStatus(root, ["systemd-container", "containerd"]);
  await isolation.prepareHost(paths, "nspawn");
  const pin = await Deno.readTextFile(pref("nspawn"));
  assert(pin.includes("\nPackage: kubelet cri-tools\nPin: release *\nPin-Priority: -1\n"), pin);
  // Everything installed: no pin at all (and the one written before goes).
  await dpkgStatus(root, ["kubelet", "containerd"]);
  await Deno.writeTextFile(
    join(root, "var/lib/dpkg/status"),
    "\nPackage: cri-tools\nStatus: install ok installed\n",
    { append: true },
  );
  await isolation.prepareHost(paths, "nspawn");
  assertEquals((await listing(root)).filter((f) => f.includes("preferences.d")), []);
  await Deno.remove(root, { recursive: true });
});

Deno.test('{"packagePins": false} in /etc/stratum/host-prep.json: no pin is written, the old one goes', async () => {
  const root = await Deno.makeTempDir({ prefix: "stratum-prep-" });
  const paths = host.hostPaths(root);
  await isolation.prepareHost(paths, "nspawn");
  assert((await listing(root)).includes("/etc/apt/preferences.d/stratum-nspawn.pref"));
  await Deno.mkdir(join(root, "etc/stratum"), { recursive: true });
  const conf = join(root, isolation.hostPrepConfig);
  await Deno.writeTextFile(conf, '{"packagePins": false}\n');
  await isolation.prepareHost(paths, "nspawn");
  const l = await listing(root);
  assertEquals(l.filter((f) => f.includes("preferences.d")), []);
  assert(l.includes("/etc/systemd/system/stratum-firewall-flush.service"), "the unit stays");
  await Deno.writeTextFile(conf, '{"packagePins": true}');
  await isolation.prepareHost(paths, "nspawn");
  assert((await listing(root)).includes("/etc/apt/preferences.d/stratum-nspawn.pref"));
  for (const bad of ["{", '{"packagePins": "no"}', "[]"]) {
    await Deno.writeTextFile(conf, bad);
    const err = await isolation.prepareHost(paths, "nspawn").then(() => undefined, (e) => e);
    assert(String(err).includes(conf), `${bad}: ${err}`);
  }
  await Deno.remove(root, { recursive: true });
});

Deno.test("node.json: saved, replaced and restored byte for byte", async () => {
  const root = await Deno.makeTempDir({ prefix: "stratum-nodecfg-" });
  const paths = host.hostPaths(root);
  await isolation.writeNodeConfig(paths.nodeConfig, { mode: "host", slot: "a", node: "n1" });
  const original = await Deno.readTextFile(paths.nodeConfig);
  await isolation.saveNodeConfig(paths.nodeConfig, paths.nodeConfigSaved);
  await isolation.writeNodeConfig(paths.nodeConfig, { mode: "nspawn", slot: "b", node: "n1" });
  // A second save (a resumed run) keeps the source's copy, not the target's.
  await isolation.saveNodeConfig(paths.nodeConfig, paths.nodeConfigSaved);
  assertEquals((await isolation.readNodeConfig(paths.nodeConfig))?.mode, "nspawn");
  await isolation.restoreNodeConfig(paths.nodeConfig, paths.nodeConfigSaved);
  assertEquals(await Deno.readTextFile(paths.nodeConfig), original);
  await isolation.restoreNodeConfig(paths.nodeConfig, paths.nodeConfigSaved); // nothing saved: no-op
  assertEquals(await Deno.readTextFile(paths.nodeConfig), original);
});

Deno.test("the kernel settings of a stack's host files are read as sysctl and modules-load read them", async () => {
  const { parseModules, parseSysctl } = await import("../lib/isolation/host_kernel.ts");
  assertEquals(
    [
      ...parseSysctl(
        "# c\n; c\nnet.ipv4.ip_forward = 1\n-net.bridge.bridge-nf-call-iptables=1\n" +
          "net/ipv4/ping_group_range = 0\t2147483647\nnot a line\n\n",
      ),
    ],
    [
      ["net.ipv4.ip_forward", "1"],
      ["net.bridge.bridge-nf-call-iptables", "1"],
      ["net.ipv4.ping_group_range", "0\t2147483647"],
    ],
  );
  assertEquals(parseModules("# c\noverlay\n  br_netfilter \n; x\nbad name\n"), [
    "overlay",
    "br_netfilter",
  ]);
});
