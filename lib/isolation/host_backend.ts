import { quoteExecArg } from "../host/mod.ts";
import { layOut, writeHostFiles } from "./_slot_layout.ts";
import { orderLines, serviceUnit, targetText, targetUnit, writeUnits } from "./units.ts";
import type { CallOptions } from "./backend.ts";
import { claimFor, SlotBackend } from "./_slot_backend.ts";
import { type NodeSpec, otherSlot, type SlotRef } from "./slot.ts";
import { ErrBadStack, expand, readStack } from "./stack.ts";
import { stopWorkloads } from "./workloads.ts";

/**
 * `host` mode: each service of the slot's stack is a systemd unit on the
 * host, `PartOf=` the slot's `stratum-<slot>.target`, which `BindsTo=` every
 * service: starting the target starts the stack and fails when a service
 * cannot start; stopping it stops them all, and the stack's workloads
 * (containers outside its units: Stack.workloads, and every container of
 * its Stack.runtime) with them.
 */
export class HostBackend extends SlotBackend {
  readonly mode = "host" as const;

  override async stop(ref: SlotRef, opts: CallOptions = {}): Promise<void> {
    await super.stop(ref, opts);
    await this.#stopWorkloads(ref, opts);
  }

  /**
   * Destroys the slot; its workloads die too unless the other slot runs.
   * A rollback destroys a target that may have started containers and
   * then failed (its units already down, the containers not); the source,
   * destroyed once the target runs, was stopped whole before, and the
   * cgroups may now hold the running target's containers (an upgrade).
   */
  override async destroy(ref: SlotRef, opts: CallOptions = {}): Promise<void> {
    const other = targetUnit(otherSlot(ref.slot));
    const otherRuns = await this.deps.systemctl.isActive(other, opts).catch(() => false);
    if (!otherRuns) await this.#stopWorkloads(ref, opts);
    await super.destroy(ref, opts);
  }

  async #stopWorkloads(ref: SlotRef, opts: CallOptions): Promise<void> {
    const stack = await readStack(this.deps.paths.slot(ref.slot)).catch(() => undefined);
    await stopWorkloads(stack, opts);
  }

  async prepare(spec: NodeSpec, opts: CallOptions = {}): Promise<SlotRef> {
    const { paths, systemctl } = this.deps;
    const slotDir = paths.slot(spec.slot);
    await layOut(spec.bundleDir ?? paths.bundle(this.mode), slotDir);
    const stack = await readStack(slotDir);
    if (stack.root !== undefined) {
      throw new ErrBadStack(`${slotDir}/stack.json: "root" (a node image) is for nspawn mode`);
    }
    await claimFor(paths, spec, stack);
    await writeHostFiles(paths, slotDir, stack);
    const units: Record<string, string> = {};
    const names = stack.services.map((s) => serviceUnit(spec.slot, s.name));
    units[targetUnit(spec.slot)] = targetText(spec.slot, this.mode, names);
    for (const s of stack.services) {
      units[serviceUnit(spec.slot, s.name)] = `# Written by stratum: slot ${spec.slot}, host mode.
[Unit]
Description=Stratum ${s.name}, slot ${spec.slot} (host mode)
PartOf=${targetUnit(spec.slot)}
${orderLines(s, (n) => serviceUnit(spec.slot, n))}
[Service]
Type=notify
NotifyAccess=main
${s.delegate ? "Delegate=yes\n" : ""}WorkingDirectory=${slotDir}
ExecStart=${expand(s.exec, slotDir, spec.node).map(quoteExecArg).join(" ")}
KillMode=mixed
TimeoutStartSec=60
TimeoutStopSec=30
`;
    }
    await writeUnits(paths, systemctl, spec.slot, units, opts);
    await this.built(spec.slot);
    return { mode: this.mode, slot: spec.slot };
  }
}
