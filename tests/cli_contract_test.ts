// The command line's contract (docs/cli.md) where an operator hit a command
// that said one thing and did another: each case from the operator's day
// (a refused command that had changed something, a journal that could not be
// read reported as none, kubectl's own names for kinds). Through the real
// CLI (tests/support/cli.ts) on scratch --root trees.
import { join } from "node:path";
import { assert, assertEquals } from "./support/assert.ts";
import { makeBundle } from "./support/bundle.ts";
import { stratum } from "./support/cli.ts";

async function scratchRoot(): Promise<string> {
  const root = await Deno.makeTempDir({ prefix: "stratum-contract-" });
  await Deno.mkdir(join(root, "etc/stratum"), { recursive: true });
  await Deno.mkdir(join(root, "var/lib/stratum"), { recursive: true });
  return root;
}

Deno.test("rollout owned takes kubectl's names for the two kinds and refuses another kind with exit 2", async () => {
  for (const kind of ["Deployment", "deploy", "deployments", "deployment.apps"]) {
    const r = await stratum(["rollout", "owned", kind, "coredns", "-n", "kube-system", "--json"]);
    assertEquals([r.code, JSON.parse(r.stdout).owned], [0, true], `${kind}: ${r.stderr}`);
  }
  for (const kind of ["DaemonSet", "ds", "daemonsets"]) {
    const r = await stratum(["rollout", "owned", kind, "cilium", "-n", "kube-system"]);
    assertEquals(r.code, 0, `${kind}: ${r.stderr}`);
  }
  // Owned is about the kind and the name: a DaemonSet named like a Deployment is not.
  assertEquals((await stratum(["rollout", "owned", "ds", "coredns", "-n", "kube-system"])).code, 1);
  const bad = await stratum(["rollout", "owned", "Pod", "coredns", "-n", "kube-system"]);
  assertEquals(bad.code, 2, bad.stderr);
  assertEquals(bad.stderr.trim().split("\n").length, 1, bad.stderr);
  assert(bad.stderr.includes("unknown kind"), bad.stderr);
});

Deno.test("node status reports a journal it cannot read and exits 3, installed or not", async () => {
  for (const content of ["garbage\n", "", '{"version": 99}\n']) {
    const root = await scratchRoot();
    await Deno.writeTextFile(join(root, "var/lib/stratum/migration.json"), content);
    const r = await stratum(["node", "status", "--root", root, "--json"]);
    assertEquals(r.code, 3, `${JSON.stringify(content)}: ${r.stdout}${r.stderr}`);
    const doc = JSON.parse(r.stdout);
    assert(typeof doc.journalError === "string", r.stdout);
    await Deno.remove(root, { recursive: true });
  }
  const root = await scratchRoot();
  await Deno.mkdir(join(root, "var/lib/stratum/migration.json"));
  const dir = await stratum(["node", "status", "--root", root]);
  assertEquals(dir.code, 3, dir.stdout + dir.stderr);
  assert(dir.stdout.includes("journal cannot be read"), dir.stdout);
  await Deno.remove(root, { recursive: true });
});

Deno.test("a refused bundle make changes nothing: BUNDLE.json, SHA256SUMS and the signature stay", async () => {
  const dir = await makeBundle(await Deno.makeTempDir({ prefix: "stratum-make-" }));
  assertEquals((await stratum(["bundle", "make", dir, "--version", "1.0.0"])).code, 0);
  await Deno.writeFile(join(dir, "host/SHA256SUMS.sig"), new Uint8Array(64));
  const files = [
    "host/BUNDLE.json",
    "host/SHA256SUMS",
    "host/SHA256SUMS.sig",
    "nspawn/BUNDLE.json",
  ];
  const read = () => Promise.all(files.map((f) => Deno.readFile(join(dir, f))));
  const before = await read();
  await Deno.symlink("/etc/passwd", join(dir, "nspawn/link"));
  const r = await stratum(["bundle", "make", dir, "--version", "2.0.0"]);
  assertEquals(r.code, 2, r.stderr);
  assert(r.stderr.includes("symlink"), r.stderr);
  assertEquals(await read(), before, "the refused make rewrote the bundle");
  await Deno.remove(dir, { recursive: true });
});

Deno.test("every command's --help ends with an example, and help A B is A B --help", async () => {
  const { commandTree, pathOf } = await import("../lib/cli/program.ts");
  const groups = await import("./support/command_groups.ts");
  const leaves: string[] = [];
  const walk = (c: import("commander").Command) => {
    if (c.commands.length === 0) leaves.push(pathOf(c));
    c.commands.forEach(walk);
  };
  walk(commandTree(groups.allGroups()));
  assert(leaves.length >= 18, leaves.join(", "));
  const missing: string[] = [];
  for (const path of leaves) {
    const r = await stratum([...path.split(" "), "--help"]);
    if (r.code !== 0 || !/\nExamples?( \([^)]*\))?:\n {2}\S/.test(r.stdout)) missing.push(path);
  }
  assertEquals(missing, [], "commands whose --help has no example");
  const a = await stratum(["help", "migrate", "run"]);
  const b = await stratum(["migrate", "run", "--help"]);
  assertEquals([a.code, a.stdout], [0, b.stdout]);
});

/** A scratch --root installed in host mode (slot a from `bundle`'s host directory). */
async function installedRoot(bundleDir: string): Promise<string> {
  const { hostPaths } = await import("../lib/host/mod.ts");
  const isolation = await import("../lib/isolation/mod.ts");
  const root = await scratchRoot();
  const paths = hostPaths(root);
  await isolation.writeNodeConfig(paths.nodeConfig, { mode: "host", slot: "a", node: "n1" });
  await Deno.mkdir(paths.slotsDir, { recursive: true });
  await new Deno.Command("cp", { args: ["-a", join(bundleDir, "host"), paths.slot("a")] }).output();
  return root;
}

Deno.test("migrate plan --strategy reprovision prints the reprovision's steps; --wipe-state needs it", async () => {
  const dir = await makeBundle(await Deno.makeTempDir({ prefix: "stratum-plan-" }), {
    stateless: true,
  });
  const root = await installedRoot(dir);
  const args = ["migrate", "plan", "--to", "nspawn", "--bundle", dir, "--root", root, "--json"];
  const inPlace = await stratum(args);
  assertEquals(inPlace.code, 0, inPlace.stderr);
  const a = JSON.parse(inPlace.stdout);
  assertEquals([a.strategy, a.steps.map((s: { step: string }) => s.step).includes("preparing")], [
    "in-place",
    true,
  ]);
  const r = await stratum([...args, "--strategy", "reprovision"]);
  assertEquals(r.code, 0, r.stderr);
  const doc = JSON.parse(r.stdout);
  assertEquals(doc.strategy, "reprovision");
  assertEquals(doc.steps.map((s: { step: string }) => s.step), [
    "(preflight)",
    "(download)",
    "reprovisioning",
    "bootstrapping",
    "bootstrapped",
  ]);
  const text = await stratum([...args.slice(0, -1), "--strategy", "reprovision", "--wipe-state"]);
  assertEquals(text.code, 0, text.stderr);
  assert(text.stdout.startsWith("Reprovision of this node"), text.stdout);
  assert(text.stdout.includes("empty the state directories"), text.stdout);
  const bad = await stratum([...args, "--wipe-state"]);
  assertEquals(bad.code, 2, bad.stderr);
  assert(bad.stderr.includes("--strategy reprovision"), bad.stderr);
  assertEquals(
    await Deno.stat(join(root, "var/lib/stratum/slots/b")).catch(() => undefined),
    undefined,
  );
  assertEquals(
    await Deno.stat(join(root, "var/lib/stratum/migration.json")).catch(() => undefined),
    undefined,
    "a plan writes no journal",
  );
});

Deno.test("every --json document says its outcome and the operator's next action (docs/cli.md)", async () => {
  const dir = await makeBundle(await Deno.makeTempDir({ prefix: "stratum-json-" }), {
    stateless: true,
  });
  const root = await scratchRoot();
  const installed = await installedRoot(dir);
  const key = join(dir, "k.pem");
  await new Deno.Command("openssl", { args: ["genpkey", "-algorithm", "ed25519", "-out", key] })
    .output();
  const cases: string[][] = [
    ["rollout", "list"],
    ["rollout", "owned", "deploy", "coredns", "-n", "kube-system"],
    ["rollout", "owned", "deploy", "metrics-server", "-n", "kube-system"],
    ["rollout", "commands"],
    ["bundle", "make", dir],
    ["bundle", "sign", dir, "--key", key],
    ["bundle", "verify", dir],
    ["bundle", "verify", "/nonexistent"],
    ["migrate", "plan", "--to", "nspawn", "--root", root],
    ["migrate", "plan", "--to", "nspawn", "--bundle", dir, "--root", installed],
    ["migrate", "status", "--root", root],
    ["migrate", "resume", "--root", root],
    ["migrate", "ack", "--root", root],
    ["migrate", "run", "--to", "vm", "--root", root],
    ["node", "status", "--root", root],
    ["node", "history", "--root", root],
    ["node", "install", "--mode", "host", "--bundle", "/nonexistent", "--root", root],
    ["node", "upgrade", "--bundle", dir, "--root", root],
    ["node", "rollback", "--root", root],
    ["node", "repair", "--bundle", dir, "--root", root],
  ];
  const lacking: string[] = [];
  for (const args of cases) {
    const r = await stratum([...args, "--json"]);
    let doc: Record<string, unknown> | undefined;
    try {
      doc = JSON.parse(r.stdout);
    } catch { /* reported below */ }
    if (typeof doc?.outcome !== "string" || typeof doc?.nextAction !== "string") {
      lacking.push(`${args.join(" ")} (exit ${r.code}): ${r.stdout.slice(0, 120)}`);
    }
    // One vocabulary: a bundle is `bundle.digest` (or a mode's `digest`), never these.
    for (const old of ["bundleDigest", "manifestDigest", "bundleFiles", "bundleBytes"]) {
      if (r.stdout.includes(`"${old}"`)) lacking.push(`${args.join(" ")}: says ${old}`);
    }
  }
  assertEquals(lacking, []);
});
