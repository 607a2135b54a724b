import * as bundle from "../bundle/mod.ts";
import { find } from "../errors/mod.ts";
import * as migrate from "../migrate/mod.ts";
import { ExitAttention, ExitFailed, ExitOK, ExitUsage } from "./exit.ts";
import type { Output } from "./output.ts";
import { type Ran, verdict } from "./verdict.ts";

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

/** What a run or resume returned, as far as the report needs it. */
export interface Ended {
  readonly rolledBack: boolean;
  readonly error?: Error | undefined;
}

/**
 * The outcome of a run or resume, from the journal it left (the source of
 * truth after any crash) and the result the orchestration returned. The
 * result wins where the journal could not be written: a rollback that
 * finished is reported done even when recording rolled-back failed, and a
 * rollback that failed is exit 3 even when recording failed failed too.
 */
export function outcomeOf(journal: migrate.Journal | undefined, ended?: Ended): Outcome {
  if (journal?.strategy === migrate.StrategyReprovision) return reprovisionOutcome(journal, ended);
  const error = ended?.error;
  const failed = find(error, migrate.ActionError);
  const failedStep = failed ? { action: failed.action, step: failed.step ?? null } : null;
  const message = journal?.message ?? error?.message ?? null;
  const attention = migrate.is(error, migrate.ErrRollbackFailed) ||
    migrate.is(error, migrate.ErrTargetLost) || migrate.is(error, migrate.ErrTooManyAttempts);
  if (journal?.step === migrate.StepFailed || attention) {
    const unrecorded = journal?.step !== migrate.StepFailed
      ? " (the journal could not record it)"
      : "";
    // The rollback could not start the source because its release does
    // not match what was signed (a repair of that release, interrupted):
    // nothing else can run it again but a repair.
    const damagedSource = find(find(error, migrate.ErrRollbackFailed), bundle.BundleError);
    return {
      outcome: "failed",
      exitCode: ExitAttention,
      failedStep,
      rollback: migrate.is(error, migrate.ErrTargetLost) ||
          migrate.is(error, migrate.ErrTooManyAttempts)
        ? "not-needed"
        : "failed",
      message: (error?.message ?? journal?.message ?? "") + unrecorded || null,
      nextAction: damagedSource
        ? `needs attention: the source's release does not match what was signed (${damagedSource.message}) and was not started again; run \`stratum migrate ack\`, then \`stratum node repair --bundle DIR\` with the operator's copy of that release`
        : `needs attention: neither stack is known to run${
          journal ? ` (slots ${journal.sourceSlot} and ${journal.targetSlot})` : ""
        }; check \`systemctl status 'stratum-*.target'\`, bring one stack up by hand, make /etc/stratum/node.json name it, then \`stratum migrate ack\``,
    };
  }
  if (ended?.rolledBack || journal?.step === migrate.StepRolledBack) {
    const unrecorded = journal?.step !== migrate.StepRolledBack;
    return {
      outcome: "rolled-back",
      exitCode: ExitFailed,
      failedStep,
      rollback: "done",
      message: unrecorded
        ? `${
          error?.message ?? "rolled back"
        } (the rollback finished, but the journal could not record it)`
        : message,
      nextAction: unrecorded
        ? `the node runs in ${journal?.from} mode again; free the disk or fix what the message names, then run \`stratum migrate resume\` to record it`
        : `the node runs in ${journal?.from} mode again; fix the cause, run \`stratum migrate ack\`, then retry`,
    };
  }
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
    // Preflight or download failed, the first journal write failed, or the
    // operator stopped it before the first step: nothing was changed.
    const aborted = migrate.is(error, migrate.ErrAborted);
    return {
      outcome: aborted ? "interrupted" : "refused",
      exitCode: ExitUsage,
      failedStep,
      rollback: "not-needed",
      message,
      nextAction: aborted
        ? "nothing was changed; run it again when ready"
        : "fix what the message names and run again; nothing was changed",
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
        rollback: "not-needed",
        message,
        nextAction: `the journal stopped at ${journal.step}: run \`stratum migrate resume\``,
      };
  }
}

/** The outcome of a reprovision handoff run, from its journal. */
function reprovisionOutcome(journal: migrate.Journal, ended?: Ended): Outcome {
  const error = ended?.error;
  const failedStep = null;
  const message = journal.message ?? error?.message ?? null;
  switch (journal.step) {
    case migrate.StepBootstrapped:
      return {
        outcome: "bootstrapped",
        exitCode: ExitOK,
        failedStep,
        rollback: "not-needed",
        message: null,
        nextAction:
          `none: the node was reset and runs in ${journal.to} mode; run \`stratum migrate ack\` once reported`,
      };
    case migrate.StepFailed:
      return {
        outcome: "failed",
        exitCode: ExitAttention,
        failedStep,
        rollback: "not-needed",
        message,
        nextAction:
          `needs attention: the node was reset and its bootstrap in ${journal.to} mode gave up; fix what the message names, then \`stratum migrate ack\` and \`stratum node install --mode ${journal.to} --bundle DIR\``,
      };
    default:
      return {
        outcome: error ? "retrying" : "in-progress",
        exitCode: error ? ExitFailed : ExitOK,
        failedStep,
        rollback: "not-needed",
        message,
        nextAction: error
          ? `the reprovision stopped at ${journal.step} (attempt ${
            journal.attempts ?? 0
          }); the next boot retries it, or run \`stratum migrate resume\``
          : `the reprovision is at ${journal.step}: follow it with \`stratum migrate status\``,
      };
  }
}

/** The journal as JSON, with the seed's field names. */
export function journalDoc(j: migrate.Journal | undefined): unknown {
  return j ? JSON.parse(migrate.encodeJournal(j)) : null;
}

/**
 * The outcome of a resume: over a terminal journal it did nothing, which is
 * `nothing-to-do` (exit 0) except for a failed migration, which still needs
 * a person (exit 3). The journal is in the document either way.
 */
export function resumeOutcome(r: migrate.ResumeOutcome | undefined): Outcome {
  if (!r) return outcomeOf(undefined);
  if (r.acted) return outcomeOf(r.journal, r);
  const o = outcomeOf(r.journal);
  return o.outcome === "failed" ? o : {
    ...o,
    outcome: "nothing-to-do",
    exitCode: ExitOK,
    nextAction: `none: the migration already ended ${r.journal.step}; ${o.nextAction}`,
  };
}

/**
 * Reports how a migrate command ended: the error line when it did not
 * succeed, then the document. For a run (`ran`), the document says the
 * downtime and the versions, and the human lines end with the verdict.
 */
export function report(
  out: Output,
  command: string,
  o: Outcome,
  journal?: migrate.Journal,
  group = "migrate",
  ran?: Ran,
): number {
  if (o.exitCode !== ExitOK) {
    out.error(`${group} ${command}: ${o.outcome}${o.message ? `: ${o.message}` : ""}`);
  }
  out.result(
    {
      command,
      ...o,
      ...(ran ? { downtimeMs: ran.downtimeMs, versions: ran.versions } : {}),
      journal: journalDoc(journal),
    },
    () => [
      `${command}: ${o.outcome}`,
      ...(o.failedStep
        ? [
          `failed at: ${o.failedStep.action}${
            o.failedStep.step ? ` (journal step ${o.failedStep.step})` : ""
          }`,
        ]
        : []),
      ...(o.rollback !== "not-needed" ? [`rollback: ${o.rollback}`] : []),
      ...(o.message ? [`message: ${o.message}`] : []),
      `next: ${o.nextAction}`,
      ...(ran ? [verdict(ran, o)] : []),
    ],
  );
  return o.exitCode;
}

/**
 * Reports a command refused before it changed anything (exit 2): the
 * error line, then the document with no journal.
 */
export function reportRefused(
  out: Output,
  command: string,
  message: string,
  nextAction: string,
  group = "migrate",
): number {
  out.error(`${group} ${command}: refused: ${message}`);
  out.result(
    { command, outcome: "refused", exitCode: ExitUsage, message, nextAction, journal: null },
    () => [`${command}: refused`, `message: ${message}`],
  );
  return ExitUsage;
}
