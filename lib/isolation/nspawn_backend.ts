import { quoteExecArg } from "../host/mod.ts";
import { ensureDir, syncTree } from "../host/mod.ts";
import { join } from "node:path";
import { layOut, writeHostFiles } from "./_slot_layout.ts";
import { serviceUnit, targetText, targetUnit, writeUnits } from "./units.ts";
import type { CallOptions } from "./backend.ts";
import { type BackendDeps, claimFor, SlotBackend } from "./_slot_backend.ts";
import type { NodeSpec, SlotRef } from "./slot.ts";
import { expand, readStack } from "./stack.ts";

/**
 * `nspawn` mode: each service of the slot's stack runs in its own
 * systemd-nspawn machine, `stratum-<slot>-<service>.service`, rooted in the
 * slot and bound to the slot's target like a host service (so a stack of
 * several services starts, fails and stops as one, exactly as in host mode).
 * No init runs inside: the machines are the services. Each gets the host's
 * /usr read-only, a volatile overlay (so the slot stays byte-for-byte what
 * the bundle verified and a stack's writes outside its state die with it),
 * and the stack's state directories bound read-write at their own paths, so
 * the node's data is the same in both modes. The machines share the host's
 * network namespace: the source must stop before the target starts, which
 * is the migration's step order.
 */
export class NspawnBackend extends SlotBackend {
  readonly mode = "nspawn" as const;
  /** The nspawn binary. */
  readonly nspawn: string;
  constructor(deps: BackendDeps & { nspawn?: string }) {
    super(deps);
    this.nspawn = deps.nspawn ?? "/usr/bin/systemd-nspawn";
  }

  async prepare(spec: NodeSpec, opts: CallOptions = {}): Promise<SlotRef> {
    const { paths, systemctl } = this.deps;
    const slotDir = paths.slot(spec.slot);
    await layOut(spec.bundleDir ?? paths.bundle(this.mode), slotDir);
    const stack = await readStack(slotDir);
    // The smallest root nspawn accepts: an empty usr/ (the host's is bound
    // over it), the merged-/usr links, and the API mount points (nspawn makes
    // the state directories' mount points in its overlay).
    for (const d of ["usr", "etc", "proc", "sys", "dev", "run", "tmp", "var"]) {
      await ensureDir(join(slotDir, d));
    }
    for (const l of ["bin", "lib", "lib64", "sbin"]) {
      await Deno.symlink(`usr/${l}`, join(slotDir, l)).catch((err) => {
        if (!(err instanceof Deno.errors.AlreadyExists)) throw err;
      });
    }
    // The links and mount points must survive a power cut like the rest of
    // the slot (layOut synced what it copied, not what is made here).
    await syncTree(slotDir, { dirsOnly: true });
    await claimFor(paths, spec, stack);
    await writeHostFiles(paths, slotDir, stack);
    const names = stack.services.map((s) => serviceUnit(spec.slot, s.name));
    const units: Record<string, string> = {
      [targetUnit(spec.slot)]: targetText(spec.slot, this.mode, names),
    };
    for (const s of stack.services) {
      const argv = [
        this.nspawn,
        "--quiet",
        "--register=no",
        "--keep-unit",
        "--notify-ready=yes",
        "--kill-signal=SIGTERM",
        `--machine=stratum-${spec.slot}-${s.name}`,
        "-D",
        slotDir,
        "--bind-ro=/usr",
        ...stack.state.map((p) => `--bind=${paths.at(p)}:${p}`),
        "--volatile=overlay",
        "--",
        ...expand(s.exec, "", spec.node),
      ];
      units[serviceUnit(spec.slot, s.name)] = `# Written by stratum: slot ${spec.slot}, nspawn mode.
[Unit]
Description=Stratum ${s.name} machine, slot ${spec.slot} (nspawn mode)
PartOf=${targetUnit(spec.slot)}

[Service]
Type=notify
KillMode=mixed
ExecStart=${argv.map(quoteExecArg).join(" ")}
TimeoutStartSec=60
TimeoutStopSec=30
`;
    }
    await writeUnits(paths, systemctl, spec.slot, units, opts);
    await this.built(spec.slot);
    return { mode: this.mode, slot: spec.slot };
  }
}
