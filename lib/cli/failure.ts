// How an error that reached the top of a command becomes an exit code and,
// with --json, a document: one mapping for the commander path (program.ts)
// and the fast path (fast.ts). Imports the error classes from their own
// modules, not the barrels, so the fast path stays small.

import { is, messageOf } from "../errors/mod.ts";
import { ErrBusy } from "../host/lock.ts";
import { ErrBadNodeConfig } from "../isolation/node_config.ts";
import { ErrCorruptJournal } from "../migrate/errors.ts";
import { ErrBadRequest } from "../node/errors.ts";
import { ErrRefused, ErrUsage, ExitAttention, ExitBusy, ExitUsage } from "./exit.ts";
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
  out.error(`unexpected error: ${messageOf(err)}`);
  failure(json, "error", messageOf(err), "needs attention: report this error");
  return ExitAttention;
}

/** With --json, the document for a command that failed before producing one. */
export function failure(out: Output, outcome: string, message: string, nextAction: string): void {
  if (out.json) out.result({ outcome, message, nextAction }, () => []);
}
