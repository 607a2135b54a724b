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
