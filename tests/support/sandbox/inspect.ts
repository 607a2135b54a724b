// deno-lint-ignore-file no-console
// Runs inside the systemd sandbox: prints the node's state as JSON — which
// slot targets are active, the health endpoint, the journal, node.json, the
// slots' units and directories, and a digest of every file stratum owns, so
// a test can check "exactly one stack runs" and "nothing changed".
import { createHash } from "node:crypto";
import { join } from "node:path";
import * as host from "../../../lib/host/mod.ts";
import * as isolation from "../../../lib/isolation/mod.ts";
import * as migrate from "../../../lib/migrate/mod.ts";
import { health } from "./_health.ts";

const paths = host.hostPaths("/");
const systemctl = new host.Systemctl({ timeout: 30_000 });

async function digest(dirs: string[]): Promise<Record<string, string>> {
  const out: Record<string, string> = {};
  const walk = async (d: string) => {
    let entries: Deno.DirEntry[];
    try {
      entries = [...Deno.readDirSync(d)];
    } catch {
      return;
    }
    for (const e of entries) {
      const p = join(d, e.name);
      if (e.isDirectory) await walk(p);
      else if (e.isSymlink) out[p] = `-> ${await Deno.readLink(p)}`;
      else out[p] = createHash("sha256").update(await Deno.readFile(p)).digest("hex").slice(0, 16);
    }
  };
  for (const d of dirs) await walk(d);
  return out;
}

const journal = await new migrate.JournalStore(paths.journal).load().then(
  (j) => JSON.parse(migrate.encodeJournal(j)),
  (e) => (migrate.is(e, migrate.ErrNoJournal) ? null : { unreadable: String(e) }),
);
console.log(JSON.stringify({
  active: {
    a: await systemctl.isActive(isolation.targetUnit("a")),
    b: await systemctl.isActive(isolation.targetUnit("b")),
  },
  health: await health(),
  journal,
  node: await isolation.readNodeConfig(paths.nodeConfig).catch(() => "unreadable"),
  units: { a: await isolation.unitsOf(paths, "a"), b: await isolation.unitsOf(paths, "b") },
  slots: {
    a: await Deno.stat(paths.slot("a")).then(() => true, () => false),
    b: await Deno.stat(paths.slot("b")).then(() => true, () => false),
  },
  files: await digest([
    "/etc/systemd/system",
    "/etc/stratum",
    "/var/lib/stratum",
    "/etc/sysctl.d",
    "/etc/modules-load.d",
    "/etc/apt/preferences.d",
  ]),
}));
