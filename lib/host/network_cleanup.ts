import $ from "dax";
import { join } from "node:path";

/** Links a node stack leaves behind: Cilium's, its endpoints' veths, and ours. */
export const linkPattern = /^(cilium_|lxc|stratum)/;
/** iptables and nft chains a node stack leaves behind. */
export const chainPattern = /^(CILIUM_|STRATUM)/;
/** nft tables a node stack leaves behind. */
export const tablePattern = /^(cilium|stratum)/;

/** What cleanupNetwork removed. */
export interface CleanupReport {
  links: string[];
  chains: string[];
  tables: string[];
  bpf: boolean;
}

/**
 * Removes the host networking a stopped source left behind, as a repave
 * does: links named like `cilium_*`, `lxc*`, `stratum*`; iptables chains
 * named `CILIUM_*`/`STRATUM*` (with the rules that jump to them); nft tables
 * named `cilium*`/`stratum*` and such chains in other tables; and the pinned
 * BPF objects under /sys/fs/bpf/stratum. Nothing else. Idempotent: a second
 * run finds nothing. Tools that are not installed are skipped.
 */
export async function cleanupNetwork(
  opts: { root: string; signal?: AbortSignal },
): Promise<CleanupReport> {
  const report: CleanupReport = { links: [], chains: [], tables: [], bpf: false };
  await cleanupLinks(report);
  for (const bin of ["iptables", "ip6tables"]) await cleanupIptables(bin, report);
  await cleanupNft(report);
  const bpf = join(opts.root, "/sys/fs/bpf/stratum");
  try {
    await Deno.remove(bpf, { recursive: true });
    report.bpf = true;
  } catch (err) {
    if (!(err instanceof Deno.errors.NotFound)) throw err;
  }
  return report;
}

async function has(bin: string): Promise<boolean> {
  return (await $.which(bin)) !== undefined;
}

async function cleanupLinks(report: CleanupReport): Promise<void> {
  if (!(await has("ip"))) return;
  const links: { ifname: string }[] = JSON.parse(await $`ip -j link show`.text() || "[]");
  for (const { ifname } of links) {
    if (!linkPattern.test(ifname)) continue;
    // Deleting one end of a veth pair deletes its peer: a later NotFound is fine.
    const r = await $`ip link delete ${ifname}`.noThrow().stderr("piped");
    if (r.code === 0) report.links.push(ifname);
    else if (!/Cannot find device/.test(r.stderr)) {
      throw new Error(`ip link delete ${ifname}: ${r.stderr.trim()}`);
    }
  }
}

async function cleanupIptables(bin: string, report: CleanupReport): Promise<void> {
  if (!(await has(bin))) return;
  for (const table of ["filter", "nat", "mangle", "raw"]) {
    const r = await $`${bin} -w -t ${table} -S`.noThrow().stdout("piped").stderr("piped");
    if (r.code !== 0) continue; // table not available in this kernel
    const lines = r.stdout.split("\n");
    const ours = lines
      .map((l) => /^-N (\S+)$/.exec(l)?.[1])
      .filter((c): c is string => c !== undefined && chainPattern.test(c));
    if (ours.length === 0) continue;
    // Rules in other chains that jump to ours go first, or -X refuses.
    for (const l of lines) {
      const m = /^-A (\S+) (.*-[jg] (\S+).*)$/.exec(l);
      if (m && !chainPattern.test(m[1]!) && ours.includes(m[3]!)) {
        await $`${bin} -w -t ${table} -D ${m[1]!} ${splitRule(m[2]!)}`;
      }
    }
    for (const c of ours) await $`${bin} -w -t ${table} -F ${c}`;
    for (const c of ours) {
      await $`${bin} -w -t ${table} -X ${c}`;
      report.chains.push(`${bin} ${table} ${c}`);
    }
  }
}

async function cleanupNft(report: CleanupReport): Promise<void> {
  if (!(await has("nft"))) return;
  const r = await $`nft -j list ruleset`.noThrow().stdout("piped").stderr("piped");
  if (r.code !== 0) return;
  const items: Record<string, { family: string; name: string; table?: string }>[] =
    JSON.parse(r.stdout || "{}").nftables ?? [];
  const tables = items.flatMap((i) => (i.table ? [i.table] : []));
  for (const t of tables) {
    if (!tablePattern.test(t.name)) continue;
    await $`nft delete table ${t.family} ${t.name}`;
    report.tables.push(`${t.family} ${t.name}`);
  }
  // Chains iptables-nft made are gone already; these are chains added to other nft tables.
  for (const c of items.flatMap((i) => (i.chain ? [i.chain] : []))) {
    if (!chainPattern.test(c.name) || tablePattern.test(c.table ?? "")) continue;
    const gone = await $`nft flush chain ${c.family} ${c.table!} ${c.name}`.noThrow().quiet();
    if (gone.code !== 0) continue;
    await $`nft delete chain ${c.family} ${c.table!} ${c.name}`;
    report.chains.push(`nft ${c.family} ${c.table} ${c.name}`);
  }
}

/** Splits an `iptables -S` rule into arguments, keeping quoted strings whole. */
function splitRule(rule: string): string[] {
  return [...rule.matchAll(/"((?:[^"\\]|\\.)*)"|(\S+)/g)].map((m) => m[1] ?? m[2]!);
}
