// deno-lint-ignore-file no-console
// `deno task demo`: the tool's two jobs on an embedded default, against the
// local sandboxes. A real systemd boots in private namespaces, a node is
// installed in host mode from a built-in, signed bundle (`stratum node install`), and `stratum migrate`
// moves it to nspawn mode, its data (a counter in its declared state
// directory) kept; then `stratum rollout restart` runs through the
// machine's kubectl against a simulated cluster where one rollout stalls.
// Needs root and namespaces (the systemd sandbox) and kubectl.
import { join } from "node:path";
import { makeBundle, stackState } from "../tests/support/bundle.ts";
import { makeSigningKey } from "../tests/support/tls.ts";
import {
  defaultKubectl,
  noKubectl,
  SimCluster,
  stratumWorkloads,
} from "../tests/support/cluster.ts";
import { repoRoot, Sandbox, whyNspawnUnavailable } from "../tests/support/sandbox.ts";
import { setupOrExit } from "./setup.ts";

const bold = (s: string) => (Deno.stdout.isTerminal() ? `\x1b[1m${s}\x1b[0m` : s);
const say = (s: string) => console.log(`\n${bold(`== ${s}`)}`);

async function shown(
  label: string,
  run: () => Promise<{ code: number; stdout: string; stderr: string }>,
) {
  console.log(bold(`$ ${label}`));
  const r = await run();
  const err = r.stderr.trim();
  if (err) console.log(err.split("\n").map((l) => `  (stderr) ${l}`).join("\n"));
  if (r.stdout.trim()) console.log(r.stdout.trimEnd());
  console.log(`  -> exit ${r.code}`);
  return r;
}

// What the demo drives is installed first (as root, with apt), or named.
await setupOrExit("demo");
// Checked now, with the packages there.
const unavailable = await whyNspawnUnavailable();
if (unavailable) {
  console.error(`demo: the migration part needs the systemd sandbox: ${unavailable}`);
  Deno.exit(1);
}

let migrateExit = -1;
let rolloutExit = -1;
say("1. migrate: a node moves from host mode to nspawn mode on a real systemd");
await Deno.mkdir(join(repoRoot, ".test-tmp"), { recursive: true });
// Everything the demo makes lives in one directory, removed at the end.
const work = await Deno.makeTempDir({ dir: join(repoRoot, ".test-tmp"), prefix: "demo-" });
const bundle = await makeBundle(await Deno.makeTempDir({ dir: work, prefix: "bundle-" }));
const { key, pub } = await makeSigningKey(work, "demo");
console.log(`booting systemd in private namespaces; built-in bundle at ${bundle}`);
try {
  await using sb = await Sandbox.start();
  const stratum = (...args: string[]) => sb.deno(["run", "-A", "main.ts", ...args]);
  await shown(`stratum bundle make ${bundle}`, () => stratum("bundle", "make", bundle));
  await shown(
    `stratum bundle sign ${bundle} --key ${key}`,
    () => stratum("bundle", "sign", bundle, "--key", key),
  );
  const trusted = await sb.exec([
    "sh",
    "-c",
    `mkdir -p /etc/stratum/trust && cp ${pub} /etc/stratum/trust/demo.pem`,
  ]);
  if (trusted.code !== 0) throw new Error(trusted.stderr);
  console.log("the node trusts the demo key: /etc/stratum/trust/demo.pem");
  await shown(
    `stratum bundle verify ${bundle} --mode nspawn`,
    () => stratum("bundle", "verify", bundle, "--mode", "nspawn"),
  );
  const installed = await shown(
    `stratum node install --mode host --bundle ${bundle} --node node-1`,
    () => stratum("node", "install", "--mode", "host", "--bundle", bundle, "--node", "node-1"),
  );
  if (installed.code !== 0) throw new Error("node install failed");
  await shown("stratum node status", () => stratum("node", "status"));
  // The node's data: the stack counts its starts in its declared state
  // directory, which stays where it is in both modes.
  const data = () =>
    shown(
      `cat ${stackState}/starts-node   # the node's data (stack.json "state")`,
      () => sb.exec(["cat", `${stackState}/starts-node`]),
    );
  await data();
  await shown("stratum migrate status", () => stratum("migrate", "status"));
  await shown(
    `stratum migrate plan --to nspawn --bundle ${bundle}`,
    () => stratum("migrate", "plan", "--to", "nspawn", "--bundle", bundle),
  );
  migrateExit = (await shown(
    `stratum migrate run --to nspawn --bundle ${bundle}`,
    () => stratum("migrate", "run", "--to", "nspawn", "--bundle", bundle),
  )).code;
  await shown("systemctl is-active stratum-a.target stratum-b.target (one at a time)", async () => {
    const a = await sb.exec(["systemctl", "is-active", "stratum-a.target"]);
    const b = await sb.exec(["systemctl", "is-active", "stratum-b.target"]);
    return {
      code: 0,
      stdout: `stratum-a.target: ${a.stdout.trim()}\nstratum-b.target: ${b.stdout.trim()}`,
      stderr: "",
    };
  });
  const after = await data();
  console.log(
    after.stdout.trim() === "2"
      ? "the node's data survived the migration: the nspawn stack read the host stack's count and added its own start"
      : "the node's data did NOT survive the migration",
  );
  await shown("stratum migrate status", () => stratum("migrate", "status"));
  await shown("stratum migrate ack", () => stratum("migrate", "ack"));
} finally {
  await Deno.remove(work, { recursive: true }).catch(() => {});
}

say("2. rollout: restart Stratum's workloads after a restore, one rollout stalls");
if (noKubectl) {
  console.log(`skipped: ${noKubectl}`);
} else {
  await using c = await SimCluster.start({ workloads: stratumWorkloads(800) });
  c.server.setRollout("Deployment", "kube-system", "coredns", "never");
  console.log(`simulated API server at ${c.server.url}; coredns's rollout never finishes`);
  const main = join(repoRoot, "main.ts");
  const cli = (...args: string[]) =>
    new Deno.Command(Deno.execPath(), {
      args: ["run", "-A", main, ...args],
      env: { ...c.cliEnv(), NO_COLOR: "1" },
      stdin: "null",
    }).output().then((o) => ({
      code: o.code,
      stdout: new TextDecoder().decode(o.stdout),
      stderr: new TextDecoder().decode(o.stderr),
    }));
  await shown("stratum rollout list", () => cli("rollout", "list"));
  rolloutExit = (await shown(
    `stratum rollout restart --kubeconfig ${c.kubeconfig} --wait 5s`,
    () =>
      cli(
        "rollout",
        "restart",
        "--kubeconfig",
        c.kubeconfig,
        "--kubectl",
        defaultKubectl,
        "--wait",
        "5s",
      ),
  )).code;
}
say(
  `done: stratum migrate run exited ${migrateExit}, stratum rollout restart exited ${rolloutExit}`,
);
Deno.exit(migrateExit === 0 && rolloutExit <= 0 ? 0 : 1);
