// lib/host: the config snapshot, bundles and network cleanup. Snapshot and
// bundle tests run on a scratch root; network cleanup runs inside the
// systemd sandbox, whose network namespace is its own.
import { join } from "node:path";
import * as host from "../lib/host/mod.ts";
import { assert, assertEquals } from "./support/assert.ts";
import { Sandbox, sandboxUnavailable } from "./support/sandbox.ts";
import { scratchDir } from "./support/scratch.ts";
import { lacking } from "../scripts/packages.ts";

async function scratch(): Promise<string> {
  return await Deno.makeTempDir({ prefix: "stratum-host-" });
}

async function state(root: string, files: string[]): Promise<Record<string, string | null>> {
  const out: Record<string, string | null> = {};
  for (const f of files) {
    const p = join(root, f);
    try {
      const st = await Deno.stat(p);
      out[f] = `${(st.mode! & 0o777).toString(8)} ${await Deno.readTextFile(p)}`;
    } catch {
      out[f] = null;
    }
  }
  return out;
}

Deno.test("config snapshot restores exact bytes, modes and absence", async () => {
  const root = await scratch();
  const files = [
    "/etc/sysctl.d/90-stratum.conf",
    "/etc/containerd/config.toml",
    "/var/lib/kubelet/config.yaml",
  ];
  await Deno.mkdir(join(root, "etc/sysctl.d"), { recursive: true });
  await Deno.writeTextFile(join(root, files[0]!), "net.ipv4.ip_forward = 1\n");
  await Deno.chmod(join(root, files[0]!), 0o640);
  await Deno.mkdir(join(root, "etc/containerd"), { recursive: true });
  await Deno.writeTextFile(join(root, files[1]!), "version = 2\n");
  const snap = new host.ConfigSnapshot({
    root,
    dir: join(root, "var/lib/stratum/config-snapshot"),
    files,
    owner: "2026-11-30T10:00:00.000Z",
  });
  const before = await state(root, files);

  await snap.take();
  assertEquals(await snap.ownerOnDisk(), "2026-11-30T10:00:00.000Z");
  // The target stack changes one, deletes one, creates one.
  await Deno.writeTextFile(join(root, files[0]!), "changed\n");
  await Deno.chmod(join(root, files[0]!), 0o600);
  await Deno.remove(join(root, files[1]!));
  await Deno.mkdir(join(root, "var/lib/kubelet"), { recursive: true });
  await Deno.writeTextFile(join(root, files[2]!), "new\n");

  await snap.restore();
  assertEquals(await state(root, files), before);
  await snap.restore(); // idempotent
  assertEquals(await state(root, files), before);
  await snap.discard();
  assertEquals(await snap.ownerOnDisk(), undefined);
  await snap.discard(); // missing is fine
  await snap.restore(); // no snapshot: nothing to do
  assertEquals(await state(root, files), before);
});

Deno.test("config snapshot: take replaces an older snapshot whole", async () => {
  const root = await scratch();
  const f = "/etc/a.conf";
  await Deno.mkdir(join(root, "etc"), { recursive: true });
  const snap = new host.ConfigSnapshot({ root, dir: join(root, "snap"), files: [f], owner: "m1" });
  await Deno.writeTextFile(join(root, f), "one\n");
  await snap.take();
  await Deno.writeTextFile(join(root, f), "two\n");
  await snap.take();
  await Deno.writeTextFile(join(root, f), "three\n");
  await snap.restore();
  assertEquals(await Deno.readTextFile(join(root, f)), "two\n");
});

Deno.test("config snapshot: a snapshot of another migration is never restored", async () => {
  // Invariant: a rollback puts back only what its own migration saved; a
  // snapshot an earlier migration left behind must not overwrite the
  // operator's current files.
  const root = await scratch();
  const f = "/etc/a.conf";
  const dir = join(root, "snap");
  await Deno.mkdir(join(root, "etc"), { recursive: true });
  await Deno.writeTextFile(join(root, f), "earlier migration's\n");
  await new host.ConfigSnapshot({ root, dir, files: [f], owner: "earlier" }).take();
  await Deno.writeTextFile(join(root, f), "operator's current\n");
  const mine = new host.ConfigSnapshot({ root, dir, files: [f], owner: "this" });
  assertEquals(await mine.restore(), false);
  assertEquals(await Deno.readTextFile(join(root, f)), "operator's current\n");
  // An unowned snapshot (an older format) belongs to no migration either.
  await Deno.writeTextFile(join(dir, "manifest.json"), "[]\n");
  assertEquals(await mine.restore(), false);
  assertEquals(await mine.ownerOnDisk(), "");
  assertEquals(await Deno.readTextFile(join(root, f)), "operator's current\n");
  // Its own snapshot it does restore.
  await mine.take();
  await Deno.writeTextFile(join(root, f), "target's\n");
  assertEquals(await mine.restore(), true);
  assertEquals(await Deno.readTextFile(join(root, f)), "operator's current\n");
});

const noNetworkTools = sandboxUnavailable ?? lacking("iptables") ?? lacking("nftables") ??
  lacking("iproute2");
// deno-lint-ignore no-console
if (noNetworkTools) console.error(`network cleanup test is skipped: ${noNetworkTools}`);

Deno.test({
  name:
    "network cleanup removes the links, chains, tables and BPF pins a source left, and nothing else",
  ignore: noNetworkTools !== undefined,
  async fn() {
    await using sb = await Sandbox.start();
    const root = await scratchDir("netroot-");
    const r = await sb.deno(["run", "-A", "tests/support/sandbox/drive_network.ts", root]);
    assertEquals(r.code, 0, r.stderr);
    const o = JSON.parse(r.stdout);
    for (
      const l of ["stratum0", "stratum1", "lxc1234", "cilium_host", "cilium_net", "keep0", "keep1"]
    ) {
      assert(o.before.links.includes(l), `fixture link ${l} missing`);
    }
    assertEquals(o.after.links.filter((l: string) => /^(stratum|lxc|cilium_)/.test(l)), []);
    assert(
      o.after.links.includes("keep0") && o.after.links.includes("keep1"),
      "other links are kept",
    );
    assert(!o.after.links.includes("keep-peer0"), "the peer of an lxc veth goes with it");
    assert(
      !o.after.filter.some((l: string) => l.includes("CILIUM_INPUT")),
      o.after.filter.join("\n"),
    );
    assert(o.after.filter.includes("-N KEEP-CHAIN"), "other chains are kept");
    assert(
      o.after.filter.includes("-A INPUT -p tcp -m tcp --dport 22 -j ACCEPT"),
      "other rules are kept",
    );
    assert(!o.after.nat.some((l: string) => l.includes("STRATUM-POSTROUTING")));
    assert(!o.after.mangle.some((l: string) => l.includes("CILIUM_")), o.after.mangle.join("\n"));
    assert(o.before.filter6.includes("-N CILIUM_FORWARD"), "fixture ip6tables chain missing");
    assertEquals(o.after.filter6.filter((l: string) => l.includes("CILIUM_")), []);
    assert(o.after.filter6.includes("-N KEEP6"), "other ip6tables chains are kept");
    // What the first run reports is what was there of ours, every family.
    assertEquals(o.first.chains.sort(), [
      "ip6tables filter CILIUM_FORWARD",
      "iptables filter CILIUM_INPUT",
      "iptables mangle CILIUM_PRE_mangle",
      "iptables nat STRATUM-POSTROUTING",
      "nft inet keepme STRATUM_LB",
    ]);
    assert(!o.after.keepme.includes("STRATUM_LB"), o.after.keepme);
    assert(o.after.keepme.includes("keep_chain"), "other nft chains are kept");
    assertEquals(o.first.links.sort(), [
      "cilium_host",
      "cilium_net",
      "lxc1234",
      "stratum0",
      "stratum1",
    ]);
    assertEquals(o.first.tables, ["inet stratum_lb"]);
    assertEquals(o.after.tables.filter((t: string) => t.includes("stratum")), []);
    assert(o.after.tables.includes("table inet keepme"));
    assertEquals([o.after.bpf, o.after.otherBpf], [false, true]);
    assertEquals(
      o.second,
      { links: [], chains: [], tables: [], bpf: false },
      "a second run finds nothing",
    );
    assert(
      /ip6tables-save: .*by signal 9/.test(o.killed.error ?? ""),
      JSON.stringify(o.killed),
    );
    assertEquals(o.missing, { ok: { links: [], chains: [], tables: [], bpf: false } });
  },
});
