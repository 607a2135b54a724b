// Who may change a node, and against which --root (lib/cli/guard.ts,
// docs/cli.md), through the real CLI:
//
// - not root: every command that changes the node (migrate run, resume,
//   ack; node install, upgrade, rollback, boot) is refused with exit 2, one
//   line, outcome `refused`, before it does anything (its scratch tree is
//   unchanged); the read-only ones (migrate plan, migrate status, node
//   history) still answer unprivileged;
// - a --root other than / on a command that drives systemd or probes health
//   (migrate run, resume; node install, upgrade, rollback, boot, status) is
//   refused the same way unless the test switch STRATUM_TEST_ROOT_OK=1 is
//   set: systemd and the health endpoint are the real node's whatever
//   --root says. On a live node, `node install --root DIR` used to start
//   and probe the real node's stack and report "installed … healthy".

import { join } from "node:path";
import { assert, assertEquals } from "./support/assert.ts";
import { makeBundle } from "./support/bundle.ts";
import { stratum } from "./support/cli.ts";
import { nspawnUnavailable, sandboxUnavailable } from "./support/sandbox.ts";
import { Node } from "./support/sandbox_node.ts";
import { stratumArgv, stratumBin } from "./support/stratum_bin.ts";
import { lacking } from "../scripts/packages.ts";

const bundleDir = await makeBundle(await Deno.makeTempDir({ prefix: "stratum-refusal-bundle-" }));
await Deno.chmod(bundleDir, 0o755);

const commands: Record<string, string[]> = {
  "migrate plan": ["migrate", "plan", "--to", "nspawn", "--bundle", bundleDir],
  "migrate run": ["migrate", "run", "--to", "nspawn", "--bundle", bundleDir],
  "migrate resume": ["migrate", "resume"],
  "migrate status": ["migrate", "status"],
  "migrate ack": ["migrate", "ack"],
  "node install": ["node", "install", "--mode", "host", "--bundle", bundleDir, "--node", "n1"],
  "node upgrade": ["node", "upgrade", "--bundle", bundleDir],
  "node rollback": ["node", "rollback"],
  "node repair": ["node", "repair", "--bundle", bundleDir],
  "node status": ["node", "status"],
  "node boot": ["node", "boot", "--wait-lock", "0"],
  "node history": ["node", "history"],
};
const changing = [
  "migrate run",
  "migrate resume",
  "migrate ack",
  "node install",
  "node upgrade",
  "node rollback",
  "node repair",
  "node boot",
];
const drivesSystemd = [
  "migrate run",
  "migrate resume",
  "node install",
  "node upgrade",
  "node rollback",
  "node repair",
  "node boot",
  "node status",
];

/** Every path under `root` with its size and mode: what "nothing changed" compares. */
async function tree(root: string): Promise<string[]> {
  const out: string[] = [];
  const walk = async (rel: string) => {
    for await (const e of Deno.readDir(join(root, rel))) {
      const p = rel ? `${rel}/${e.name}` : e.name;
      const st = await Deno.lstat(join(root, p));
      out.push(`${p} ${st.mode?.toString(8)} ${st.size}`);
      if (e.isDirectory) await walk(p);
    }
  };
  await walk("");
  return out.sort();
}

/** A scratch root with a node.json, readable by anyone (as / is). */
async function scratch(): Promise<string> {
  const root = await Deno.makeTempDir({ prefix: "stratum-refusal-" });
  await Deno.chmod(root, 0o755);
  await Deno.mkdir(join(root, "etc/stratum"), { recursive: true });
  await Deno.mkdir(join(root, "var/lib/stratum"), { recursive: true });
  await Deno.writeTextFile(
    join(root, "etc/stratum/node.json"),
    JSON.stringify({ mode: "host", slot: "a", node: "n1" }),
  );
  return root;
}

const noSetpriv = lacking("util-linux");

Deno.test({
  name:
    "not root: every command that changes the node exits 2, one line, outcome refused, nothing changed",
  // As uid 65534 the checkout's `deno run` has no Deno cache it may read:
  // the artifact (STRATUM_BIN), with a cache of its own, is what runs.
  ignore: noSetpriv !== undefined || stratumBin === undefined,
  async fn(t) {
    const cache = await Deno.makeTempDir({ prefix: "stratum-nobody-cache-" });
    await Deno.chown(cache, 65534, 65534);
    const asNobody = async (args: string[], env: Record<string, string> = {}) => {
      const o = await new Deno.Command("setpriv", {
        args: [
          "--reuid=65534",
          "--regid=65534",
          "--clear-groups",
          "env",
          `STRATUM_CACHE=${cache}`,
          "NO_COLOR=1",
          // An operator's PATH: nothing under root's home, which uid 65534 cannot read.
          "PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin",
          ...Object.entries(env).map(([k, v]) => `${k}=${v}`),
          ...stratumArgv(args),
        ],
        cwd: "/",
        stdin: "null",
      }).output();
      const text = new TextDecoder();
      return { code: o.code, stdout: text.decode(o.stdout), stderr: text.decode(o.stderr) };
    };
    try {
      for (const name of changing) {
        await t.step(name, async () => {
          const root = await scratch();
          try {
            const before = await tree(root);
            const r = await asNobody([...commands[name]!, "--root", root, "--json"], {
              STRATUM_TEST_ROOT_OK: "1",
            });
            assertEquals(r.code, 2, `${name}: ${r.stdout}${r.stderr}`);
            assertEquals(r.stderr.trim().split("\n"), [
              `stratum: ${name} changes the node and must run as root; this is uid 65534: nothing was changed`,
            ]);
            assertEquals(JSON.parse(r.stdout).outcome, "refused", r.stdout);
            assertEquals(await tree(root), before, `${name} changed the root`);
          } finally {
            await Deno.remove(root, { recursive: true });
          }
        });
      }
      await t.step("the read-only commands still answer unprivileged", async () => {
        const root = await scratch();
        try {
          for (const name of ["migrate plan", "migrate status", "node history"]) {
            const r = await asNobody([...commands[name]!, "--root", root, "--json"]);
            assertEquals(r.code, 0, `${name}: ${r.stdout}${r.stderr}`);
          }
        } finally {
          await Deno.remove(root, { recursive: true });
        }
      });
    } finally {
      await Deno.remove(cache, { recursive: true });
    }
  },
});

Deno.test("--root other than / without the test switch: refused (exit 2) where systemd is driven", async (t) => {
  for (const name of drivesSystemd) {
    await t.step(name, async () => {
      const root = await scratch();
      try {
        const before = await tree(root);
        const r = await stratum([...commands[name]!, "--root", root, "--json"], {
          STRATUM_TEST_ROOT_OK: "",
        });
        assertEquals(r.code, 2, `${name}: ${r.stdout}${r.stderr}`);
        const lines = r.stderr.trim().split("\n");
        assertEquals(lines.length, 1, r.stderr);
        assert(lines[0]!.startsWith(`stratum: --root ${root}: ${name} drives`), r.stderr);
        const doc = JSON.parse(r.stdout);
        assertEquals(doc.outcome, "refused", r.stdout);
        assertEquals(await tree(root), before, `${name} changed the root`);
        // The fast path (node status) refuses the same way without --json.
        const plain = await stratum([...commands[name]!, "--root", root], {
          STRATUM_TEST_ROOT_OK: "",
        });
        assertEquals(plain.code, 2, plain.stdout + plain.stderr);
      } finally {
        await Deno.remove(root, { recursive: true });
      }
    });
  }
  await t.step("the file-only commands still take --root", async () => {
    const root = await scratch();
    try {
      for (const name of ["migrate plan", "migrate status", "migrate ack", "node history"]) {
        const r = await stratum([...commands[name]!, "--root", root, "--json"], {
          STRATUM_TEST_ROOT_OK: "",
        });
        assertEquals(r.code, 0, `${name}: ${r.stdout}${r.stderr}`);
      }
    } finally {
      await Deno.remove(root, { recursive: true });
    }
  });
});

Deno.test({
  name:
    "on a live node, node install --root DIR is refused: it never starts or probes the real node's stack",
  ignore: sandboxUnavailable !== undefined || nspawnUnavailable !== undefined,
  async fn() {
    await using n = await Node.boot("host");
    const r = await n.stratum([
      "node",
      "install",
      "--mode",
      "host",
      "--bundle",
      n.bundle,
      "--node",
      "node-2",
      "--root",
      "/tmp/other",
      "--json",
    ], { STRATUM_TEST_ROOT_OK: "" });
    assertEquals([r.code, r.doc?.outcome], [2, "refused"], r.stdout + r.stderr);
    assertEquals((await n.sb.exec(["test", "-e", "/tmp/other"])).code, 1, "nothing was written");
    const s = await n.state();
    assertEquals([s.active, s.health], [{ a: true, b: false }, "200 ok host node-1"]);
  },
});
