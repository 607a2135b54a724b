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
 * Every error in `err`'s tree, depth-first: each error, then the errors of an
 * `AggregateError` in order, then its `cause`. Stops on cycles.
 */
function* walk(err: unknown): Generator<unknown> {
  const seen = new Set<unknown>();
  const stack: unknown[] = [err];
  while (stack.length > 0) {
    const e = stack.pop();
    if (e === undefined || e === null || seen.has(e)) continue;
    seen.add(e);
    yield e;
    if (e instanceof Error && e.cause !== undefined) stack.push(e.cause);
    if (e instanceof AggregateError) {
      for (let i = e.errors.length - 1; i >= 0; i--) stack.push(e.errors[i]);
    }
  }
}

/** The first error in `err`'s tree (see `is`) that is an instance of `cls`. */
export function find<T extends Error>(
  err: unknown,
  // deno-lint-ignore no-explicit-any
  cls: abstract new (...args: any[]) => T,
): T | undefined {
  for (const e of walk(err)) if (e instanceof cls) return e;
  return undefined;
}

/** Every error in `err`'s tree that is an instance of `cls`, in walk order. */
export function findAll<T extends Error>(
  err: unknown,
  // deno-lint-ignore no-explicit-any
  cls: abstract new (...args: any[]) => T,
): T[] {
  return [...walk(err)].filter((e): e is T => e instanceof cls);
}

/**
 * Reports whether `err`, or any error it wraps through `cause` or holds in an
 * `AggregateError`'s `errors`, is an instance of `sentinel`. Walks depth-first
 * and stops on cycles.
 */
export function is(err: unknown, sentinel: ErrorClass): boolean {
  return find(err, sentinel) !== undefined;
}

/** The message of anything thrown, for reports that must not crash on a non-Error. */
export function messageOf(err: unknown): string {
  return err instanceof Error ? err.message : String(err);
}

function toError(e: unknown): Error {
  return e instanceof Error ? e : new Error(String(e));
}
