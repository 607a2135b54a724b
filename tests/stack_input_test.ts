// deno-lint-ignore-file no-console
// What a signed stack.json may ask of the host is checked as input, never
// passed through (docs/bundles.md, "What a mode directory's stack.json
// says"). Invariants:
// - a kernel setting (a module name, a sysctl key) not in the kernel's own
//   syntax is bad input: `bundle verify` and a migration's preflight exit 2
//   with one line naming the file's line, and nothing changes; every
//   modprobe and sysctl call stratum makes ends its options with `--`;
// - a service named after one of stratum's own units in the machine
//   (stratum-end, -workloads, -ready, -probe, ...) is bad input: exit 2.

import { join } from "node:path";
import * as bundle from "../lib/bundle/mod.ts";
import { assert, assertEquals } from "./support/assert.ts";
import { makeBundle } from "./support/bundle.ts";
import { stratum } from "./support/cli.ts";
import { nspawnUnavailable, repoRoot } from "./support/sandbox.ts";
import { Node } from "./support/sandbox_node.ts";

const ignore = nspawnUnavailable !== undefined;
if (ignore) console.error(`stack input tests in the sandbox are skipped: ${nspawnUnavailable}`);

const modulesFile = "/etc/modules-load.d/stratum.conf";

/**
 * A test bundle under the checkout whose `mode` directory's sysctl file
 * has `sysctl` added, with a modules file of `modules` (when given), and
 * whose stack.json `edit` may change; manifest remade.
 */
async function stackBundle(
  mode: "host" | "nspawn",
  o: { sysctl?: string; modules?: string; edit?: (s: Record<string, unknown>) => void },
): Promise<string> {
  await Deno.mkdir(join(repoRoot, ".test-tmp"), { recursive: true });
  const dir = await makeBundle(
    await Deno.makeTempDir({ dir: join(repoRoot, ".test-tmp"), prefix: "bundle-" }),
    o.sysctl ? { sysctl: { [mode]: o.sysctl } } : {},
  );
  const m = join(dir, mode);
  const stack = JSON.parse(await Deno.readTextFile(join(m, "stack.json")));
  if (o.modules !== undefined) {
    await Deno.writeTextFile(join(m, "host-files/modules.conf"), o.modules);
    stack.hostFiles[modulesFile] = "host-files/modules.conf";
  }
  o.edit?.(stack);
  await Deno.writeTextFile(join(m, "stack.json"), JSON.stringify(stack));
  await bundle.makeManifest(m);
  return dir;
}

/** The kernel lines refused, with the line each error names. */
const badKernel: [string, { sysctl?: string; modules?: string }, string][] = [
  ["a sysctl key that is an option", { sysctl: "--p = x" }, 'line 3 "--p = x"'],
  ["a sysctl key with a space", { sysctl: "net.ipv4.ip_forward -w = 1" }, "line 3"],
  ["a sysctl line without a value", { sysctl: "kernel.core_pattern" }, "line 3"],
  ["a sysctl key with an empty part", { sysctl: "net..ipv4 = 1" }, "line 3"],
  ["a module that is an option", { modules: "overlay\n-r\n" }, 'line 2 "-r"'],
  ["a module with an option", { modules: "-C x\n" }, 'line 1 "-C x"'],
];

for (const [what, lines, says] of badKernel) {
  Deno.test(`bundle verify refuses ${what}: exit 2, one line naming it`, async () => {
    const dir = await stackBundle("host", lines);
    const root = await Deno.makeTempDir();
    const r = await stratum(["bundle", "verify", dir, "--mode", "host", "--root", root]);
    assertEquals(r.code, 2, `${r.stdout}${r.stderr}`);
    assert(r.stderr.includes(says), `names ${says}: ${r.stderr}`);
    assertEquals(r.stderr.trim().split("\n").length, 1, `one line: ${r.stderr}`);
    await Deno.remove(dir, { recursive: true });
  });
}

Deno.test("bundle verify takes the kernel's own syntax: dotted and slashed keys, a leading -", async () => {
  const dir = await stackBundle("host", {
    sysctl: "-net.bridge.bridge-nf-call-iptables = 1\nnet/ipv4/conf/eth-0/rp_filter = 2",
    modules: "# c\noverlay\nbr_netfilter\n",
  });
  const root = await Deno.makeTempDir();
  const r = await stratum(["bundle", "verify", dir, "--mode", "host", "--root", root]);
  assertEquals(r.code, 0, `${r.stdout}${r.stderr}`);
  await Deno.remove(dir, { recursive: true });
});

for (const name of ["end", "workloads", "ready", "probe", "machine"]) {
  Deno.test(`bundle verify refuses a service named ${name}, one of stratum's own units`, async () => {
    const dir = await stackBundle("nspawn", {
      edit: (s) => {
        (s.services as { name: string }[])[0]!.name = name;
      },
    });
    const root = await Deno.makeTempDir();
    const r = await stratum(["bundle", "verify", dir, "--mode", "nspawn", "--root", root]);
    assertEquals(r.code, 2, `${r.stdout}${r.stderr}`);
    assert(r.stderr.includes(`service name "${name}" is stratum's own`), r.stderr);
    await Deno.remove(dir, { recursive: true });
  });
}

for (
  const [what, mode, grants, says] of [
    ["an unknown grant", "nspawn", ["all-caps"], '"grants" lists what the machine is given'],
    ["a grant named twice", "nspawn", ["kernel-log", "kernel-log"], '"grants" lists'],
    ["grants in a host-mode stack", "host", ["kernel-log"], "host mode has no machine"],
  ] as const
) {
  Deno.test(`bundle verify refuses ${what}: exit 2, one line naming it`, async () => {
    const dir = await stackBundle(mode, {
      edit: (s) => {
        s.grants = grants;
      },
    });
    const root = await Deno.makeTempDir();
    const r = await stratum(["bundle", "verify", dir, "--mode", mode, "--root", root]);
    assertEquals(r.code, 2, `${r.stdout}${r.stderr}`);
    assert(r.stderr.includes(says), r.stderr);
    assertEquals(r.stderr.trim().split("\n").length, 1, r.stderr);
    await Deno.remove(dir, { recursive: true });
    await Deno.remove(root, { recursive: true });
  });
}

for (
  const [what, runtime, says] of [
    ["an unknown runtime kind", { kind: "docker" }, '"runtime" is {"kind": "containerd"'],
    ["a runtime field not known", { kind: "containerd", socket: "/x" }, '"runtime" is'],
    ["a relative runtime state", { kind: "containerd", state: "run/containerd" }, "not state"],
    ["a runtime state with a glob", { kind: "containerd", state: "/run/*" }, "not state"],
    ["a runtime state of /", { kind: "containerd", state: "/" }, "not state"],
  ] as const
) {
  Deno.test(`bundle verify refuses ${what}: exit 2, one line naming it`, async () => {
    const dir = await stackBundle("host", {
      edit: (s) => {
        s.runtime = runtime;
      },
    });
    const root = await Deno.makeTempDir();
    const r = await stratum(["bundle", "verify", dir, "--mode", "host", "--root", root]);
    assertEquals(r.code, 2, `${r.stdout}${r.stderr}`);
    assert(r.stderr.includes(says), r.stderr);
    assertEquals(r.stderr.trim().split("\n").length, 1, r.stderr);
    await Deno.remove(dir, { recursive: true });
    await Deno.remove(root, { recursive: true });
  });
}

Deno.test({
  name:
    "a migration refuses a bad kernel line at preflight (exit 2, nothing changed); every modprobe and sysctl call ends its options with --",
  ignore,
  async fn() {
    await using n = await Node.boot("host");
    const seen = "ls /var/lib/stratum/slots; systemctl list-units --no-legend 'stratum-*'; " +
      "cat /etc/stratum/node.json /etc/sysctl.d/90-stratum.conf";
    const before = await n.sb.sh(seen);
    const bad = await stackBundle("nspawn", { sysctl: "--p = x" });
    const r = await n.stratum(["migrate", "run", "--to", "nspawn", "--bundle", bad, "--json"]);
    assertEquals([r.code, r.doc?.outcome, r.doc?.failedStep?.action], [2, "refused", "preflight"]);
    assert(r.doc.message.includes('line 3 "--p = x"'), r.doc.message);
    assertEquals(await n.sb.sh(seen), before, "nothing changed");
    assertEquals((await n.stratum(["migrate", "ack"])).code, 0);

    // The calls themselves, seen through stand-ins first on PATH that log
    // their argv (sysctl then runs for real; modprobe loads nothing here).
    const shim = await Deno.makeTempDir({ dir: join(repoRoot, ".test-tmp"), prefix: "shim-" });
    const log = join(shim, "calls");
    await Deno.writeTextFile(
      join(shim, "sysctl"),
      `#!/bin/sh\necho "sysctl $*" >> ${log}\nexec /usr/sbin/sysctl "$@"\n`,
      { mode: 0o755 },
    );
    await Deno.writeTextFile(join(shim, "modprobe"), `#!/bin/sh\necho "modprobe $*" >> ${log}\n`, {
      mode: 0o755,
    });
    const good = await stackBundle("nspawn", {
      sysctl: "net.ipv4.ip_unprivileged_port_start = 900",
      modules: "overlay\n",
    });
    const ok = await n.stratum(["migrate", "run", "--to", "nspawn", "--bundle", good, "--json"], {
      PATH: `${shim}:/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin`,
    });
    assertEquals([ok.code, ok.doc?.outcome], [0, "complete"], ok.stderr);
    const calls = (await Deno.readTextFile(log)).trim().split("\n");
    assert(calls.some((c) => c === "modprobe -a -- overlay"), calls.join("\n"));
    assert(
      calls.some((c) => c === "sysctl -q -w -- net.ipv4.ip_unprivileged_port_start=900"),
      calls.join("\n"),
    );
    for (const c of calls) {
      const args = c.split(" ").slice(1);
      const end = args.indexOf("--");
      assert(end >= 0 && args.slice(0, end).every((a) => a.startsWith("-")), `options end: ${c}`);
    }
    for (const d of [bad, good, shim]) await Deno.remove(d, { recursive: true });
  },
});
