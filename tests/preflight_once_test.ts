// deno-lint-ignore-file no-console
// Issue 38, item 7 (a piece): `migrate run`, `node upgrade` and `node
// rollback` printed each preflight line twice (preflight runs before the
// boot unit and the journal, and again as the migration's first step; both
// printed). Through the artifact in the systemd sandbox: each preflight line
// is on stderr exactly once.

import { assert, assertEquals } from "./support/assert.ts";
import { makeBundle } from "./support/bundle.ts";
import { nspawnUnavailable } from "./support/sandbox.ts";
import { Node } from "./support/sandbox_node.ts";
import { scratchDir } from "./support/scratch.ts";

if (nspawnUnavailable) console.error(`preflight tests are skipped: ${nspawnUnavailable}`);

/** The preflight lines of a run's stderr (and the warnings preflight gives), each once. */
function assertOnce(label: string, stderr: string) {
  const lines = stderr.split("\n").filter((l) => /^(preflight|warning): /.test(l));
  assert(
    lines.some((l) => l.startsWith("preflight: state ")),
    `${label}: no preflight line at all:\n${stderr}`,
  );
  const twice = lines.filter((l, i) => lines.indexOf(l) !== i);
  assertEquals(twice, [], `${label}: printed more than once:\n${stderr}`);
}

Deno.test({
  name: "migrate run, node upgrade and node rollback print each preflight line once",
  ignore: nspawnUnavailable !== undefined,
  async fn() {
    await using n = await Node.boot("host");
    const run = await n.stratum(["migrate", "run", "--to", "nspawn", "--bundle", n.bundle]);
    assertEquals(run.code, 0, run.stderr);
    assertOnce("migrate run", run.stderr);
    assertEquals((await n.stratum(["migrate", "ack"])).code, 0);
    const v2 = await makeBundle(await scratchDir("bundle-v2-"), { release: "2" });
    const up = await n.stratum(["node", "upgrade", "--bundle", v2]);
    assertEquals(up.code, 0, up.stderr);
    assertOnce("node upgrade", up.stderr);
    assertEquals((await n.stratum(["migrate", "ack"])).code, 0);
    const back = await n.stratum(["node", "rollback"]);
    assertEquals(back.code, 0, back.stderr);
    assertOnce("node rollback", back.stderr);
  },
});
