// deno-lint-ignore-file no-console
// Issue 38, item 8: the apt pins stratum writes hold back only what would
// conflict with the mode, never an update of an installed package, and an
// operator can turn them off (docs/cli.md, "Host paths").
//
// The defect as filed: after `node install` in host mode, `apt-cache policy
// systemd-container` showed the pin (priority -1, no candidate), which
// blocks its security updates and the nspawn runtime a later move needs;
// nspawn mode pinned containerd although it was installed. Through the
// artifact in the systemd sandbox, whose /etc and /var are overlays of the
// host's: apt reads the pins from /etc/apt/preferences.d and the package
// lists already on disk, so `apt-cache policy` and `apt-get -s` (a
// simulation: nothing downloaded, nothing installed) answer offline.

import { assert, assertEquals } from "./support/assert.ts";
import { nspawnUnavailable } from "./support/sandbox.ts";
import { Node } from "./support/sandbox_node.ts";

if (nspawnUnavailable) console.error(`package pin tests are skipped: ${nspawnUnavailable}`);

/** What `apt-cache policy PKG` says: the candidate, and every priority in its version table. */
async function policy(n: Node, pkg: string) {
  const r = await n.sb.exec(["apt-cache", "policy", pkg]);
  assertEquals(r.code, 0, r.stderr);
  const candidate = /^\s*Candidate:\s*(.*)$/m.exec(r.stdout)?.[1];
  const priorities = [...r.stdout.matchAll(/^ (?:\*\*\*| {3}) \S+ (-?\d+)$/gm)].map((m) => m[1]);
  return { candidate, priorities, text: r.stdout };
}

/** Whether dpkg has `pkg` installed inside the sandbox. */
async function installed(n: Node, pkg: string): Promise<boolean> {
  const r = await n.sb.exec(["dpkg-query", "-W", "-f=${db:Status-Status}", pkg]);
  return r.code === 0 && r.stdout.trim() === "installed";
}

/** An installed package: apt still has a candidate for it and would upgrade it. */
async function assertUpdatable(n: Node, pkg: string, label: string) {
  const p = await policy(n, pkg);
  assert(p.candidate && p.candidate !== "(none)", `${label}: ${pkg} has no candidate:\n${p.text}`);
  assert(!p.priorities.includes("-1"), `${label}: ${pkg} pinned to -1:\n${p.text}`);
  const sim = await n.sb.exec(["apt-get", "-s", "install", "--only-upgrade", pkg]);
  assertEquals(sim.code, 0, `${label}: apt-get -s install --only-upgrade ${pkg}: ${sim.stderr}`);
}

const pinFile = (mode: string) => `/etc/apt/preferences.d/stratum-${mode}.pref`;

Deno.test({
  name:
    "host mode pins nothing: systemd-container still updates; nspawn mode pins only what is not installed",
  ignore: nspawnUnavailable !== undefined,
  async fn() {
    await using n = await Node.boot("host");
    // The defect: a -1 pin on systemd-container (installed: the sandbox runs nspawn).
    assert(await installed(n, "systemd-container"));
    await assertUpdatable(n, "systemd-container", "after install in host mode");
    let s = await n.state();
    assertEquals(s.files[pinFile("host")], undefined, "no pin file in host mode");
    // Into nspawn mode: the conflicting packages not installed are pinned,
    // the installed ones (containerd on this machine, when it is there) are not.
    const r = await n.stratum(["migrate", "run", "--to", "nspawn", "--bundle", n.bundle]);
    assertEquals(r.code, 0, r.stderr);
    s = await n.state();
    assert(s.files[pinFile("nspawn")], "nspawn mode keeps kubelet and crictl off the host");
    const pin = await n.sb.sh(`cat ${pinFile("nspawn")}`);
    const pinned = /^Package: (.*)$/m.exec(pin)?.[1]?.split(" ") ?? [];
    for (const pkg of ["kubelet", "containerd", "cri-tools"]) {
      assertEquals(pinned.includes(pkg), !(await installed(n, pkg)), `${pkg} in ${pin}`);
      if (await installed(n, pkg)) await assertUpdatable(n, pkg, "in nspawn mode");
    }
    await assertUpdatable(n, "systemd-container", "in nspawn mode");
    // Back to host mode: the nspawn pin goes with the mode.
    assertEquals((await n.stratum(["migrate", "ack"])).code, 0);
    const back = await n.stratum(["migrate", "run", "--to", "host", "--bundle", n.bundle]);
    assertEquals(back.code, 0, back.stderr);
    s = await n.state();
    assertEquals([s.files[pinFile("nspawn")], s.files[pinFile("host")]], [undefined, undefined]);
  },
});

Deno.test({
  name: "node install with a bad /etc/stratum/host-prep.json: exit 2, naming it, nothing installed",
  ignore: nspawnUnavailable !== undefined,
  async fn() {
    await using n = await Node.fresh("nspawn");
    await n.sb.sh(`mkdir -p /etc/stratum && echo '[]' > /etc/stratum/host-prep.json`);
    const r = await n.stratum([
      "node",
      "install",
      "--mode",
      "nspawn",
      "--bundle",
      n.bundle,
      "--node",
      "node-1",
    ]);
    assertEquals(r.code, 2, r.stderr);
    assert(r.stderr.includes("/etc/stratum/host-prep.json"), r.stderr);
    const s = await n.state();
    assertEquals([s.node ?? null, s.active, s.slots], [null, { a: false, b: false }, {
      a: false,
      b: false,
    }]);
    assertEquals(Object.keys(s.files).filter((f) => /stratum-/.test(f)), [], "no unit, no pin");
  },
});

Deno.test({
  name: 'the opt-out: {"packagePins": false} in /etc/stratum/host-prep.json, no pin in nspawn mode',
  ignore: nspawnUnavailable !== undefined,
  async fn() {
    await using n = await Node.boot("host");
    // A file that does not say it is refused before anything changes, not after the target is proven.
    await n.sb.sh(`echo '{"packagePins": "no"}' > /etc/stratum/host-prep.json`);
    const before = await n.state();
    const bad = await n.stratum(["migrate", "run", "--to", "nspawn", "--bundle", n.bundle]);
    assertEquals(bad.code, 2, bad.stderr);
    assert(bad.stderr.includes("/etc/stratum/host-prep.json"), bad.stderr);
    const after = await n.state();
    assertEquals([after.node, after.journal], [before.node, null], "nothing changed");
    await n.sb.sh(`echo '{"packagePins": false}' > /etc/stratum/host-prep.json`);
    const r = await n.stratum(["migrate", "run", "--to", "nspawn", "--bundle", n.bundle]);
    assertEquals(r.code, 0, r.stderr);
    const s = await n.state();
    assertEquals(s.node.mode, "nspawn");
    assertEquals(
      Object.keys(s.files).filter((f) => f.startsWith("/etc/apt/preferences.d/stratum")),
      [],
    );
    assert(s.files["/etc/systemd/system/stratum-firewall-flush.service"], "the flush unit stays");
  },
});
