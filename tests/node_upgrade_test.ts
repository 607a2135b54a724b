// deno-lint-ignore-file no-console
// `stratum node upgrade` on real systemd (the sandbox): the stack moves to a
// new bundle in the mode it runs in, A/B through the other slot, with the
// journal, rollback, resume and boot path of a mode change
// (docs/migration.md, "Upgrading the stack").
//
// Invariant after every upgrade, resume or boot: exactly one slot's stack
// runs and answers; node.json names that slot; `node status` names the
// running version (the running slot's manifest) and the installed bundle is
// that same version; the other slot and any staged bundle are gone once the
// journal is terminal.

import { createHash } from "node:crypto";
import { join } from "node:path";
import { assert, assertEquals } from "./support/assert.ts";
import { makeBundle, makeEtcdBundle } from "./support/bundle.ts";
import { getKeys, keyNames, putKeys } from "./support/etcd.ts";
import { nspawnUnavailable, repoRoot } from "./support/sandbox.ts";
import { type Mode, Node } from "./support/sandbox_node.ts";
import { journalSteps, readStepTable } from "./support/step_table.ts";
import { scratchDir } from "./support/scratch.ts";

if (nspawnUnavailable) console.error(`upgrade tests are skipped: ${nspawnUnavailable}`);
const ignore = nspawnUnavailable !== undefined;
const steps = journalSteps(await readStepTable());
const finishes = (step: string) => steps.indexOf(step as never) >= steps.indexOf("awaiting-ready");

/** A bundle of release 2 (another digest), optionally unhealthy in `mode`. */
async function next(
  mode?: Mode,
  behavior?: "unhealthy",
  stack: "test" | "etcd" = "test",
): Promise<string> {
  const dir = await scratchDir("bundle-v2-");
  if (stack === "etcd") return await makeEtcdBundle(dir, { release: "2" });
  return await makeBundle(dir, {
    release: "2",
    ...(mode && behavior ? { behavior: { [mode]: behavior } } : {}),
  });
}

/** The manifest digest that names a bundle's mode directory, as node status reports it. */
async function digest(bundleDir: string, mode: Mode): Promise<string> {
  const data = await Deno.readFile(join(bundleDir, mode, "SHA256SUMS"));
  return createHash("sha256").update(data).digest("hex");
}

/** Exactly one version runs, node.json and node status name it, nothing else is left. */
async function assertRuns(n: Node, mode: Mode, want: string, label: string) {
  const s = await n.state();
  const slot = s.node.slot;
  assertEquals(s.node.mode, mode, `${label}: node.json`);
  assertEquals(s.active, { a: slot === "a", b: slot === "b" }, `${label}: exactly one slot runs`);
  assertEquals(s.health, `200 ok ${mode} node-1`, label);
  const st = await n.stratum(["node", "status", "--json"]);
  assertEquals(st.code, 0, `${label}: ${st.stderr}`);
  assertEquals(st.doc.running.digest, want, `${label}: node status names the running version`);
  assertEquals(st.doc.bundle.digest, want, `${label}: the installed bundle is what runs`);
  if (["complete", "rolled-back", undefined].includes(s.journal?.step)) {
    assertEquals(st.doc.previous, null, `${label}: the other slot is gone`);
    const staged = await n.sb.exec(["test", "-e", `/var/lib/stratum/bundles/.${mode}.next`]);
    assertEquals(staged.code, 1, `${label}: no staged bundle is left`);
  }
}

for (const mode of ["host", "nspawn"] as const) {
  Deno.test({
    name: `upgrade in ${mode} mode: A/B to the new release; the same bundle again changes nothing`,
    ignore,
    async fn() {
      await using n = await Node.boot(mode);
      const v2 = await next();
      const r = await n.stratum(["node", "upgrade", "--bundle", v2, "--json"]);
      assertEquals([r.code, r.doc?.outcome], [0, "complete"], r.stderr);
      assertEquals([r.doc.journal.from, r.doc.journal.to], [mode, mode]);
      await assertRuns(n, mode, await digest(v2, mode), "after the upgrade");
      assertEquals(
        (await n.sb.sh(
          "python3 -c \"import urllib.request;print(urllib.request.urlopen('http://127.0.0.1:18080/release').read().decode().strip())\"",
        )).trim(),
        "2",
      );
      assertEquals((await n.stratum(["migrate", "ack"])).code, 0);
      const before = await n.state();
      const again = await n.stratum(["node", "upgrade", "--bundle", v2, "--json"]);
      assertEquals([again.code, again.doc?.outcome], [0, "already-installed"], again.stderr);
      assertEquals((await n.state()).files, before.files, "nothing changed");
      // Back to release 1 is a downgrade: refused, nothing changed, unless asked for.
      const before2 = await n.state();
      const refused = await n.stratum(["node", "upgrade", "--bundle", n.bundle, "--json"]);
      assertEquals(refused.code, 2, refused.stderr);
      assert(refused.stderr.includes("older than the 2 this node runs"), refused.stderr);
      assertEquals((await n.state()).files, before2.files, "a refused downgrade changed nothing");
      const back = await n.stratum([
        "node",
        "upgrade",
        "--bundle",
        n.bundle,
        "--allow-downgrade",
        "--json",
      ]);
      assertEquals([back.code, back.doc?.outcome], [0, "complete"], back.stderr);
      await assertRuns(n, mode, await digest(n.bundle, mode), "after going back");
    },
  });

  Deno.test({
    name:
      `upgrade in ${mode} mode to a release that never becomes healthy rolls back to the running one`,
    ignore,
    async fn() {
      await using n = await Node.boot(mode);
      const bad = await next(mode, "unhealthy");
      const r = await n.stratum([
        "node",
        "upgrade",
        "--bundle",
        bad,
        "--wait-ready",
        "3s",
        "--json",
      ]);
      assertEquals([r.code, r.doc?.outcome], [1, "rolled-back"], r.stderr);
      await assertRuns(n, mode, await digest(n.bundle, mode), "after the rollback");
    },
  });

  Deno.test({
    name:
      `SIGKILL after each journal write of an upgrade in ${mode} mode, then resume: one version runs`,
    ignore,
    async fn(t) {
      for (const step of steps) {
        await t.step(step, async () => {
          await using n = await Node.boot(mode);
          const v2 = await next();
          const r = await n.stratum(["node", "upgrade", "--bundle", v2], {
            STRATUM_FAILPOINT: `kill-after-record:${step}`,
          });
          assertEquals(r.code, 137, `killed after ${step}: ${r.stderr}`);
          const resumed = await n.stratum(["migrate", "resume", "--json"]);
          assert([0, 1].includes(resumed.code), resumed.stderr);
          const want = finishes(step) ? v2 : n.bundle;
          await assertRuns(n, mode, await digest(want, mode), `resume after a kill at ${step}`);
        });
      }
    },
  });

  Deno.test({
    name: `a power cut after each journal write of an upgrade in ${mode} mode, then a boot`,
    ignore,
    async fn(t) {
      for (const step of steps) {
        await t.step(step, async () => {
          await using n = await Node.boot(mode, undefined, { persistent: true });
          const v2 = await next();
          const r = await n.stratum(["node", "upgrade", "--bundle", v2], {
            STRATUM_FAILPOINT: `kill-after-record:${step}`,
          });
          assertEquals(r.code, 137, `killed after ${step}: ${r.stderr}`);
          await n.powerCut();
          const time = await n.boot();
          assert(time.healthyMs !== undefined, `no stack came up after a cut at ${step}`);
          const want = finishes(step) ? v2 : n.bundle;
          await assertRuns(n, mode, await digest(want, mode), `boot after a cut at ${step}`);
        });
      }
    },
  });
}

Deno.test({
  name: "bad input to node upgrade exits 2 and changes nothing",
  ignore,
  async fn(t) {
    await using n = await Node.boot("host");
    const tampered = await next();
    await Deno.writeTextFile(join(tampered, "host/stack/stack.py"), "print('tampered')\n");
    const noMode = await Deno.makeTempDir({ dir: join(repoRoot, ".test-tmp") });
    const before = await n.state();
    for (
      const [what, args] of [
        ["a tampered bundle", ["--bundle", tampered]],
        ["a bundle without the node's mode", ["--bundle", noMode]],
        ["no such directory", ["--bundle", "/nonexistent"]],
        ["a bad duration", ["--bundle", tampered, "--wait-ready", "soon"]],
      ] as const
    ) {
      await t.step(what, async () => {
        const r = await n.stratum(["node", "upgrade", ...args, "--json"]);
        assertEquals(r.code, 2, `${what}: ${r.stderr}`);
        assertEquals(r.stderr.trim().split("\n").length, 1, `one line: ${r.stderr}`);
        assertEquals(await n.state(), before, `${what}: nothing changed`);
      });
    }
    await Deno.remove(noMode, { recursive: true });
  },
});

Deno.test({
  name: "etcd upgraded in nspawn mode keeps every acknowledged key",
  ignore: ignore || !(await Deno.stat("/usr/bin/etcd").then(() => true, () => false)),
  async fn() {
    await using n = await Node.boot("nspawn", undefined, { stack: "etcd" });
    const put = await putKeys(n.sb, "up/", 100);
    const v2 = await next(undefined, undefined, "etcd");
    const r = await n.stratum(["node", "upgrade", "--bundle", v2, "--json"]);
    assertEquals([r.code, r.doc?.outcome], [0, "complete"], r.stderr);
    const got = await getKeys(n.sb, "up/");
    assertEquals(got.keys, keyNames("up/", 100));
    assert(got.revision >= put.revision, "etcd's revision went back");
    // And back to the kept release: the keys written on release 2 too.
    assertEquals((await n.stratum(["migrate", "ack"])).code, 0);
    const put2 = await putKeys(n.sb, "v2/", 50);
    const back = await n.stratum(["node", "rollback", "--json"]);
    assertEquals([back.code, back.doc?.outcome], [0, "complete"], back.stderr);
    assertEquals((await getKeys(n.sb, "up/")).keys, keyNames("up/", 100));
    const got2 = await getKeys(n.sb, "v2/");
    assertEquals(got2.keys, keyNames("v2/", 50));
    assert(got2.revision >= put2.revision, "etcd's revision went back");
  },
});

// `stratum node rollback`: the release an upgrade replaced is kept, and the
// way back is an upgrade to it (docs/migration.md). Invariant as above,
// after every rollback, resume or boot: exactly one release runs, and node
// status names it.

for (const mode of ["host", "nspawn"] as const) {
  Deno.test({
    name:
      `rollback in ${mode} mode: back to the release the upgrade replaced, named by node status; again goes forward`,
    ignore,
    async fn() {
      await using n = await Node.boot(mode);
      const v1 = await digest(n.bundle, mode);
      const v2dir = await next();
      const v2 = await digest(v2dir, mode);
      assertEquals((await n.stratum(["node", "upgrade", "--bundle", v2dir])).code, 0);
      assertEquals((await n.stratum(["migrate", "ack"])).code, 0);
      const st = await n.stratum(["node", "status", "--json"]);
      assertEquals(
        st.doc.kept,
        { digest: v1, version: "1", trusted: true },
        "the replaced release is kept",
      );
      const r = await n.stratum(["node", "rollback", "--json"]);
      assertEquals([r.code, r.doc?.outcome], [0, "complete"], r.stderr);
      await assertRuns(n, mode, v1, "after the rollback");
      const st2 = await n.stratum(["node", "status", "--json"]);
      assertEquals(
        st2.doc.kept,
        { digest: v2, version: "2", trusted: true },
        "now the left release is kept",
      );
      const h = await n.stratum(["node", "history", "--json"]);
      const last = h.doc.events.at(-1);
      assertEquals([last.event, last.outcome, last.from.version, last.to.version], [
        "rollback",
        "complete",
        "2",
        "1",
      ]);
      assertEquals((await n.stratum(["migrate", "ack"])).code, 0);
      const again = await n.stratum(["node", "rollback", "--json"]);
      assertEquals([again.code, again.doc?.outcome], [0, "complete"], again.stderr);
      await assertRuns(n, mode, v2, "after the second rollback");
    },
  });
}

Deno.test({
  name: "rollback with no kept release exits 2, one line, and changes nothing",
  ignore,
  async fn() {
    await using n = await Node.boot("host");
    const before = await n.state();
    const r = await n.stratum(["node", "rollback", "--json"]);
    assertEquals(r.code, 2, r.stderr);
    assertEquals(r.stderr.trim().split("\n").length, 1, r.stderr);
    assert(r.stderr.includes("nothing to roll back to"), r.stderr);
    assertEquals(r.doc.outcome, "bad-input");
    assertEquals(await n.state(), before, "nothing changed");
  },
});

Deno.test({
  name:
    "SIGKILL, and a power cut, after each journal write of a rollback (host mode): one release runs",
  ignore,
  async fn(t) {
    for (const cut of ["kill", "power"] as const) {
      for (const step of steps) {
        await t.step(`${cut} after ${step}`, async () => {
          await using n = await Node.boot("host", undefined, { persistent: cut === "power" });
          const v2dir = await next();
          assertEquals((await n.stratum(["node", "upgrade", "--bundle", v2dir])).code, 0);
          assertEquals((await n.stratum(["migrate", "ack"])).code, 0);
          const r = await n.stratum(["node", "rollback"], {
            STRATUM_FAILPOINT: `kill-after-record:${step}`,
          });
          assertEquals(r.code, 137, `killed after ${step}: ${r.stderr}`);
          if (cut === "kill") {
            const resumed = await n.stratum(["migrate", "resume", "--json"]);
            assert([0, 1].includes(resumed.code), resumed.stderr);
          } else {
            await n.powerCut();
            const time = await n.boot();
            assert(time.healthyMs !== undefined, `no stack came up after a cut at ${step}`);
          }
          const want = finishes(step) ? n.bundle : v2dir;
          await assertRuns(n, "host", await digest(want, "host"), `${cut} at ${step}`);
        });
      }
    }
  },
});
