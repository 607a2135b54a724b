// The pieces of `--detach` that need no systemd: the unit's name, the
// systemd-run command line that starts stratum in it (the reprovision
// handoff's too), and how a status reads the unit a process runs in from
// its cgroup. tests/detach_test.ts runs them on real systemd.

import { changeUnit } from "../lib/cli/detach.ts";
import { serviceInCgroup } from "../lib/host/process_unit.ts";
import { transientArgv } from "../lib/node/transient_unit.ts";
import { assertEquals } from "./support/assert.ts";

Deno.test("a detached change's unit says what and when, in a name systemd takes", () => {
  assertEquals(
    changeUnit("upgrade", new Date("2026-11-30T22:40:54.751Z")),
    "stratum-change-upgrade-20261130T224054Z.service",
  );
});

Deno.test("the failpoint reaches the unit only when the caller has it (a test aid)", () => {
  const base = {
    unit: "stratum-change-x.service",
    description: "d",
    self: { argv: ["/usr/local/bin/stratum"], env: { DENO_DIR: "/c" } },
    args: ["node", "rollback"],
    properties: ["KillMode=mixed"],
  };
  assertEquals(transientArgv(base), [
    "systemd-run",
    "--unit=stratum-change-x.service",
    "--collect",
    "--description=d",
    "--property=KillMode=mixed",
    "--setenv=DENO_DIR=/c",
    "--",
    "/usr/local/bin/stratum",
    "node",
    "rollback",
  ]);
  const fp = transientArgv({ ...base, failpoint: "hang-after-record:awaiting-ready" });
  assertEquals(fp.filter((a) => a.includes("STRATUM_FAILPOINT")), [
    "--setenv=STRATUM_FAILPOINT=hang-after-record:awaiting-ready",
  ]);
  assertEquals(transientArgv({ ...base, failpoint: undefined }), transientArgv(base));
});

Deno.test("the service a process runs in, on a unified and on a hybrid cgroup host", () => {
  assertEquals(
    serviceInCgroup("0::/system.slice/stratum-change-upgrade-20261130T224054Z.service\n"),
    "stratum-change-upgrade-20261130T224054Z.service",
  );
  assertEquals(
    serviceInCgroup(
      "4:memory:/system.slice/x.service\n1:name=systemd:/system.slice/stratum-boot.service\n0::/\n",
    ),
    "stratum-boot.service",
  );
  // A terminal's session, cron's child in a scope, the root: no service.
  assertEquals(serviceInCgroup("0::/user.slice/user-0.slice/session-4.scope\n"), undefined);
  assertEquals(serviceInCgroup("0::/\n"), undefined);
  assertEquals(serviceInCgroup(""), undefined);
});
