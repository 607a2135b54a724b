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
    run: (argv, input) => exec.run(argv, { ...o, ...(input === undefined ? {} : { input }) }),
    ok: (argv) => exec.output(argv, o),
  };
  // It runs while neither stack serves: a few processes, not one per
  // object. One lists all four; then links and each iptables family are
  // removed side by side; nft last, without the chains iptables-nft just
  // removed (nft lists those too).
  const [ip, v4, v6, nftList] = await listAll(sh);
  const links = ip === undefined ? undefined : ours(ip);
  const nft = nftList === undefined ? undefined : nftItems(nftList);
  await Promise.all([
    removeLinks(sh, links, report),
    removeIptables(sh, "iptables", v4, report),
    removeIptables(sh, "ip6tables", v6, report),
  ]);
  await removeNft(sh, nft, report);
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
  run(argv: string[], input?: string): Promise<exec.Output>;
  ok(argv: string[]): Promise<string>;
}

/** How long iptables waits for the xtables lock, in seconds: another user may hold it. */
const xtablesWaitSeconds = "5";

/** What each cleanup step lists, in this order. */
const listings = ["ip -j link show", "iptables-save", "ip6tables-save", "nft -j list ruleset"];

/**
 * Runs the four listings side by side in one process (each of ours carries
 * its deadline wrapper, about 110 ms under the test VM's emulator, while
 * neither stack serves; side by side they took 0.17–0.29 s there against
 * 0.29–0.53 s one after another) and returns each one's output, or
 * undefined for a tool that is not installed or a family this kernel does
 * not have. Each writes to its own file in a directory made here, 0700,
 * under /run (root's: not a TMPDIR the environment names). A listing
 * killed by a signal fails the cleanup, as does `ip`, which every node has.
 */
async function listAll(sh: Sh): Promise<(string | undefined)[]> {
  const dir = await Deno.makeTempDir({ dir: "/run", prefix: "stratum-net-" });
  try {
    const script = listings.map((l, i) => `{ ${l} >"$1/${i}"; echo $? >"$1/${i}.rc"; } &`)
      .join("\n") + "\nwait";
    const r = await sh.run(["sh", "-c", script, "sh", dir]);
    if (r.code !== 0) throw new exec.ExitError(r);
    const read = (f: string) => Deno.readTextFile(join(dir, f)).catch(() => undefined);
    return await Promise.all(listings.map(async (l, i) => {
      // No status: the listing never ended (killed with its shell).
      const code = Number((await read(`${i}.rc`))?.trim() ?? "137");
      if (code > 128 || (code !== 0 && code !== 127 && l.startsWith("ip "))) {
        throw new exec.ExitError({ ...r, argv: l.split(" "), code });
      }
      return code === 0 ? (await read(`${i}`)) ?? "" : undefined;
    }));
  } finally {
    await Deno.remove(dir, { recursive: true }).catch(() => {});
  }
}

/** Our links in `ip -j link show`'s output. */
function ours(json: string): string[] {
  return (JSON.parse(json || "[]") as { ifname: string }[])
    .map((l) => l.ifname)
    .filter((n) => linkPattern.test(n));
}

async function removeLinks(
  sh: Sh,
  found: string[] | undefined,
  report: CleanupReport,
): Promise<void> {
  if (!found?.length) return;
  // One process for every link. Deleting one end of a veth pair deletes its
  // peer, so a later line may find nothing: -force goes on past it, and
  // what is left after is what failed.
  const r = await sh.run(
    ["ip", "-force", "-batch", "-"],
    found.map((n) => `link delete dev ${n}\n`).join(""),
  );
  if (r.code > 128) throw new exec.ExitError(r);
  const left = ours(await sh.ok(["ip", "-j", "link", "show"]));
  if (left.length > 0) throw new exec.ExitError({ ...r, code: r.code || 1 });
  report.links.push(...found);
}

/**
 * One `iptables-restore --noflush` that removes what of ours the dump
 * holds, table by table: the rules in other chains that jump to our chains
 * (or -X refuses), then our chains' rules, then the chains. Each table's
 * changes apply at once.
 */
async function removeIptables(
  sh: Sh,
  bin: string,
  dump: string | undefined,
  report: CleanupReport,
): Promise<void> {
  if (dump === undefined) return;
  const batch = iptablesBatch(dump);
  if (batch.chains.length === 0) return;
  const done = await sh.run(
    [`${bin}-restore`, "-w", xtablesWaitSeconds, "--noflush"],
    batch.script,
  );
  // 4: the xtables lock stayed busy; anything else: the batch did not apply.
  if (done.code !== 0) throw new exec.ExitError(done);
  report.chains.push(...batch.chains.map((c) => `${bin} ${c}`));
}

/**
 * The iptables-restore script that removes our chains from an
 * `iptables-save` dump, and the chains it removes ("TABLE CHAIN").
 */
function iptablesBatch(dump: string): { script: string; chains: string[] } {
  const chains: string[] = [];
  let script = "";
  for (const section of dump.split(/^\*/m).slice(1)) {
    const lines = section.split("\n");
    const table = lines[0]!.trim();
    const ours = lines
      .map((l) => /^:(\S+) /.exec(l)?.[1])
      .filter((c): c is string => c !== undefined && chainPattern.test(c));
    if (ours.length === 0) continue;
    const jumps = lines.flatMap((l) => {
      const m = /^-A (\S+) (.*-[jg] (\S+).*)$/.exec(l);
      return m && !chainPattern.test(m[1]!) && ours.includes(m[3]!) ? [`-D ${m[1]} ${m[2]}`] : [];
    });
    script += [
      `*${table}`,
      ...jumps,
      ...ours.map((c) => `-F ${c}`),
      ...ours.map((c) => `-X ${c}`),
      "COMMIT",
      "",
    ].join("\n");
    chains.push(...ours.map((c) => `${table} ${c}`));
  }
  return { script, chains };
}

type NftItem = Record<string, { family: string; name: string; table?: string }>;

/** The items of `nft -j list ruleset`'s output. */
function nftItems(json: string): NftItem[] {
  return JSON.parse(json || "{}").nftables ?? [];
}

/** `nft -j list ruleset`'s items, listed again, or undefined when nft fails. */
async function nftRuleset(sh: Sh): Promise<NftItem[] | undefined> {
  const r = await sh.run(["nft", "-j", "list", "ruleset"]);
  if (r.code > 128) throw new exec.ExitError(r);
  return r.code === 0 ? nftItems(r.stdout) : undefined;
}

/**
 * Our nft tables and our chains in other tables, in one `nft -f` (atomic).
 * Listed before iptables ran, so the chains it removed are left out; if the
 * ruleset changed anyway and the batch fails, it is listed and tried once
 * more.
 */
async function removeNft(
  sh: Sh,
  items: NftItem[] | undefined,
  report: CleanupReport,
): Promise<void> {
  const family = { iptables: "ip", ip6tables: "ip6" } as Record<string, string>;
  const gone = new Set(report.chains.map((c) => {
    const [bin, table, chain] = c.split(" ");
    return `${family[bin!]} ${table} ${chain}`;
  }));
  for (let attempt = 0; items !== undefined; attempt++) {
    const tables = items.flatMap((i) => (i.table ? [i.table] : []))
      .filter((t) => tablePattern.test(t.name));
    const chains = items.flatMap((i) => (i.chain ? [i.chain] : [])).filter((c) =>
      chainPattern.test(c.name) && !tablePattern.test(c.table ?? "") &&
      !gone.has(`${c.family} ${c.table} ${c.name}`)
    );
    if (tables.length === 0 && chains.length === 0) return;
    const script = [
      ...tables.map((t) => `delete table ${t.family} ${t.name}`),
      ...chains.map((c) => `flush chain ${c.family} ${c.table} ${c.name}`),
      ...chains.map((c) => `delete chain ${c.family} ${c.table} ${c.name}`),
      "",
    ].join("\n");
    const r = await sh.run(["nft", "-f", "-"], script);
    if (r.code === 0) {
      report.tables.push(...tables.map((t) => `${t.family} ${t.name}`));
      report.chains.push(...chains.map((c) => `nft ${c.family} ${c.table} ${c.name}`));
      return;
    }
    if (r.code > 128 || attempt > 0) throw new exec.ExitError(r);
    items = await nftRuleset(sh);
  }
}
