import { find } from "../errors/mod.ts";
import * as migrate from "../migrate/mod.ts";
import { ExitAttention, ExitFailed, ExitOK, ExitUsage } from "./exit.ts";

/** How a migrate command ended, as every --json document reports it. */
export interface Outcome {
  /** complete, rolled-back, failed, incomplete, refused, nothing-to-do, in-progress, interrupted. */
  readonly outcome: string;
  readonly exitCode: number;
  /** The hook or backend call that failed, and the last step recorded before it. */
  readonly failedStep: { readonly action: string; readonly step: string | null } | null;
  /** not-needed, done, or failed. */
  readonly rollback: "not-needed" | "done" | "failed";
  readonly message: string | null;
  readonly nextAction: string;
}

/**
 * The outcome of a run or resume, from the journal it left (the source of
 * truth after any crash) and the error the orchestration returned.
 */
export function outcomeOf(journal: migrate.Journal | undefined, error: Error | undefined): Outcome {
  const failed = find(error, migrate.ActionError);
  const failedStep = failed ? { action: failed.action, step: failed.step ?? null } : null;
  const message = journal?.message ?? error?.message ?? null;
  if (journal === undefined) {
    if (!error) {
      return {
        outcome: "nothing-to-do",
        exitCode: ExitOK,
        failedStep,
        rollback: "not-needed",
        message: null,
        nextAction: "none",
      };
    }
    // Preflight or download failed, or the first journal write: nothing was changed.
    return {
      outcome: "refused",
      exitCode: ExitUsage,
      failedStep,
      rollback: "not-needed",
      message,
      nextAction: "fix what the message names and run again; nothing was changed",
    };
  }
  switch (journal.step) {
    case migrate.StepComplete:
      return {
        outcome: "complete",
        exitCode: ExitOK,
        failedStep,
        rollback: "not-needed",
        message: null,
        nextAction:
          `none: the node runs in ${journal.to} mode; run \`stratum migrate ack\` once reported`,
      };
    case migrate.StepRolledBack:
      return {
        outcome: "rolled-back",
        exitCode: ExitFailed,
        failedStep,
        rollback: "done",
        message,
        nextAction:
          `the node runs in ${journal.from} mode again; fix the cause, run \`stratum migrate ack\`, then retry`,
      };
    case migrate.StepFailed:
      return {
        outcome: "failed",
        exitCode: ExitAttention,
        failedStep,
        rollback: "failed",
        message,
        nextAction:
          `needs attention: the migration failed and could not put the ${journal.from} stack back; check \`systemctl status stratum-${journal.sourceSlot}.target stratum-${journal.targetSlot}.target\`, bring one stack up by hand, then \`stratum migrate ack\``,
      };
    case migrate.StepReady:
      return {
        outcome: "incomplete",
        exitCode: ExitFailed,
        failedStep,
        rollback: "not-needed",
        message,
        nextAction:
          `the node runs in ${journal.to} mode; source cleanup is left: run \`stratum migrate resume\` (boot does too)`,
      };
    default:
      return {
        outcome: "interrupted",
        exitCode: ExitAttention,
        failedStep,
        rollback: migrate.is(error, migrate.ErrRollbackFailed) ? "failed" : "not-needed",
        message,
        nextAction: `the journal stopped at ${journal.step}: run \`stratum migrate resume\``,
      };
  }
}

/** The journal as JSON, with the seed's field names. */
export function journalDoc(j: migrate.Journal | undefined): unknown {
  return j ? JSON.parse(migrate.encodeJournal(j)) : null;
}
