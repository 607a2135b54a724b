// deno-lint-ignore no-explicit-any
type ErrorClass = abstract new (...args: any[]) => Error;

/**
 * Several failures that happened together, every one kept. The message lists
 * them in order, separated by "; ", so a one-line report names all of them.
 */
export class JoinedError extends AggregateError {
  override name = "JoinedError";
  declare readonly errors: Error[];
  constructor(errors: Error[]) {
    super(errors, errors.map((e) => e.message).join("; "));
  }
}

/**
 * Joins errors like Go's `errors.Join`: `undefined` entries are dropped and
 * nothing left gives `undefined`. A single error joins to itself, unwrapped,
 * so its class and message reach the caller unchanged; `is` finds it either
 * way.
 */
export function join(...errs: (unknown | undefined)[]): Error | undefined {
  const kept = errs.filter((e) => e !== undefined && e !== null).map(toError);
  if (kept.length === 0) return undefined;
  if (kept.length === 1) return kept[0];
  return new JoinedError(kept);
}

/**
 * Reports whether `err`, or any error it wraps through `cause` or holds in an
 * `AggregateError`'s `errors`, is an instance of `sentinel`. Walks depth-first
 * and stops on cycles.
 */
export function is(err: unknown, sentinel: ErrorClass): boolean {
  const seen = new Set<unknown>();
  const stack: unknown[] = [err];
  while (stack.length > 0) {
    const e = stack.pop();
    if (e === undefined || e === null || seen.has(e)) continue;
    seen.add(e);
    if (e instanceof sentinel) return true;
    if (e instanceof AggregateError) {
      for (let i = e.errors.length - 1; i >= 0; i--) stack.push(e.errors[i]);
    }
    if (e instanceof Error && e.cause !== undefined) stack.push(e.cause);
  }
  return false;
}

/** The message of anything thrown, for reports that must not crash on a non-Error. */
export function messageOf(err: unknown): string {
  return err instanceof Error ? err.message : String(err);
}

function toError(e: unknown): Error {
  return e instanceof Error ? e : new Error(String(e));
}
