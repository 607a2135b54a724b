import * as exec from "../exec/mod.ts";
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
 *
 * It runs while the node stack is down, so every command has a deadline
 * (`callTimeoutMs`) and the signal: iptables waits at most a few seconds for
 * the xtables lock, and a command that hangs or dies by a signal fails the
 * cleanup instead of stalling or passing it.
 */
export async function cleanupNetwork(
  opts: { root: string; signal?: AbortSignal; callTimeoutMs?: number },
): Promise<CleanupReport> {
  const report: CleanupReport = { links: [], chains: [], tables: [], bpf: false };
  const o = { timeoutMs: opts.callTimeoutMs ?? 15_000, signal: opts.signal };
  const sh: Sh = {
    run: (argv) => exec.run(argv, o),
    ok: (argv) => exec.output(argv, o),
  };
  await cleanupLinks(sh, report);
  for (const bin of ["iptables", "ip6tables"]) await cleanupIptables(sh, bin, report);
  await cleanupNft(sh, report);
  const bpf = join(opts.root, "/sys/fs/bpf/stratum");
  try {
    await Deno.remove(bpf, { recursive: true });
    report.bpf = true;
  } catch (err) {
    if (!(err instanceof Deno.errors.NotFound)) throw err;
  }
  return report;
}

/** The runner every cleanup command goes through, with the cleanup's deadline and signal. */
interface Sh {
  run(argv: string[]): Promise<exec.Output>;
  ok(argv: string[]): Promise<string>;
}

/** How long iptables waits for the xtables lock, in seconds: another user may hold it. */
const xtablesWaitSeconds = "5";

async function has(bin: string): Promise<boolean> {
  const { $ } = await import("dax");
  return (await $.which(bin)) !== undefined;
}

async function cleanupLinks(sh: Sh, report: CleanupReport): Promise<void> {
  if (!(await has("ip"))) return;
  const links: { ifname: string }[] = JSON.parse(
    (await sh.ok(["ip", "-j", "link", "show"])) || "[]",
  );
  for (const { ifname } of links) {
    if (!linkPattern.test(ifname)) continue;
    // Deleting one end of a veth pair deletes its peer: a later NotFound is fine.
    const r = await sh.run(["ip", "link", "delete", ifname]);
    if (r.code === 0) report.links.push(ifname);
    else if (r.code !== 1 || !/Cannot find device/.test(r.stderr)) throw new exec.ExitError(r);
  }
}

async function cleanupIptables(sh: Sh, bin: string, report: CleanupReport): Promise<void> {
  if (!(await has(bin))) return;
  const ipt = (table: string, ...args: string[]) => [
    bin,
    "-w",
    xtablesWaitSeconds,
    "-t",
    table,
    ...args,
  ];
  for (const table of ["filter", "nat", "mangle", "raw"]) {
    const r = await sh.run(ipt(table, "-S"));
    if (r.code > 128) throw new exec.ExitError(r);
    // 4: the xtables lock stayed busy; anything else: table not in this kernel.
    if (r.code === 4) throw new exec.ExitError(r);
    if (r.code !== 0) continue;
    const lines = r.stdout.split("\n");
    const ours = lines
      .map((l) => /^-N (\S+)$/.exec(l)?.[1])
      .filter((c): c is string => c !== undefined && chainPattern.test(c));
    if (ours.length === 0) continue;
    // Rules in other chains that jump to ours go first, or -X refuses.
    for (const l of lines) {
      const m = /^-A (\S+) (.*-[jg] (\S+).*)$/.exec(l);
      if (m && !chainPattern.test(m[1]!) && ours.includes(m[3]!)) {
        await sh.ok(ipt(table, "-D", m[1]!, ...splitRule(m[2]!)));
      }
    }
    for (const c of ours) await sh.ok(ipt(table, "-F", c));
    for (const c of ours) {
      await sh.ok(ipt(table, "-X", c));
      report.chains.push(`${bin} ${table} ${c}`);
    }
  }
}

async function cleanupNft(sh: Sh, report: CleanupReport): Promise<void> {
  if (!(await has("nft"))) return;
  const r = await sh.run(["nft", "-j", "list", "ruleset"]);
  if (r.code > 128) throw new exec.ExitError(r);
  if (r.code !== 0) return;
  const items: Record<string, { family: string; name: string; table?: string }>[] =
    JSON.parse(r.stdout || "{}").nftables ?? [];
  const tables = items.flatMap((i) => (i.table ? [i.table] : []));
  for (const t of tables) {
    if (!tablePattern.test(t.name)) continue;
    await sh.ok(["nft", "delete", "table", t.family, t.name]);
    report.tables.push(`${t.family} ${t.name}`);
  }
  // Chains iptables-nft made are gone already; these are chains added to other nft tables.
  for (const c of items.flatMap((i) => (i.chain ? [i.chain] : []))) {
    if (!chainPattern.test(c.name) || tablePattern.test(c.table ?? "")) continue;
    const gone = await sh.run(["nft", "flush", "chain", c.family, c.table!, c.name]);
    if (gone.code > 128) throw new exec.ExitError(gone);
    if (gone.code !== 0) continue;
    await sh.ok(["nft", "delete", "chain", c.family, c.table!, c.name]);
    report.chains.push(`nft ${c.family} ${c.table} ${c.name}`);
  }
}

/** Splits an `iptables -S` rule into arguments, keeping quoted strings whole. */
function splitRule(rule: string): string[] {
  return [...rule.matchAll(/"((?:[^"\\]|\\.)*)"|(\S+)/g)].map((m) => m[1] ?? m[2]!);
}
