// Runs inside the systemd sandbox: provisions a node in MODE, slot a, from BUNDLE_DIR.
//   install_node.ts MODE BUNDLE_DIR
import * as host from "../../../lib/host/mod.ts";
import * as isolation from "../../../lib/isolation/mod.ts";
import * as node from "../../../lib/node/mod.ts";
import { bringUp } from "../bring_up.ts";

const [mode, bundle] = Deno.args;
if (!isolation.isMode(mode) || !bundle) throw new Error("usage: install_node.ts MODE BUNDLE_DIR");
await bringUp({
  paths: host.hostPaths("/"),
  systemctl: new host.Systemctl({ timeout: 60_000 }),
  mode,
  slot: "a",
  node: "node-1",
  bundle,
  self: node.selfCommand(new URL("../../../main.ts", import.meta.url).href),
});
