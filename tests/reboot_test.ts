// deno-lint-ignore-file no-console
// Power cuts and the boot that follows, on real systemd: the sandbox keeps
// /etc and /var on disk, a power cut is SIGKILL of its systemd (every
// process dies at once, nothing stops cleanly), and the next boot goes to
// multi-user.target as a node does, with no human command. Invariant after
// that boot: exactly one stack is active and healthy, it is the one
// node.json names, the journal is terminal (rolled-back before the target
// was recorded running, complete from then on), and stratum-boot.service
// did not fail.

import { assert, assertEquals } from "./support/assert.ts";
import { nspawnUnavailable } from "./support/sandbox.ts";
import { Node } from "./support/sandbox_node.ts";

if (nspawnUnavailable) console.error(`reboot tests are skipped: ${nspawnUnavailable}`);
const ignore = nspawnUnavailable !== undefined;

Deno.test({
  name: "a plain reboot with no migration brings the applied stack back",
  ignore,
  async fn() {
    await using n = await Node.boot("host", undefined, { persistent: true });
    await n.powerCut();
    const t = await n.boot();
    assert(t.healthyMs !== undefined, "the stack did not come back");
    const s = await n.state();
    assertEquals([s.active, s.health, s.journal], [
      { a: true, b: false },
      "200 ok host node-1",
      null,
    ]);
    assertEquals(
      (await n.sb.exec(["systemctl", "is-active", "stratum-boot.service"])).stdout.trim(),
      "active",
    );
    // A second reboot does the same: the boot path is idempotent.
    await n.powerCut();
    assert((await n.boot()).healthyMs !== undefined);
    assertEquals((await n.state()).active, { a: true, b: false });
  },
});

// A power cut right after each journal write, both directions, then a boot:
// tests/node_state_test.ts, with etcd, which also checks every acknowledged
// key and reports the boot-to-healthy figures.
