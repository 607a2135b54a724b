// deno-lint-ignore-file no-console
// Runs inside the systemd sandbox (its own network namespace): leaves what a
// source stack would (veth links, iptables chains with jumps, an nft table,
// pinned BPF objects) beside things that are not ours, runs cleanupNetwork
// twice, and prints what was there before and after.
import $ from "dax";
import * as host from "../../../lib/host/mod.ts";

const [root] = Deno.args;
if (!root) throw new Error("usage: drive_network.ts ROOT");

await $`ip link add stratum0 type veth peer name stratum1`;
await $`ip link add lxc1234 type veth peer name keep-peer0`;
await $`ip link add cilium_host type veth peer name cilium_net`;
await $`ip link add keep0 type veth peer name keep1`;
await $`iptables -w -N CILIUM_INPUT`;
await $`iptables -w -A CILIUM_INPUT -j ACCEPT`;
await $`iptables -w -A INPUT -m comment --comment ${"cilium: jump"} -j CILIUM_INPUT`;
await $`iptables -w -A INPUT -p tcp --dport 22 -j ACCEPT`;
await $`iptables -w -t nat -N STRATUM-POSTROUTING`;
await $`iptables -w -t nat -A POSTROUTING -j STRATUM-POSTROUTING`;
await $`iptables -w -N KEEP-CHAIN`;
await $`iptables -w -t mangle -N CILIUM_PRE_mangle`;
await $`iptables -w -t mangle -A PREROUTING -m comment --comment ${"cilium-feeder: CILIUM_PRE_mangle"} -j CILIUM_PRE_mangle`;
await $`ip6tables -w -N CILIUM_FORWARD`;
await $`ip6tables -w -A CILIUM_FORWARD -j ACCEPT`;
await $`ip6tables -w -A FORWARD -j CILIUM_FORWARD`;
await $`ip6tables -w -N KEEP6`;
await $`nft add table inet stratum_lb`;
await $`nft add table inet keepme`;
await $`nft add chain inet keepme STRATUM_LB`;
await $`nft add chain inet keepme keep_chain`;
await Deno.mkdir(`${root}/sys/fs/bpf/stratum/maps`, { recursive: true });
await Deno.writeTextFile(`${root}/sys/fs/bpf/stratum/maps/lb4`, "pinned");
await Deno.mkdir(`${root}/sys/fs/bpf/other`, { recursive: true });

async function state() {
  return {
    links: (JSON.parse(await $`ip -j link show`.text()) as { ifname: string }[]).map((l) =>
      l.ifname
    )
      .sort(),
    filter: (await $`iptables -w -S`.text()).trim().split("\n"),
    nat: (await $`iptables -w -t nat -S`.text()).trim().split("\n"),
    mangle: (await $`iptables -w -t mangle -S`.text()).trim().split("\n"),
    filter6: (await $`ip6tables -w -S`.text()).trim().split("\n"),
    tables: (await $`nft list tables`.text()).trim().split("\n").sort(),
    keepme: await $`nft list table inet keepme`.text(),
    bpf: await Deno.stat(`${root}/sys/fs/bpf/stratum`).then(() => true, () => false),
    otherBpf: await Deno.stat(`${root}/sys/fs/bpf/other`).then(() => true, () => false),
  };
}

const before = await state();
const first = await host.cleanupNetwork({ root });
const after = await state();
const second = await host.cleanupNetwork({ root });

// A listing that dies by a signal fails the cleanup; a tool that is not
// installed (exit 127) is skipped. Shadowed by programs of our own on PATH.
const bin = await Deno.makeTempDir();
const path = Deno.env.get("PATH") ?? "/usr/bin:/bin";
const shadow = async (name: string, body: string) => {
  await Deno.writeTextFile(`${bin}/${name}`, `#!/bin/sh\n${body}\n`, { mode: 0o755 });
  Deno.env.set("PATH", `${bin}:${path}`);
  try {
    return await host.cleanupNetwork({ root }).then(
      (r) => ({ ok: r }),
      (e) => ({ error: String(e) }),
    );
  } finally {
    Deno.env.set("PATH", path);
    await Deno.remove(`${bin}/${name}`);
  }
};
const killed = await shadow("ip6tables-save", "kill -9 $$");
const missing = await shadow("nft", "exit 127");
console.log(JSON.stringify({ before, first, after, second, killed, missing }));
