// What the README and docs/ say is what the tool does. Two checks:
//
// 1. Every `stratum ...` command line the docs show — in a ```sh block or in
//    inline code — names commands and options the program has, in a form
//    it parses (placeholders such as DIR and MODE stand for values; `[...]`
//    is optional; `a\|b` in a table is either). A doc line naming an option
//    that does not exist, or a subcommand's option after a positional that
//    the program would take for its own, fails here.
// 2. Every line of every ```sh block runs, exactly as written (a path such
//    as /srv/bundle or /etc/stratum/trust substituted by a scratch one, and
//    --root SCRATCH added to a stratum command that acts on a node), and
//    does what the text around it says; a line that cannot run here is in
//    `elsewhere` with the test that covers it. A new sh line that is in
//    neither fails CI.
import { join } from "node:path";
import type { Command } from "commander";
import * as cli from "../lib/cli/mod.ts";
import * as isolation from "../lib/isolation/mod.ts";
import { hostPaths } from "../lib/host/mod.ts";
import { assert, assertEquals } from "./support/assert.ts";
import { makeBundle } from "./support/bundle.ts";
import { defaultKubectl, noKubectl, SimCluster, stratumWorkloads } from "./support/cluster.ts";
import { lacking } from "../scripts/packages.ts";
import { allGroups } from "./support/command_groups.ts";

const repo = new URL("..", import.meta.url).pathname.replace(/\/$/, "");

/** README.md and docs/*.md, by path relative to the repository. */
async function docs(): Promise<Map<string, string>> {
  const out = new Map([["README.md", await Deno.readTextFile(join(repo, "README.md"))]]);
  for await (const e of Deno.readDir(join(repo, "docs"))) {
    if (e.name.endsWith(".md")) {
      out.set(`docs/${e.name}`, await Deno.readTextFile(join(repo, "docs", e.name)));
    }
  }
  return out;
}

/** Every line of the ```sh blocks, as written, with where it is. */
function shLines(all: Map<string, string>): { doc: string; line: string }[] {
  const out: { doc: string; line: string }[] = [];
  for (const [doc, text] of all) {
    let inSh = false;
    for (const l of text.split("\n")) {
      if (/^```sh\s*$/.test(l)) inSh = true;
      else if (/^```/.test(l)) inSh = false;
      else if (inSh && l.trim() !== "" && !l.trim().startsWith("#")) out.push({ doc, line: l });
    }
  }
  return out;
}

/** Inline `stratum ...` spans outside code blocks. */
function inlineCommands(all: Map<string, string>): { doc: string; line: string }[] {
  const out: { doc: string; line: string }[] = [];
  for (const [doc, text] of all) {
    const prose = text.replace(/^```[\s\S]*?^```/gm, "");
    for (const m of prose.matchAll(/`(stratum [^`]+)`/g)) out.push({ doc, line: m[1]! });
  }
  return out;
}

/** Lines that are not this program's command lines, or only name one, with why. */
const notCommands = new Map([
  ["stratum up", "the cluster controller, another program (snapshot-restore.md says so)"],
]);

/** Checks one documented command line against the program; returns what is wrong, or undefined. */
function problemOf(program: Command, line: string): string | undefined {
  // The comment, optional parts, and a table's escaped alternatives.
  const text = line.replace(/\s+#.*$/, "").replace(/\[[^\]]*\]/g, " ").replace(/\\\|/g, "|");
  const words = text.trim().split(/\s+/).slice(1);
  let cmd = program;
  while (words.length > 0) {
    const names = words[0]!.split("|");
    const sub = cmd.commands.find((c) => c.name() === names[0]);
    if (!sub) break;
    for (const n of names) {
      if (!cmd.commands.some((c) => c.name() === n)) return `no command ${n} under ${cmd.name()}`;
    }
    cmd = sub;
    words.shift();
  }
  if (cmd.commands.length > 0 && words.length > 0 && !words[0]!.startsWith("-")) {
    return `no command ${words[0]} under ${cmd.name()}`;
  }
  let positionals = 0;
  for (let i = 0; i < words.length; i++) {
    const w = words[i]!;
    if (!w.startsWith("-")) {
      positionals++;
      continue;
    }
    const flag = w.split("=")[0]!;
    const opt = cmd.options.find((o) => o.long === flag || o.short === flag);
    if (!opt && flag !== "--help" && flag !== "-h") {
      return `${cmd.name()} has no option ${flag}`;
    }
    if (opt && (opt.required || opt.optional) && !w.includes("=")) i++;
  }
  const declared = cmd.registeredArguments.length;
  if (cmd !== program && positionals > declared) {
    return `${cmd.name()} takes ${declared} argument(s), the line gives ${positionals}`;
  }
  return undefined;
}

/** The program's command tree, built as main.ts builds it (nothing runs). */
function program(): Command {
  return cli.commandTree(allGroups());
}

Deno.test("every stratum command line in README.md and docs/ names commands and options the program has", async () => {
  const p = program();
  const all = await docs();
  const lines = [
    ...inlineCommands(all),
    ...shLines(all).filter((l) => l.line.startsWith("stratum ")),
  ];
  assert(lines.length > 40, `only ${lines.length} command lines found: is the extraction broken?`);
  const wrong = lines.filter((l) => !notCommands.has(l.line))
    .map((l) => ({ ...l, problem: problemOf(p, l.line) }))
    .filter((l) => l.problem);
  assertEquals(wrong.map((w) => `${w.doc}: ${w.line}: ${w.problem}`), []);
});

Deno.test("every example in the commands' --help names commands and options the program has", async () => {
  const { examples } = await import("../lib/cli/examples.ts");
  const p = program();
  const wrong = Object.values(examples).flat().filter((l) => l.startsWith("stratum "))
    .map((l) => [l, problemOf(p, l)]).filter(([, why]) => why);
  assertEquals(wrong, []);
});

Deno.test("the command-line check fails a line that names what the program does not have", () => {
  const p = program();
  assertEquals(problemOf(p, "stratum migrate plan --to nspawn --bundle DIR"), undefined);
  assert(problemOf(p, "stratum migrate plan --to nspawn --bundel DIR")?.includes("--bundel"));
  assert(problemOf(p, "stratum migrate plans")?.includes("no command plans"));
  assert(problemOf(p, "stratum bundle make\\|sign\\|vrfy DIR")?.includes("no command vrfy"));
  assert(problemOf(p, "stratum rollout list extra")?.includes("takes 0 argument"));
});

/** sh lines that do not run here, and the test that covers what they say. */
const elsewhere = new Map([
  [
    "npx -y deno@2.9.6 task demo",
    "scripts/fresh_root_check runs it in a fresh root (the demo needs the whole sandbox)",
  ],
  [
    "npx -y deno@2.9.6 task test",
    "it is this suite; scripts/fresh_root_check runs it in a fresh root",
  ],
  [
    "scripts/compile x86_64    # or aarch64; writes dist/stratum-linux-<arch> and its .sha256",
    "the test task runs it before every run (scripts/test.ts); artifact_test checks both",
  ],
  [
    "ansible-playbook -i inventory.ini migrate.yml -e stratum_mode=nspawn",
    "needs an inventory of nodes: ansible_test runs migrate.yml over three sandboxed nodes",
  ],
  [
    "ansible-playbook -i inventory.ini upgrade.yml -e stratum_bundle=/srv/stratum-bundle-1.2",
    "needs an inventory of nodes: ansible_test runs upgrade.yml over three sandboxed nodes",
  ],
  [
    "ansible-playbook -i inventory.ini rollback.yml -e stratum_from_version=1.2.0",
    "needs an inventory of nodes: ansible_test runs rollback.yml over three sandboxed nodes",
  ],
  [
    `python3 -c 'import socket; s = socket.socket(socket.AF_UNIX); s.connect("/run/stratum-a-machine/probe.sock"); s.shutdown(1); print(s.makefile().read())'`,
    "needs a running machine: confinement_test runs it on a sandboxed nspawn node",
  ],
  [
    "stratum migrate run    --to nspawn --bundle /srv/stratum-bundle [--wait-ready 2m] [--wait-lock 0s]",
    "drives systemd: migrate_cli_test runs it on a sandboxed node",
  ],
  // docs/bundles.md, "Rotating the signing key": a node's trust store and an upgrade.
  ...[
    "openssl genpkey -algorithm ed25519 -out signing-2.pem",
    "openssl pkey -in signing-2.pem -pubout -out release-2.pem",
    "install -m 0644 release-2.pem /etc/stratum/trust/release-2.pem",
    "stratum bundle make /srv/bundle-2 --version 2.0.0",
    "stratum bundle sign /srv/bundle-2 --key signing-2.pem",
    "stratum node upgrade --bundle /srv/bundle-2",
    "stratum migrate ack",
    "rm /etc/stratum/trust/release.pem",
    "stratum node status",
  ].map((l): [string, string] => [
    l,
    "the key rotation drives a node: key_rotation_test runs every line of it, as written, on a sandboxed node",
  ]),
]);

/**
 * A directory holding `stratum`, a shim that runs the program under test
 * (the artifact, or the checkout): put first on PATH, a documented line
 * runs the command as written. Made once, in the system's temporary
 * directory (never in the checkout), removed when this module ends.
 */
let shimDir: string | undefined;
async function shim(): Promise<string> {
  if (shimDir) return shimDir;
  const { stratumArgv, stratumEnv } = await import("./support/stratum_bin.ts");
  const dir = await Deno.makeTempDir({ prefix: "stratum-docs-shim-" });
  globalThis.addEventListener("unload", () => Deno.removeSync(dir, { recursive: true }));
  const env = Object.entries(stratumEnv()).map(([k, v]) => `export ${k}='${v}'\n`).join("");
  await Deno.writeTextFile(
    join(dir, "stratum"),
    `#!/bin/sh\n${env}exec ${stratumArgv([]).map((a) => `'${a}'`).join(" ")} "$@"\n`,
    { mode: 0o755 },
  );
  return shimDir = dir;
}

/** Runs a documented sh line in `cwd`, with the substitutions, through sh as a reader would. */
async function sh(line: string, cwd: string, subst: [string, string][], env = {}) {
  let l = line;
  for (const [from, to] of subst) l = l.replaceAll(from, to);
  const o = await new Deno.Command("sh", {
    args: ["-c", l],
    cwd,
    // The scratch --root runs need the test switch (lib/cli/guard.ts).
    env: {
      ...env,
      NO_COLOR: "1",
      STRATUM_TEST_ROOT_OK: "1",
      PATH: `${await shim()}:${Deno.env.get("PATH")}`,
    },
    stdin: "null",
  }).output();
  return {
    code: o.code,
    out: new TextDecoder().decode(o.stdout),
    err: new TextDecoder().decode(o.stderr),
    line: l,
  };
}

/** Drops `[...]` (an optional part) from a line: the form that runs as written. */
function required(line: string): string {
  return line.replace(/\s*\[[^\]]*\]/g, "");
}

Deno.test({
  name: "every line of the docs' sh blocks runs as written and does what the text says",
  ignore: lacking("openssl") !== undefined,
  async fn() {
    const all = await docs();
    const ran = new Set<string>();
    const scratch = await Deno.makeTempDir({ prefix: "stratum-docs-" });
    const root = join(scratch, "root");
    await Deno.mkdir(join(root, "etc/stratum/trust"), { recursive: true });
    // Stateless: a scratch root has none of the node data a state entry names.
    const bundleDir = await makeBundle(join(scratch, "bundle"), { stateless: true });
    const subst: [string, string][] = [
      ["/srv/stratum-bundle", bundleDir],
      ["/srv/bundle", bundleDir],
      ["/etc/stratum/trust", join(root, "etc/stratum/trust")],
    ];
    const run = async (line: string, expect = 0, form = line) => {
      const r = await sh(form, bundleDir, subst);
      assertEquals(r.code, expect, `${r.line}\n${r.out}${r.err}`);
      ran.add(line);
      return r;
    };
    const lines = shLines(all);
    const find = (doc: string, start: string) => {
      const l = lines.find((x) => x.doc === doc && x.line.startsWith(start));
      assert(l, `${doc} has no sh line starting ${start}`);
      return l.line;
    };
    try {
      // docs/bundles.md: keys, then make, sign and verify as a release pipeline would.
      await run(find("docs/bundles.md", "openssl genpkey"));
      await run(find("docs/bundles.md", "openssl pkey -in signing.pem"));
      await Deno.copyFile(
        join(bundleDir, "release.pem"),
        join(root, "etc/stratum/trust/release.pem"),
      );
      const make = find("docs/bundles.md", "stratum bundle make");
      await run(make);
      for (const mode of ["host", "nspawn"]) {
        const id = JSON.parse(await Deno.readTextFile(join(bundleDir, mode, "BUNDLE.json")));
        assertEquals(id, { mode, version: "1.2.0" }, `${make}: BUNDLE.json`);
      }
      const sign = find("docs/bundles.md", "stratum bundle sign");
      await run(sign);
      for (const mode of ["host", "nspawn"]) {
        assertEquals((await Deno.stat(join(bundleDir, mode, "SHA256SUMS.sig"))).size, 64, sign);
      }
      const verify = find("docs/bundles.md", "stratum bundle verify");
      await run(verify, 0, required(verify));
      // With every option, against the scratch node that trusts release.pem.
      const full = await run(
        verify,
        0,
        verify.replace("[--mode nspawn] [--root /] [--require-signature] [--json]", "").trim() +
          ` --mode nspawn --root ${root} --require-signature --json`,
      );
      const keyId = JSON.parse(full.out).modes[0].keyId;
      const fp = await run(find("docs/bundles.md", "openssl pkey -pubin"));
      assertEquals(
        fp.out.trim(),
        keyId,
        "the fingerprint recipe prints the key id stratum reports",
      );
      // The openssl recipe, in order, in the bundle directory: stratum accepts what it made.
      for (const start of ["printf", "(cd host && find", "openssl pkeyutl -sign"]) {
        await run(find("docs/bundles.md", start));
      }
      const check = await sh(
        `stratum bundle verify . --mode host --root ${root} --require-signature`,
        bundleDir,
        [],
      );
      assertEquals(check.code, 0, `stratum verifies the openssl-made bundle: ${check.err}`);
      const ov = await run(find("docs/bundles.md", "openssl pkeyutl -verify"));
      assert(ov.out.includes("Signature Verified Successfully"), ov.out);
      await run(find("docs/bundles.md", "(cd host && sha256sum -c"));

      // docs/migration.md: on a scratch node installed in host mode (slot a).
      const paths = hostPaths(root);
      await isolation.writeNodeConfig(paths.nodeConfig, { mode: "host", slot: "a", node: "n1" });
      await Deno.mkdir(paths.slotsDir, { recursive: true });
      await new Deno.Command("cp", { args: ["-a", join(bundleDir, "host"), paths.slot("a")] })
        .output();
      const onNode = (l: string) => `${l.replace(/\s+#.*$/, "")} --root ${root}`;
      const plan = find("docs/migration.md", "stratum migrate plan");
      const p = await run(plan, 0, onNode(plan));
      assert(p.out.includes("Nothing was changed"), p.out);
      assertEquals(
        await Deno.stat(paths.slot("b")).catch(() => undefined),
        undefined,
        "plan built nothing",
      );
      const status = find("docs/migration.md", "stratum migrate status");
      const st = await run(status, 0, onNode(status));
      assert(st.out.includes("host mode"), st.out);
      const resume = find("docs/migration.md", "stratum migrate resume");
      const rs = await run(resume, 0, onNode(resume));
      assert(/nothing/i.test(rs.out + rs.err), rs.out + rs.err);
      // ack removes a finished journal.
      const now = new Date().toISOString();
      await Deno.writeTextFile(
        paths.journal,
        JSON.stringify({
          version: 1,
          strategy: "in-place",
          from: "nspawn",
          to: "host",
          sourceSlot: "b",
          targetSlot: "a",
          step: "complete",
          startedAt: now,
          updatedAt: now,
        }),
      );
      const ack = find("docs/migration.md", "stratum migrate ack");
      await run(ack, 0, onNode(ack));
      assertEquals(
        await Deno.stat(paths.journal).catch(() => undefined),
        undefined,
        "ack removed it",
      );

      // docs/cloud-init.md: the schema check, from the repository.
      const schema = find("docs/cloud-init.md", "cloud-init schema");
      if (lacking("cloud-init") === undefined) {
        const r = await sh(schema, repo, []);
        assertEquals(r.code, 0, r.out + r.err);
        ran.add(schema);
      }

      // docs/snapshot-restore.md: the by-hand restarts, against a simulated cluster.
      if (!noKubectl) {
        await using c = await SimCluster.start({ workloads: stratumWorkloads(0) });
        for (const l of lines.filter((x) => x.doc === "docs/snapshot-restore.md")) {
          const r = await sh(l.line, scratch, [["kubectl ", `${defaultKubectl} `]], {
            ...c.cliEnv(),
            KUBECONFIG: c.kubeconfig,
            HOME: scratch,
          });
          assertEquals(r.code, 0, `${l.line}: ${r.err}`);
          ran.add(l.line);
        }
        assertEquals(c.server.patched().length, 5, "every by-hand restart reached the cluster");
      }
    } finally {
      await Deno.remove(scratch, { recursive: true });
    }
    const missed = lines.filter((l) => !ran.has(l.line) && !elsewhere.has(l.line)).map((l) =>
      `${l.doc}: ${l.line}`
    );
    assertEquals(missed, [], "sh lines neither run here nor listed in `elsewhere` with a reason");
  },
});
