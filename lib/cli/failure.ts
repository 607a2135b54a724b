// How an error that reached the top of a command becomes an exit code and,
// with --json, a document: one mapping for the commander path (program.ts)
// and the fast path (fast.ts). Imports the error classes from their own
// modules, not the barrels, so the fast path stays small.

import { find, is, messageOf } from "../errors/mod.ts";
import { ErrNoSpace, isNoSpace } from "../host/durable_file.ts";
import { ErrBusy } from "../host/lock.ts";
import { ErrBadNodeConfig } from "../isolation/node_config.ts";
import { ErrCorruptJournal } from "../migrate/errors.ts";
import { ErrBadRequest } from "../node/errors.ts";
import { ErrRefused, ErrUsage, ExitAttention, ExitBusy, ExitFailed, ExitUsage } from "./exit.ts";
import type { Output } from "./output.ts";

/**
 * Reports `err` on stderr (and as the one JSON document when `json.json`)
 * and returns the exit code: bad input 2, the lock held 75, an unreadable
 * journal or node.json or anything unexpected 3.
 */
export function exitForError(err: unknown, out: Output, json: Output): number {
  if (err instanceof ErrBusy) {
    // Another command holds the migration lock: nothing changed.
    json.result(
      {
        outcome: "busy",
        holder: err.holder ?? null,
        message: err.message,
        nextAction: "try again when it has finished, or pass --wait-lock",
      },
      () => [],
    );
    out.error(err.message);
    return ExitBusy;
  }
  if (err instanceof ErrBadNodeConfig) {
    // What the node runs cannot be told: never "bad input" (docs/cli.md: 3).
    out.error(err.message);
    failure(
      json,
      "node-config-unreadable",
      err.message,
      "needs attention: the applied mode and slot cannot be read; inspect the file and the node (systemctl status 'stratum-*.target') before repairing it by hand",
    );
    return ExitAttention;
  }
  if (err instanceof ErrRefused) {
    out.error(err.message);
    failure(json, "refused", err.message, err.nextAction);
    return ExitUsage;
  }
  if (err instanceof ErrUsage || err instanceof ErrBadRequest) {
    out.error(err.message);
    failure(json, "bad-input", err.message, "fix the input; nothing was changed");
    return ExitUsage;
  }
  if (is(err, ErrCorruptJournal)) {
    out.error(messageOf(err));
    failure(
      json,
      "journal-unreadable",
      messageOf(err),
      "needs attention: a migration may be under way; inspect the journal and the node (systemctl status 'stratum-*.target') before repairing or removing it by hand",
    );
    return ExitAttention;
  }
  const noSpace = find(err, ErrNoSpace);
  if (noSpace || [...causes(err)].some(isNoSpace)) {
    // A full file system is the operator's to fix, and nothing is torn
    // (every durable write is atomic): one line naming the file, exit 1.
    const message = noSpace?.message ??
      `no space left on device: ${messageOf(err)}; free some space and run the command again`;
    out.error(message);
    failure(json, "no-space", message, "free space on that file system, then run it again");
    return ExitFailed;
  }
  out.error(`unexpected error: ${messageOf(err)}`);
  failure(json, "error", messageOf(err), "needs attention: report this error");
  return ExitAttention;
}

/** With --json, the document for a command that failed before producing one. */
export function failure(out: Output, outcome: string, message: string, nextAction: string): void {
  if (out.json) out.result({ outcome, message, nextAction }, () => []);
}

/** `err` and every error it wraps (cause, AggregateError's errors). */
function* causes(err: unknown, depth = 0): Generator<unknown> {
  if (depth > 16 || err === undefined) return;
  yield err;
  if (err instanceof AggregateError) { for (const e of err.errors) yield* causes(e, depth + 1); }
  if (err instanceof Error) yield* causes(err.cause, depth + 1);
}
