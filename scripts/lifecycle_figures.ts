// deno-lint-ignore-file no-console
// Figures for a node's life on real systemd in the test sandbox, through the
// CLI as an operator runs it: `stratum node install` to healthy, and the
// stack's downtime (longest gap in health answers, probed every 10 ms) of an
// in-place migration against a reprovision of the same bundle, and an
// upgrade (`stratum node upgrade`, A/B to release 2) against the new stack's
// own restart, same run.
// Needs root and namespaces.
//
// Run: deno task bench:lifecycle [RUNS]
import { join } from "node:path";
import { makeBundle } from "../tests/support/bundle.ts";
import { nspawnUnavailable, repoRoot, Sandbox } from "../tests/support/sandbox.ts";

if (nspawnUnavailable) {
  console.error(`cannot measure here: ${nspawnUnavailable}`);
  Deno.exit(1);
}
const runs = Number(Deno.args[0] ?? "3");
await Deno.mkdir(join(repoRoot, ".test-tmp"), { recursive: true });
const bundle = await makeBundle(
  await Deno.makeTempDir({ dir: join(repoRoot, ".test-tmp"), prefix: "bench-" }),
);
const v2 = await makeBundle(
  await Deno.makeTempDir({ dir: join(repoRoot, ".test-tmp"), prefix: "bench-v2-" }),
  { release: "2" },
);
const med = (xs: number[]) => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)]!;

// Longest stretch without a 200 from the health endpoint, until /run/stop-probe exists.
const prober = `
import os, time, urllib.request
last_ok = None; gap = 0.0; seen = False
while not os.path.exists("/run/stop-probe"):
    now = time.monotonic()
    try:
        urllib.request.urlopen("http://127.0.0.1:18080/healthz", timeout=0.2)
        if last_ok is not None: gap = max(gap, now - last_ok)
        elif not seen: open("/run/probe-ready", "w").close()
        last_ok = now; seen = True
    except Exception:
        pass
    time.sleep(0.01)
print(int(gap * 1000))
`;

async function probed(sb: Sandbox, work: () => Promise<void>): Promise<number> {
  await sb.exec(["rm", "-f", "/run/stop-probe", "/run/probe-ready"]);
  const probe = sb.exec(["python3", "-c", prober]);
  // Work starts once the prober has seen the stack answer, or a fast change
  // (a restart) could finish before it looks.
  while ((await sb.exec(["test", "-e", "/run/probe-ready"])).code !== 0) {
    await new Promise((r) => setTimeout(r, 10));
  }
  await work();
  await sb.exec(["touch", "/run/stop-probe"]);
  return Number((await probe).stdout.trim());
}

const rows: {
  installMs: number;
  inPlaceMs: number;
  reprovisionMs: number;
  upgradeMs: number;
  restartMs: number;
}[] = [];
for (let i = 0; i < runs; i++) {
  await using sb = await Sandbox.start();
  const stratum = async (...args: string[]) => {
    const r = await sb.deno(["run", "-A", "main.ts", ...args]);
    if (r.code !== 0) throw new Error(`stratum ${args.join(" ")}: ${r.code} ${r.stderr}`);
    return r;
  };
  await stratum("--version"); // Deno's caches warm, as on a node that has run stratum before
  const t0 = performance.now();
  await stratum("node", "install", "--mode", "host", "--bundle", bundle, "--node", "node-1");
  const installMs = performance.now() - t0;
  const inPlaceMs = await probed(sb, async () => {
    await stratum("migrate", "run", "--to", "nspawn", "--bundle", bundle);
  });
  await stratum("migrate", "ack");
  const reprovisionMs = await probed(sb, async () => {
    await stratum(
      "migrate",
      "run",
      "--strategy",
      "reprovision",
      "--to",
      "host",
      "--bundle",
      bundle,
    );
    for (;;) {
      const st = JSON.parse((await stratum("migrate", "status", "--json")).stdout);
      if (st.journal?.step === "bootstrapped") break;
      if (st.journal?.step === "failed") throw new Error(st.message);
      await new Promise((r) => setTimeout(r, 100));
    }
  });
  await stratum("migrate", "ack");
  // The reprovision left host mode in slot a; the upgrade builds release 2 in slot b.
  const upgradeMs = await probed(sb, async () => {
    await stratum("node", "upgrade", "--bundle", v2);
  });
  const restartMs = await probed(sb, async () => {
    await sb.exec(["systemctl", "restart", "stratum-b.target"]);
  });
  rows.push({ installMs, inPlaceMs, reprovisionMs, upgradeMs, restartMs });
}
const m = (k: keyof typeof rows[0]) => med(rows.map((r) => r[k]));
console.log(`median of ${runs} runs, through the CLI (deno run main.ts) in the sandbox:`);
console.log(`  node install (host) to healthy:          ${m("installMs").toFixed(0)} ms`);
console.log(`  downtime, in-place host → nspawn:        ${m("inPlaceMs")} ms`);
console.log(`  downtime, reprovision nspawn → host:     ${m("reprovisionMs")} ms`);
console.log(
  `  ratio reprovision / in-place:            ${(m("reprovisionMs") / m("inPlaceMs")).toFixed(1)}`,
);
console.log(`  downtime, upgrade host → host (release 2): ${m("upgradeMs")} ms`);
console.log(`  downtime, restart of the new stack:      ${m("restartMs")} ms`);
console.log(
  `  ratio upgrade / the new stack's restart: ${(m("upgradeMs") / m("restartMs")).toFixed(1)}`,
);
await Deno.remove(bundle, { recursive: true });
await Deno.remove(v2, { recursive: true });
