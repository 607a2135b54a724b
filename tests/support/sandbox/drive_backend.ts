// deno-lint-ignore-file no-console
// Runs inside the systemd sandbox (via Sandbox.deno): drives a real backend
// through a scenario and prints what it observed as one JSON document, for
// tests/backends_test.ts to assert on.
//
//   drive_backend.ts lifecycle MODE BUNDLE_DIR
//   drive_backend.ts fail-start MODE BUNDLE_DIR

import * as host from "../../../lib/host/mod.ts";
import * as isolation from "../../../lib/isolation/mod.ts";
import { health } from "./_health.ts";

const [scenario, mode, bundleRoot] = Deno.args;
if (!isolation.isMode(mode) || !bundleRoot) throw new Error("usage: SCENARIO MODE BUNDLE_DIR");
const paths = host.hostPaths("/");
const systemctl = new host.Systemctl({ timeout: 60_000 });
const backend = isolation.backendFor(mode, { paths, systemctl });
// As an install does: the node layer claims the stack's state directories
// (makes and marks them), which the backend's start then checks.
const state = (await isolation.readStack(`${bundleRoot}/${mode}`)).state;
const spec: isolation.NodeSpec = {
  slot: "a",
  node: "node-1",
  bundleDir: `${bundleRoot}/${mode}`,
  claim: state,
};
const ref: isolation.SlotRef = { mode, slot: "a" };

async function observe() {
  return {
    units: await isolation.unitsOf(paths, "a"),
    slotExists: await Deno.stat(paths.slot("a")).then(() => true, () => false),
    active: await systemctl.isActive(isolation.targetUnit("a")),
    health: await health(),
  };
}

const out: Record<string, unknown> = {};
try {
  if (scenario === "lifecycle") {
    await backend.prepare(spec);
    out.prepared = await observe();
    await backend.prepare(spec);
    out.preparedTwice = await observe();
    await backend.start(ref);
    out.started = await observe();
    await backend.start(ref);
    out.startedTwice = await observe();
    await backend.stop(ref);
    out.stopped = await observe();
    await backend.stop(ref);
    out.stoppedTwice = await observe();
    await backend.start(ref);
    out.restarted = await observe();
    await backend.destroy(ref);
    out.destroyed = await observe();
    await backend.destroy(ref);
    out.destroyedTwice = await observe();
    out.hostFile = await Deno.readTextFile("/etc/sysctl.d/90-stratum.conf").catch(() => null);
  } else if (scenario === "fail-start") {
    await backend.prepare(spec);
    try {
      await backend.start(ref);
      out.error = null;
    } catch (err) {
      out.error = { name: (err as Error).name, message: (err as Error).message };
    }
    out.after = await observe();
    await backend.destroy(ref);
    out.destroyed = await observe();
  } else if (scenario === "probe-during-stop") {
    // A command probe still running in the machine when the slot stops.
    await backend.prepare(spec);
    await backend.start(ref);
    // The bundle's probe is `sleep 47` (backends_test.ts).
    const stack = await isolation.readStack(paths.slot("a"));
    const probe = isolation.probeStack(stack, { paths, systemctl, ref, node: "node-1" }, 40_000);
    for (let i = 0; i < 200; i++) {
      const r = await new Deno.Command("pgrep", { args: ["-x", "-f", "/bin/sleep 47"] }).output();
      if (r.code === 0) break;
      await new Promise((r) => setTimeout(r, 50));
    }
    await backend.stop(ref);
    out.probe = await probe;
    out.machine = await systemctl.show("stratum-a-machine.service", ["Result", "ActiveState"]);
    await backend.destroy(ref);
  } else if (scenario === "workloads") {
    // A process of the stack outside its unit's cgroup, as a container.
    const count = async (args: string[]) => {
      const r = await new Deno.Command("pgrep", { args }).output();
      return new TextDecoder().decode(r.stdout).trim().split("\n").filter(Boolean).length;
    };
    // The declared workload; a "container" of the stack's runtime (its
    // bundle's `runtime` option), counted apart.
    const left = () => count(["-x", "-f", "sleep 1000"]);
    const ctr = () => count(["-f", "busybox sleep 1001"]);
    const withCtr = Deno.args.includes("--container");
    const up = async () => {
      for (let i = 0; i < 100 && ((await left()) === 0 || (withCtr && (await ctr()) === 0)); i++) {
        await new Promise((r) => setTimeout(r, 50));
      }
    };
    await backend.prepare(spec);
    await backend.start(ref);
    await up();
    out.running = await left();
    out.ctrRunning = await ctr();
    try {
      await backend.stop(ref);
    } catch (err) {
      out.stopFailed = (err as Error).name;
    }
    out.active = await systemctl.isActive(isolation.targetUnit("a"));
    out.leftAfterStop = await left();
    out.ctrLeftAfterStop = await ctr();
    await new Deno.Command("pkill", { args: ["-9", "-f", "busybox sleep 1001"] }).output();
    // A rollback's target: started (its workload runs), its units down, destroyed.
    await backend.start(ref);
    await up();
    await systemctl.stop([isolation.targetUnit("a")]);
    out.runningAfterUnitsStop = await left();
    out.ctrRunningAfterUnitsStop = await ctr();
    try {
      await backend.destroy(ref);
    } catch (err) {
      out.destroyFailed = (err as Error).name;
    }
    out.leftAfterDestroy = await left();
    out.ctrLeftAfterDestroy = await ctr();
    await new Deno.Command("pkill", { args: ["-9", "-f", "busybox sleep 1001"] }).output();
    await new Deno.Command("pkill", { args: ["-9", "-x", "-f", "sleep 1000"] }).output();
  } else {
    throw new Error(`unknown scenario ${scenario}`);
  }
} catch (err) {
  out.unexpected = { name: (err as Error).name, message: (err as Error).message };
}
console.log(JSON.stringify(out));
