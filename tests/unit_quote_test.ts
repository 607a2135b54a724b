// Values written into unit files (lib/host/unit_quote.ts), against the rules
// of systemd.service(5) "Command lines" and systemd.exec(5) "Environment=":
// ExecStart= expands specifiers (%) and variables ($), so a literal one is
// doubled; Environment= expands specifiers but not variables; a value with
// spaces or quotes is double-quoted with C-style escapes; a newline would end
// the setting, so it is refused.
import * as host from "../lib/host/mod.ts";
import { assert, assertEquals } from "./support/assert.ts";

Deno.test("quoteExecArg doubles % and $, quotes what needs it, leaves plain words alone", () => {
  assertEquals(host.quoteExecArg("/usr/bin/etcd"), "/usr/bin/etcd");
  assertEquals(host.quoteExecArg("--name=node-1"), "--name=node-1");
  assertEquals(host.quoteExecArg("100%"), "100%%");
  assertEquals(host.quoteExecArg("$HOME"), "$$HOME");
  assertEquals(host.quoteExecArg("a b"), '"a b"');
  assertEquals(host.quoteExecArg('say "hi" \\ $x'), '"say \\"hi\\" \\\\ $$x"');
});

Deno.test("quoteEnvAssignment doubles % but leaves $ (Environment= expands no variables)", () => {
  assertEquals(
    host.quoteEnvAssignment("STRATUM_CACHE=/var/cache/stratum"),
    "STRATUM_CACHE=/var/cache/stratum",
  );
  assertEquals(host.quoteEnvAssignment("P=50%"), "P=50%%");
  assertEquals(host.quoteEnvAssignment("X=$y z"), '"X=$y z"');
});

Deno.test("a newline, carriage return or NUL is refused, never written into a unit", () => {
  for (const bad of ["node\n1", "node\r1", "a\0b"]) {
    for (const f of [host.quoteExecArg, host.quoteEnvAssignment]) {
      let err: unknown;
      try {
        f(bad);
      } catch (e) {
        err = e;
      }
      assert(err instanceof host.ErrUnitValue, `${JSON.stringify(bad)}: ${err}`);
    }
  }
});
