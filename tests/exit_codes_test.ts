// docs/cli.md's exit-code table, per command: the same condition gets the
// same exit code and outcome from every command that meets it. The
// expectations are the table's rows (2 bad input or refused before anything
// changed, "a journal in the way" among them; 3 the journal or node.json
// unreadable; 75 the lock held), not a recording of what the commands do.
// Through the real CLI on scratch --root trees, with nothing changed after a
// refusal (every file under the root compared before and after).
import { join } from "node:path";
import { treeState } from "./support/tree_state.ts";
import { assert, assertEquals } from "./support/assert.ts";
import { makeBundle } from "./support/bundle.ts";
import { stratum } from "./support/cli.ts";
import { sampleJournal } from "./support/journal_sample.ts";
import * as migrate from "../lib/migrate/mod.ts";
import { lacking } from "../scripts/packages.ts";

const bundleDir = await makeBundle(await Deno.makeTempDir({ prefix: "stratum-exit-bundle-" }));

/** Every command that meets the conditions below, with what it needs to get that far. */
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
  "node boot": ["node", "boot"],
};

const nodeJson = JSON.stringify({ mode: "host", slot: "a", node: "n1" });

/** A condition of the table: how to make it, and which commands must answer it how. */
interface Row {
  readonly what: string;
  readonly make: (root: string) => Promise<void>;
  readonly code: number;
  readonly outcome: string;
  readonly commands: readonly string[];
}

const rows: Row[] = [
  {
    what: "node.json cannot be read (not JSON)",
    make: (r) => Deno.writeTextFile(join(r, "etc/stratum/node.json"), "{not json"),
    code: 3,
    outcome: "node-config-unreadable",
    // Every command that must know what the node runs; resume, ack and
    // history with no journal need not.
    commands: [
      "migrate plan",
      "migrate run",
      "migrate status",
      "node install",
      "node upgrade",
      "node rollback",
      "node repair",
      "node boot",
    ],
  },
  {
    what: "the journal cannot be read (torn)",
    make: async (r) => {
      await Deno.writeTextFile(join(r, "etc/stratum/node.json"), nodeJson);
      await Deno.writeTextFile(join(r, "var/lib/stratum/migration.json"), '{"version":');
    },
    code: 3,
    outcome: "journal-unreadable",
    commands: [
      "migrate plan",
      "migrate run",
      "migrate resume",
      "migrate status",
      "migrate ack",
      "node install",
      "node upgrade",
      "node rollback",
      "node repair",
      "node boot",
    ],
  },
  {
    what: "a journal in the way (a migration under way)",
    make: async (r) => {
      await Deno.writeTextFile(join(r, "etc/stratum/node.json"), nodeJson);
      await new migrate.JournalStore(join(r, "var/lib/stratum/migration.json"))
        .save(sampleJournal(migrate.StepPersisting));
    },
    code: 2,
    outcome: "bad-input",
    commands: ["migrate run", "node install", "node upgrade", "node rollback", "node repair"],
  },
];

async function scratch(): Promise<string> {
  const root = await Deno.makeTempDir({ prefix: "stratum-exit-" });
  await Deno.mkdir(join(root, "etc/stratum"), { recursive: true });
  await Deno.mkdir(join(root, "var/lib/stratum"), { recursive: true });
  return root;
}

for (const row of rows) {
  Deno.test(`${row.what}: exit ${row.code}, outcome ${row.outcome}, nothing changed`, async (t) => {
    for (const name of row.commands) {
      await t.step(name, async () => {
        const root = await scratch();
        try {
          await row.make(root);
          const before = await treeState(root);
          const r = await stratum([...commands[name]!, "--root", root, "--json"]);
          assertEquals(r.code, row.code, `${name}: ${r.stdout}${r.stderr}`);
          const doc = JSON.parse(r.stdout);
          // node status reports the node's whole state, and says it needs attention.
          const outcome = name === "node status" ? "needs-attention" : row.outcome;
          assertEquals(doc.outcome, outcome, r.stdout);
          assert(typeof doc.nextAction === "string" && doc.nextAction !== "", r.stdout);
          assertEquals(await treeState(root), before, `${name} changed the root`);
        } finally {
          await Deno.remove(root, { recursive: true });
        }
      });
    }
  });
}

// The first error commander finds is said: a required option missing comes before the unknown flag.
Deno.test("an unknown flag on every command: exit 2, one line, nothing changed", async (t) => {
  const groups = await import("./support/command_groups.ts");
  const { commandTree, pathOf } = await import("../lib/cli/program.ts");
  const leaves: string[] = [];
  const walk = (c: ReturnType<typeof commandTree>) => {
    if (c.commands.length === 0 && c.parent) leaves.push(pathOf(c));
    for (const s of c.commands) walk(s);
  };
  walk(commandTree(groups.allGroups()));
  assert(leaves.length > 15, leaves.join(", "));
  for (const leaf of leaves) {
    await t.step(leaf, async () => {
      const root = await scratch();
      try {
        await Deno.writeTextFile(join(root, "etc/stratum/node.json"), nodeJson);
        const before = await treeState(root);
        const r = await stratum([...leaf.split(" "), "--no-such-flag", "--root", root]);
        assertEquals(r.code, 2, `${leaf}: ${r.stdout}${r.stderr}`);
        assertEquals(r.stderr.trim().split("\n").length, 1, r.stderr);
        assertEquals(await treeState(root), before, `${leaf} changed the root`);
      } finally {
        await Deno.remove(root, { recursive: true });
      }
    });
  }
});

const flockMissing = lacking("util-linux");

Deno.test({
  name: "the lock held by another process: exit 75, outcome busy, naming no change",
  ignore: flockMissing !== undefined,
  async fn(t) {
    for (
      const name of [
        "migrate run",
        "migrate resume",
        "migrate ack",
        "node install",
        "node upgrade",
        "node rollback",
        "node repair",
        "node boot",
      ]
    ) {
      await t.step(name, async () => {
        const root = await scratch();
        const lock = join(root, "run/stratum/migrate.lock");
        await Deno.mkdir(join(root, "run/stratum"), { recursive: true, mode: 0o700 });
        await Deno.chmod(join(root, "run/stratum"), 0o700);
        await Deno.writeTextFile(join(root, "etc/stratum/node.json"), nodeJson);
        await new migrate.JournalStore(join(root, "var/lib/stratum/migration.json"))
          .save(sampleJournal(migrate.StepComplete));
        await Deno.writeTextFile(lock, "");
        // flock(1) holds the lock until its child ends: the child prints once it holds it.
        const holder = new Deno.Command("flock", {
          args: ["-x", lock, "sh", "-c", "echo held; exec sleep 120"],
          stdout: "piped",
        }).spawn();
        const reader = holder.stdout.getReader();
        try {
          const first = await reader.read();
          assertEquals(new TextDecoder().decode(first.value).trim(), "held");
          const before = await treeState(root);
          // node boot waits 10 min for the lock by default (a migration may be running).
          const wait = name === "node boot" ? ["--wait-lock", "0"] : [];
          const r = await stratum([...commands[name]!, ...wait, "--root", root, "--json"]);
          assertEquals(r.code, 75, `${name}: ${r.stdout}${r.stderr}`);
          assertEquals(JSON.parse(r.stdout).outcome, "busy", r.stdout);
          assertEquals(
            await treeState(root),
            before,
            `${name} changed the root`,
          );
        } finally {
          reader.releaseLock();
          holder.kill("SIGKILL");
          await holder.stdout.cancel().catch(() => {});
          await holder.status;
          await Deno.remove(root, { recursive: true });
        }
      });
    }
  },
});
