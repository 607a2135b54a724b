// deno-lint-ignore-file no-console
// The host and nspawn backends against a real systemd, inside the sandbox.
import { join } from "node:path";
import { assert, assertEquals } from "./support/assert.ts";
import { type Behavior, makeBundle } from "./support/bundle.ts";
import { nspawnUnavailable, repoRoot, Sandbox, sandboxUnavailable } from "./support/sandbox.ts";

if (sandboxUnavailable) console.error(`systemd sandbox tests are skipped: ${sandboxUnavailable}`);
if (nspawnUnavailable) console.error(`nspawn tests are skipped: ${nspawnUnavailable}`);

const driver = "tests/support/sandbox/drive_backend.ts";

/** A bundle inside the checkout, which the sandbox sees (its /tmp is private). */
async function bundle(behavior?: Partial<Record<"host" | "nspawn", Behavior>>): Promise<string> {
  await Deno.mkdir(join(repoRoot, ".test-tmp"), { recursive: true });
  const dir = await Deno.makeTempDir({ dir: join(repoRoot, ".test-tmp"), prefix: "bundle-" });
  return await makeBundle(dir, behavior ? { behavior } : {});
}

async function drive(sb: Sandbox, args: string[]): Promise<Record<string, any>> {
  const r = await sb.deno(["run", "-A", driver, ...args]);
  assertEquals(r.code, 0, r.stderr);
  const doc = JSON.parse(r.stdout);
  assert(!doc.unexpected, JSON.stringify(doc.unexpected));
  return doc;
}

for (const mode of ["host", "nspawn"] as const) {
  const ignore = mode === "nspawn"
    ? nspawnUnavailable !== undefined
    : sandboxUnavailable !== undefined;

  Deno.test({
    name: `${mode} backend: prepare, start, healthy, stop, destroy; every call idempotent`,
    ignore,
    async fn() {
      await using sb = await Sandbox.start();
      const o = await drive(sb, ["lifecycle", mode, await bundle()]);
      assertEquals(o.prepared.active, false, "prepare never starts anything");
      assertEquals(o.prepared.health, "refused");
      assert(o.prepared.units.includes("stratum-a.target"), JSON.stringify(o.prepared.units));
      assertEquals(o.preparedTwice.units, o.prepared.units);
      assertEquals(o.started.active, true);
      assertEquals(o.started.health, `200 ok ${mode} node-1`);
      assertEquals(o.startedTwice.health, `200 ok ${mode} node-1`);
      assertEquals([o.stopped.active, o.stopped.health], [false, "refused"]);
      assertEquals([o.stoppedTwice.active, o.stoppedTwice.health], [false, "refused"]);
      assertEquals(o.restarted.health, `200 ok ${mode} node-1`);
      assertEquals([o.destroyed.units, o.destroyed.slotExists, o.destroyed.health], [
        [],
        false,
        "refused",
      ]);
      assertEquals([o.destroyedTwice.units, o.destroyedTwice.slotExists], [[], false]);
      assert(
        String(o.hostFile).includes(`stratum ${mode} mode`),
        "prepare writes the stack's host files",
      );
    },
  });

  Deno.test({
    name: `${mode} backend: a stack that cannot start is a typed error with systemd's message`,
    ignore,
    async fn() {
      await using sb = await Sandbox.start();
      const o = await drive(sb, ["fail-start", mode, await bundle({ [mode]: "fail-start" })]);
      assertEquals(o.error?.name, "UnitError", JSON.stringify(o));
      assert(o.error.message.includes("stratum-a.target"), o.error.message);
      assertEquals([o.after.active, o.after.health], [false, "refused"]);
      assertEquals([o.destroyed.units, o.destroyed.slotExists], [[], false]);
    },
  });
}
