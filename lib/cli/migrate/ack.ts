import type { Command } from "commander";
import * as host from "../../host/mod.ts";
import * as migrate from "../../migrate/mod.ts";
import { parseDuration } from "../duration.ts";
import { ExitOK, UsageError } from "../exit.ts";
import { journalDoc } from "./report.ts";
import { loadJournal } from "./resume_recorded.ts";
import type { Context } from "../program.ts";
import {
  type Common,
  common,
  locked,
  type MigrateDeps,
  rootPaths,
  waitLockOption,
} from "./shared.ts";

/** `stratum migrate ack`. */
export function ackCommand(group: Command, ctx: Context, _deps: MigrateDeps): void {
  common(group.command("ack"))
    .description(
      "remove a finished journal (complete, rolled-back, failed, bootstrapped) once its outcome was reported",
    )
    .addOption(waitLockOption())
    .action(async (opts: Common & { waitLock: string }) => {
      const out = ctx.output(opts);
      const waitLockMs = parseDuration("--wait-lock", opts.waitLock, true);
      const paths = await rootPaths(opts.root);
      ctx.exitCode = await locked(paths, out, "stratum migrate ack", waitLockMs, async () => {
        const store = new migrate.JournalStore(paths.journal);
        const j = await loadJournal(store);
        if (!j) {
          out.result(
            { outcome: "nothing-to-do", nextAction: "none" },
            () => ["No migration journal: nothing to acknowledge"],
          );
          return ExitOK;
        }
        if (!migrate.isTerminal(j.step)) {
          throw new UsageError(
            `The migration is still in progress (step ${j.step}): run \`stratum migrate resume\` first`,
          );
        }
        await store.remove();
        // What the migration kept for its rollback goes with it: a snapshot
        // left behind must never be restored by a later migration.
        await host.removeFileDurable(paths.nodeConfigSaved);
        await host.removeTreeDurable(paths.snapshotDir);
        out.result(
          { outcome: "acknowledged", journal: journalDoc(j), nextAction: "none" },
          () => [
            `Acknowledged the ${j.from} → ${j.to} migration that ended ${j.step}; journal removed`,
          ],
        );
        return ExitOK;
      });
    });
}
