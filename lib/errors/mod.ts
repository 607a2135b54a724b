/**
 * Error helpers shared by every package: Go's `errors.Is` and `errors.Join`
 * for JavaScript errors.
 *
 * Sentinels are `Error` subclasses with a literal `name`, so they survive a
 * minifier and read well in logs. A caller tests for one with {@linkcode is},
 * which looks through `cause` chains and joined errors, so a sentinel buried
 * inside a rollback failure is still found.
 *
 * @example Find a sentinel inside a joined failure
 * ```ts
 * import { is, join } from "./mod.ts";
 * class ErrBusy extends Error {
 *   override name = "ErrBusy";
 * }
 * const err = join(new Error("disk full"), new ErrBusy("lock held"));
 * is(err, ErrBusy); // true
 * ```
 *
 * @module
 */

export { find, findAll, is, join, JoinedError, messageOf } from "./_errors.ts";
