import { ensureDir, syncTree } from "../host/mod.ts";
import { join } from "node:path";
import {
  layOut,
  quoteExec,
  serviceUnit,
  targetText,
  targetUnit,
  writeHostFiles,
  writeUnits,
} from "./_units.ts";
import type { CallOptions } from "./backend.ts";
import { type BackendDeps, SlotBackend } from "./_slot_backend.ts";
import type { NodeSpec, SlotRef } from "./slot.ts";
import { expand, readStack } from "./stack.ts";

/**
 * `nspawn` mode: the slot is the root of a systemd-nspawn machine run by
 * `stratum-<slot>-machine.service`, bound to the slot's target like a host
 * service. The machine gets the host's /usr read-only and a volatile overlay,
 * so the slot stays byte-for-byte what the bundle verified. It shares the
 * host's network namespace: the source must stop before the target starts,
 * which is the migration's step order.
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
    // The smallest root nspawn accepts: an empty usr/ (the host's is bound
    // over it), the merged-/usr links, and the API mount points.
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
    const stack = await readStack(slotDir);
    if (stack.services.length !== 1) {
      throw new Error(
        `nspawn mode runs one payload per machine; stack.json lists ${stack.services.length}`,
      );
    }
    await writeHostFiles(paths, slotDir, stack);
    const machine = serviceUnit(spec.slot, "machine");
    const payload = expand(stack.services[0]!.exec, "", spec.node);
    const argv = [
      this.nspawn,
      "--quiet",
      "--register=no",
      "--keep-unit",
      "--notify-ready=yes",
      "--kill-signal=SIGTERM",
      `--machine=stratum-${spec.slot}`,
      "-D",
      slotDir,
      "--bind-ro=/usr",
      "--volatile=overlay",
      "--",
      ...payload,
    ];
    const units: Record<string, string> = {
      [targetUnit(spec.slot)]: targetText(spec.slot, this.mode, [machine]),
      [machine]: `# Written by stratum: slot ${spec.slot}, nspawn mode.
[Unit]
Description=Stratum node machine, slot ${spec.slot} (nspawn mode)
PartOf=${targetUnit(spec.slot)}

[Service]
Type=notify
KillMode=mixed
ExecStart=${argv.map(quoteExec).join(" ")}
TimeoutStartSec=60
TimeoutStopSec=30
`,
    };
    await writeUnits(paths, systemctl, spec.slot, units, opts);
    return { mode: this.mode, slot: spec.slot };
  }
}
