import { find, findAll, is, join, JoinedError } from "../lib/errors/mod.ts";
import { assert, assertEquals } from "./support/assert.ts";

class ErrA extends Error {
  override name = "ErrA";
}
class ErrB extends Error {
  override name = "ErrB";
}

Deno.test("join() drops undefined and gives undefined when nothing is left", () => {
  assertEquals(join(), undefined);
  assertEquals(join(undefined, undefined), undefined);
});

Deno.test("join() of a single error is that error, unwrapped", () => {
  const a = new ErrA("a");
  assert(join(undefined, a) === a);
});

Deno.test("join() keeps every cause, in order, in the message too", () => {
  const err = join(new ErrA("first"), undefined, new ErrB("second"));
  assert(err instanceof JoinedError);
  assertEquals(err.errors.length, 2);
  assertEquals(err.message, "first; second");
});

Deno.test("is() finds a sentinel through cause chains and nested joins", () => {
  const deep = join(
    new Error("outer", { cause: join(new ErrB("x"), new Error("y", { cause: new ErrA("z") })) }),
  );
  assert(is(deep, ErrA));
  assert(is(deep, ErrB));
  assert(!is(new Error("plain"), ErrA));
  assert(!is(undefined, ErrA));
});

Deno.test("is() stops on a cause cycle", () => {
  const a = new Error("a");
  const b = new Error("b", { cause: a });
  (a as { cause?: unknown }).cause = b;
  assert(!is(a, ErrA));
});

Deno.test("find() returns the first instance depth-first; findAll() every one in that order", () => {
  const first = new ErrA("first");
  const nested = new ErrA("nested");
  const last = new ErrA("last");
  const err = join(
    new Error("wrap", { cause: join(first, new ErrB("b", { cause: nested })) }),
    last,
  );
  assert(find(err, ErrA) === first);
  assertEquals(findAll(err, ErrA).map((e) => e.message), ["first", "nested", "last"]);
  assertEquals(find(err, JoinedError)?.errors.length, 2);
  assertEquals(find(new Error("plain"), ErrB), undefined);
  assertEquals(findAll(undefined, ErrA), []);
});
