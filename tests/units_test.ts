// Which unit files are a slot's own (lib/isolation/units.ts): stratum
// rebuilds and removes exactly those, and never an operator's drop-in
// directory (`systemctl edit stratum-a-node.service` makes
// stratum-a-node.service.d/override.conf), which must survive every rebuild.
import { join } from "node:path";
import * as host from "../lib/host/mod.ts";
import * as isolation from "../lib/isolation/mod.ts";
import { assertEquals } from "./support/assert.ts";

Deno.test("unitsOf lists a slot's own unit files, not a drop-in directory or another slot's", async () => {
  const paths = host.hostPaths(await Deno.makeTempDir({ prefix: "stratum-units-" }));
  await Deno.mkdir(paths.unitDir, { recursive: true });
  const files = [
    "stratum-a.target",
    "stratum-a-node.service",
    "stratum-a-machine.service",
    "stratum-b.target",
    "stratum-b-node.service",
    "stratum-ab.target",
    "stratum-a-node.service.bak",
    "stratum-boot.service",
  ];
  for (const f of files) await Deno.writeTextFile(join(paths.unitDir, f), "");
  await Deno.mkdir(join(paths.unitDir, "stratum-a-node.service.d"));
  await Deno.writeTextFile(join(paths.unitDir, "stratum-a-node.service.d/override.conf"), "");
  assertEquals(await isolation.unitsOf(paths, "a"), [
    "stratum-a-machine.service",
    "stratum-a-node.service",
    "stratum-a.target",
  ]);
  assertEquals(await isolation.unitsOf(paths, "b"), ["stratum-b-node.service", "stratum-b.target"]);
  await Deno.remove(paths.root, { recursive: true });
});
