// deno-lint-ignore-file no-console
// Durability of what the target runs from, under strace: a power cut may
// drop every write that was not fsynced, and after stopping-source is
// recorded the source may be down, so by then every file and directory of
// the target slot and of the installed bundle must be fsynced (the journal's
// own protocol is checked in journal_store_test.ts). The real CLI runs in
// the systemd sandbox under `strace -f -y`, killed right after it records
// stopping-source.

import { join } from "node:path";
import { assert, assertEquals } from "./support/assert.ts";
import { nspawnUnavailable, repoRoot } from "./support/sandbox.ts";
import { Node } from "./support/sandbox_node.ts";
import { stratumArgv, stratumEnv } from "./support/stratum_bin.ts";
import { parseTrace } from "./support/syscall_trace.ts";
import { lacking } from "../scripts/packages.ts";

const straceMissing = lacking("strace");
const why = nspawnUnavailable ?? straceMissing;
if (why) console.error(`durability tests are skipped: ${why}`);

for (const to of ["nspawn", "host"] as const) {
  Deno.test({
    name: `the ${to} target slot and bundle are fsynced before stopping-source is recorded`,
    ignore: why !== undefined,
    async fn() {
      await using n = await Node.boot(to === "nspawn" ? "host" : "nspawn");
      const trace = join(repoRoot, ".test-tmp", `strace-${to}-${Deno.pid}.txt`);
      const r = await n.sb.exec([
        "strace",
        "-f",
        "-y",
        "-qq",
        "-e",
        "signal=none",
        "-e",
        "trace=openat,fsync,fdatasync,rename,renameat,renameat2",
        "-o",
        trace,
        ...stratumArgv(["migrate", "run", "--to", to, "--bundle", n.bundle]),
      ], {
        cwd: repoRoot,
        env: {
          NO_COLOR: "1",
          ...stratumEnv(),
          STRATUM_FAILPOINT: "kill-after-record:stopping-source",
        },
      });
      assert(r.code !== 0, "the failpoint killed the run");
      const calls = parseTrace(await Deno.readTextFile(trace));
      await Deno.remove(trace);
      const journal = "/var/lib/stratum/migration.json";
      const saves = calls.filter((c) =>
        c.name.startsWith("rename") && [...c.args.matchAll(/"([^"]*)"/g)][1]?.[1] === journal
      );
      assertEquals(saves.length, 2, "preparing and stopping-source were recorded");
      const recorded = saves[1]!.start;
      const bundleDir = (await n.sb.sh(`readlink -f /var/lib/stratum/bundles/${to}`)).trim();
      const paths =
        (await n.sb.sh(`find /var/lib/stratum/slots/b ${bundleDir} \\( -type f -o -type d \\)`))
          .trim().split("\n");
      assert(paths.length > 5, `the slot and the bundle hold files: ${paths.length}`);
      // The bundle is copied and fsynced as a staged tree, then renamed to its
      // version: its files count as synced under their staged names, and the
      // rename must be followed by an fsync of the bundles directory.
      const staged = `/var/lib/stratum/bundles/.${to}.next`;
      const synced = new Set<string | undefined>();
      for (const c of calls.filter((c) => c.end < recorded)) {
        if (c.name === "fsync" || c.name === "fdatasync") {
          synced.add(
            c.fdPath?.startsWith(staged) ? bundleDir + c.fdPath.slice(staged.length) : c.fdPath,
          );
        } else if (c.name.startsWith("rename")) {
          // A file written durably (a temp file fsynced, then renamed over
          // its name) is synced under the name it was renamed to.
          const [from, to] = [...c.args.matchAll(/"([^"]*)"/g)].map((m) => m[1]);
          if (from && to && synced.has(from)) synced.add(to);
        }
      }
      const promoted = calls.findIndex((c) =>
        c.name.startsWith("rename") && c.args.includes(`"${staged}"`) &&
        c.args.includes(`"${bundleDir}"`)
      );
      assert(promoted >= 0 && calls[promoted]!.end < recorded, "the staged bundle was renamed");
      assert(
        calls.slice(promoted).some((c) =>
          c.name === "fsync" && c.fdPath === "/var/lib/stratum/bundles" && c.end < recorded
        ),
        "the bundles directory was fsynced after the rename",
      );
      const missing = paths.filter((p) => !synced.has(p));
      assertEquals(missing, [], "fsynced before stopping-source was recorded");
      // The parents that name them, too.
      for (const dir of ["/var/lib/stratum/slots", "/var/lib/stratum/bundles"]) {
        assert(synced.has(dir), `${dir} fsynced`);
      }
    },
  });
}
