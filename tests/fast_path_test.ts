// The fast path (lib/cli/fast.ts) runs `--version`, `migrate status` and
// `node status` without commander. Invariants: it takes only plain command
// lines (the command, at most one --json and one --root DIR) and leaves
// everything else to the full program; and for every command line it takes,
// it prints the same output and exits with the same code as the full
// program does (reached here by a trailing `--`, which the fast path leaves
// alone and commander reads as the end of options).

import { join } from "node:path";
import { fastCommand } from "../lib/cli/fast.ts";
import * as migrate from "../lib/migrate/mod.ts";
import { assert, assertEquals } from "./support/assert.ts";
import { stratum } from "./support/cli.ts";
import { sampleJournal } from "./support/journal_sample.ts";

Deno.test("the fast path takes plain status and --version command lines, and nothing else", () => {
  const takes = [
    ["--version"],
    ["migrate", "status"],
    ["node", "status"],
    ["migrate", "status", "--json"],
    ["node", "status", "--root", "/srv/n1", "--json"],
    ["migrate", "status", "--json", "--root=/srv/n1"],
  ];
  for (const argv of takes) assert(fastCommand(argv), `takes ${argv.join(" ")}`);
  const leaves = [
    [],
    ["--version", "x"],
    ["-V"],
    ["--help"],
    ["migrate", "status", "--help"],
    ["migrate", "status", "-h"],
    ["migrate", "status", "--json", "--json"],
    ["migrate", "status", "--root", "/a", "--root", "/b"],
    ["migrate", "status", "--root"],
    ["migrate", "status", "--root", "--json"],
    ["migrate", "status", "--root="],
    ["migrate", "status", "--"],
    ["migrate", "status", "extra"],
    ["migrate", "status", "--jsn"],
    ["migrate", "plan", "--to", "host"],
    ["rollout", "status"],
    ["node", "install"],
    ["status"],
  ];
  for (const argv of leaves) {
    assertEquals(fastCommand(argv), undefined, `leaves ${JSON.stringify(argv)}`);
  }
});

/** A scratch --root in the state `setup` leaves it. */
async function root(setup: (dir: string) => Promise<void>): Promise<string> {
  const dir = await Deno.makeTempDir({ prefix: "stratum-fast-" });
  await Deno.mkdir(join(dir, "etc/stratum"), { recursive: true });
  await Deno.mkdir(join(dir, "var/lib/stratum"), { recursive: true });
  await setup(dir);
  return dir;
}

const nodeJson = (dir: string) =>
  Deno.writeTextFile(
    join(dir, "etc/stratum/node.json"),
    JSON.stringify({ mode: "host", slot: "a", node: "n1", updatedAt: "2026-11-30T10:00:00Z" }),
  );
const journal = (dir: string, step: migrate.Step) =>
  Deno.writeTextFile(
    join(dir, "var/lib/stratum/migration.json"),
    migrate.encodeJournal(sampleJournal(step)),
  );

Deno.test("every command line the fast path takes prints and exits as the full program does", async () => {
  const roots: [string, string][] = [
    ["an empty node", await root(async () => {})],
    ["an installed node", await root(nodeJson)],
    [
      "a migration under way",
      await root(async (d) => {
        await nodeJson(d);
        await journal(d, migrate.StepPersisting);
      }),
    ],
    [
      "a migration that completed",
      await root(async (d) => {
        await nodeJson(d);
        await journal(d, migrate.StepComplete);
      }),
    ],
    [
      "a torn journal",
      await root(async (d) => {
        await nodeJson(d);
        await Deno.writeTextFile(join(d, "var/lib/stratum/migration.json"), '{"version":');
      }),
    ],
    [
      "an unreadable node.json",
      await root(async (d) => {
        await Deno.writeTextFile(join(d, "etc/stratum/node.json"), "{not json");
      }),
    ],
    ["no such --root", "/nonexistent/stratum-root"],
  ];
  const seen = new Set<number>();
  for (const [what, dir] of roots) {
    for (const group of ["migrate", "node"]) {
      for (const flags of [["--root", dir], ["--root", dir, "--json"], [`--root=${dir}`]]) {
        const argv = [group, "status", ...flags];
        assert(fastCommand(argv), `the fast path takes ${argv.join(" ")}`);
        const [fast, full] = await Promise.all([stratum(argv), stratum([...argv, "--"])]);
        const at = `${what}: ${argv.join(" ")}`;
        assertEquals(fast.code, full.code, `${at}: exit code`);
        assertEquals(fast.stdout, full.stdout, `${at}: stdout`);
        assertEquals(fast.stderr, full.stderr, `${at}: stderr`);
        seen.add(fast.code);
      }
    }
  }
  // The roots reach every exit code a status command has: ok, not
  // installed or unhealthy, bad input, needs attention.
  assertEquals([...seen].sort(), [0, 1, 2, 3]);
  for (const [, dir] of roots) await Deno.remove(dir, { recursive: true }).catch(() => {});
  const v = await Promise.all([stratum(["--version"]), stratum(["--version", "--"])]);
  assertEquals([v[0].code, v[0].stdout], [0, v[1].stdout]);
  assert(/^stratum \d+\.\d+\.\d+ \(/.test(v[0].stdout), v[0].stdout);
});
