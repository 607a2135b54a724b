// Assertions for tests: node:assert/strict's, with TypeScript narrowing.
import * as nodeAssert from "node:assert/strict";

/** Fails the test with `message` unless `cond` holds; narrows `cond`'s type. */
export function assert(cond: unknown, message?: string): asserts cond {
  nodeAssert.ok(cond, message);
}

/** Deep strict equality, with a diff in the failure. */
export function assertEquals<T>(
  actual: unknown,
  expected: T,
  message?: string,
): asserts actual is T {
  nodeAssert.deepStrictEqual(actual, expected, message);
}

/** Fails the test. */
export function fail(message: string): never {
  nodeAssert.fail(message);
}

/** Asserts `fn` rejects with an error `check` accepts; returns it. */
export async function assertRejects(
  fn: () => Promise<unknown>,
  check?: (e: unknown) => boolean,
  message?: string,
): Promise<unknown> {
  try {
    await fn();
  } catch (e) {
    if (check && !check(e)) nodeAssert.fail(`${message ?? "rejected with the wrong error"}: ${e}`);
    return e;
  }
  nodeAssert.fail(message ?? "did not reject");
}
