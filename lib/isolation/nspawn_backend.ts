import * as exec from "../exec/mod.ts";
import { quoteExecArg, UnitError } from "../host/mod.ts";
import { ensureDir, symlinkDurable, syncTree, writeFileDurable } from "../host/mod.ts";
import { join } from "node:path";
import { layOut, refuseLinks, writeHostFiles } from "./_slot_layout.ts";
import { orderLines, serviceUnit, targetText, targetUnit, writeUnits } from "./units.ts";
import type { CallOptions } from "./backend.ts";
import { type BackendDeps, claimFor, SlotBackend } from "./_slot_backend.ts";
import type { NodeSpec, Slot, SlotRef } from "./slot.ts";
import { expand, readStack, type Service, type Stack } from "./stack.ts";
import { stopWorkloadsScript } from "./workloads.ts";
import { unpackNodeImage } from "./node_image.ts";

/** The host unit of a slot's machine (the slot's one service in nspawn mode). */
export function machineUnit(slot: Slot): string {
  return serviceUnit(slot, "machine");
}

/** The unit of a stack's service inside the machine. */
export function innerUnit(name: string): string {
  return `stratum-${name}.service`;
}

/** The machine's default target: the stack, started once the machine's basic boot is done. */
export const innerTarget = "stratum-stack.target";

/** Where the machine's own units are, in the slot. */
const innerUnitDir = "etc/systemd/system";

/**
 * `nspawn` mode: the slot is **one booted systemd-nspawn machine**,
 * `stratum-<slot>-machine.service` on the host, with systemd as its PID 1
 * and each service of the stack a unit inside it (docs/nspawn.md says why
 * each setting is there). So every service shares one mount namespace (a
 * volume kubelet mounts is seen by containerd and its containers), starts
 * in the order the stack says, and the container runtime's cgroups are
 * delegated to it inside the machine's own subtree, which the host stops
 * whole. The machine is rooted in the slot with the host's /usr read-only
 * (or the slot's own tree, a node image: node_image.ts), a volatile
 * overlay (the slot stays byte for byte what the bundle verified), and the
 * stack's state directories bound read-write at their own paths. It shares
 * the host's network namespace: the source stops before the target starts,
 * which is the migration's step order.
 *
 * The machine is ready (nspawn's READY=1) when its boot finished, i.e. when
 * every service of the stack reported ready; a service that fails or ends
 * ends the machine (FailureAction=/SuccessAction=exit), so the host's slot
 * target fails or stops as one, exactly as in host mode.
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
    // A node image brings the machine's whole root tree; otherwise the
    // smallest root nspawn boots: an empty usr/ (the host's is bound over
    // it), the merged-/usr links, the API mount points (nspawn makes the
    // state directories' mount points in its overlay), and an os-release,
    // without which nspawn does not take the tree for an OS.
    if (stack.root) await unpackNodeImage(slotDir, stack.root);
    // Every directory stratum writes into below is the slot's own: a node
    // image's link (etc/systemd/system -> /etc/systemd/system) would take
    // the machine's units and default target onto the host.
    for (const d of [innerUnitDir, "etc/stratum"]) await refuseLinks(slotDir, d);
    for (const d of ["usr", "etc", "proc", "sys", "dev", "run", "tmp", "var"]) {
      await ensureDir(join(slotDir, d));
    }
    for (const l of ["bin", "lib", "lib64", "sbin"]) {
      await Deno.symlink(`usr/${l}`, join(slotDir, l)).catch((err) => {
        if (!(err instanceof Deno.errors.AlreadyExists)) throw err;
      });
    }
    if (!stack.root || !(await exists(join(slotDir, "etc/os-release")))) {
      await writeFileDurable(
        join(slotDir, "etc/os-release"),
        `NAME="Stratum node"\nID=stratum\nPRETTY_NAME="Stratum node, slot ${spec.slot}"\n`,
        { mode: 0o644 },
      );
    }
    // An empty machine-id: systemd takes the one nspawn passes and treats
    // the boot as not the first, so it does not enable the presets of the
    // host's packages (apt timers, nftables, dbus) inside the machine.
    await writeFileDurable(join(slotDir, "etc/machine-id"), "", { mode: 0o444 });
    // A container on the host's network gets the machine's /etc/hosts bound
    // in (runc fails when it is missing); a bundle may bring its own.
    if (!(await exists(join(slotDir, "etc/hosts")))) {
      await writeFileDurable(join(slotDir, "etc/hosts"), "127.0.0.1 localhost\n::1 localhost\n", {
        mode: 0o644,
      });
    }
    await ensureDir(join(slotDir, "etc/stratum"));
    await writeInnerUnits(slotDir, stack, spec.node);
    await writeFileDurable(join(slotDir, readyCheck), readyCheckText(stack), { mode: 0o644 });
    await writeFileDurable(join(slotDir, saidFailed), saidFailedText, { mode: 0o644 });
    // The links and mount points must survive a power cut like the rest of
    // the slot (layOut synced what it copied, not what is made here).
    await syncTree(slotDir, { dirsOnly: true });
    await claimFor(paths, spec, stack);
    await writeHostFiles(paths, slotDir, stack);
    const machine = machineUnit(spec.slot);
    const units: Record<string, string> = {
      [targetUnit(spec.slot)]: targetText(spec.slot, this.mode, [machine]),
      [machine]: await this.machineText(spec.slot, slotDir, stack),
    };
    await writeUnits(paths, systemctl, spec.slot, units, opts);
    await this.built(spec.slot);
    return { mode: this.mode, slot: spec.slot };
  }

  /** The host unit that runs the slot's machine. */
  async machineText(slot: Slot, slotDir: string, stack: Stack): Promise<string> {
    const { paths } = this.deps;
    const kernelLog = stack.grants?.includes("kernel-log") ?? false;
    const argv = [
      this.nspawn,
      "--quiet",
      "--register=no",
      "--keep-unit",
      "--boot",
      "--notify-ready=yes",
      `--machine=stratum-${slot}`,
      "-D",
      slotDir,
      // The host's userland, unless the slot brings its own (a node image),
      // and the host's kernel modules for what the runtime loads: with the
      // host's /usr they come along where /lib is /usr/lib.
      ...(stack.root ? [] : ["--bind-ro=/usr"]),
      ...(await modulesBind(!!stack.root)),
      ...stack.state.map((p) => `--bind=${paths.at(p)}:${p}`),
      // Where the machine's systemd listens for the host's probe requests
      // (the unit's runtime directory, root's, 0700, gone when it stops).
      ...(stack.health.exec ? [`--bind=${probeDir(slot)}:${innerProbeDir}`] : []),
      "--volatile=overlay",
      // What runc needs with the host's network (docs/nspawn.md), and what
      // the stack asked for (stack.ts's grants).
      ...(kernelLog ? ["--bind-ro=/dev/kmsg"] : []),
      `--capability=${["CAP_NET_ADMIN", ...(kernelLog ? ["CAP_SYSLOG"] : [])].join(",")}`,
      "--system-call-filter=@keyring bpf",
      // The machine's console is the host unit's journal: only errors of
      // its boot there, and the stack's own output (see innerServiceText).
      "--",
      "systemd.show_status=error",
    ];
    // nspawn picks the cgroup layout from the systemd it finds in the tree,
    // and the slot's usr/ is empty: on a unified (cgroup v2) host it would
    // choose the legacy one, which a container runtime cannot use.
    const unified = await hostCgroupUnified();
    return `# Written by stratum: slot ${slot}, nspawn mode.
[Unit]
Description=Stratum node machine, slot ${slot} (nspawn mode)
PartOf=${targetUnit(slot)}

[Service]
Type=notify
NotifyAccess=main
Delegate=yes
KillMode=mixed
${unified ? "Environment=SYSTEMD_NSPAWN_UNIFIED_HIERARCHY=1\n" : ""}ExecStart=${
      argv.map(quoteExecArg).join(" ")
    }
# READY=1 comes when the machine's boot is done, which includes its own
# readiness check (${readyUnit}): nothing runs here with the host's
# privileges in the machine's tree.
${
      stack.health.exec
        ? `RuntimeDirectory=${runtimeDirName(slot)}\nRuntimeDirectoryMode=0700\n`
        : ""
    }TimeoutStartSec=120
TimeoutStopSec=30
`;
  }

  /**
   * Starts the slot as SlotBackend does; when it fails, the error also
   * names each service of the stack that failed inside the machine, with
   * its status (what the readiness check said on the machine's console).
   */
  override async start(ref: SlotRef, opts: CallOptions = {}): Promise<void> {
    try {
      await super.start(ref, opts);
    } catch (err) {
      if (!(err instanceof UnitError)) throw err;
      const said = await exec.output([
        "journalctl",
        "--no-pager",
        "-o",
        "cat",
        "-n",
        "200",
        "-u",
        machineUnit(ref.slot),
      ], { timeoutMs: 10_000, ...(opts.signal ? { signal: opts.signal } : {}) }).catch(() => "");
      // The machine's console prefixes what its units say ("[ 12.3] sh[41]: ").
      const inner = said.split("\n").filter((l) => l.includes(innerFailure))
        .map((l) => l.slice(l.indexOf(innerFailure))).slice(-8);
      if (inner.length === 0) throw err;
      throw new UnitError(
        err.action,
        err.unit,
        `${err.detail}; inside the machine: ${
          [...new Set(inner.map((l) => l.slice(innerFailure.length)))].join("; ")
        }`,
      );
    }
  }
}

/** The readiness check, in the slot (run inside the machine as /etc/stratum/ready-check). */
const readyCheck = "etc/stratum/ready-check";
/** How the check starts the line it says for each service that is not active. */
const innerFailure = "stratum: not active: ";
/** The script a service of the machine runs when it stopped (ExecStopPost=), in the slot. */
const saidFailed = "etc/stratum/said-failed";

/**
 * Says on the machine's console (the host unit's journal) why a service of
 * the stack stopped, when it failed: its Result, exit status and last line
 * of output. A failed service ends the machine at once (FailureAction=),
 * before the readiness check can name it; this line is what the start's
 * error then quotes (kubelet's "open /dev/kmsg: no such file or directory").
 */
const saidFailedText = `# Written by stratum: $1 is the unit that stopped.
[ "$SERVICE_RESULT" = success ] && exit 0
last=$(timeout 3 journalctl -q --no-pager -o cat -n 1 "_SYSTEMD_UNIT=$1" 2>/dev/null)
echo "${innerFailure}$1 (Result=$SERVICE_RESULT, exit status $EXIT_STATUS)\${last:+: $last}"
`;

/** The machine's unit that runs the readiness check, as a service of the machine. */
const readyUnit = "stratum-ready.service";

/**
 * The check the machine runs once its stack's target is reached: the
 * target is active (every service started and ready), or it names each
 * service that is not, with systemd's Result and exit status, and fails.
 * It runs as a unit of the machine (readyUnitText), so it has the
 * machine's confinement and no more: the machine may lie about its
 * health, it cannot reach the host through the check.
 */
function readyCheckText(stack: Stack): string {
  const lines = stack.services.map((svc) => {
    const u = innerUnit(svc.name);
    // The machine may already be going down (the service's FailureAction):
    // then systemd no longer answers, and the service is named alone.
    return `if ! t is-active --quiet ${u}; then
  r=$(t show -P Result ${u} 2>/dev/null); c=$(t show -P ExecMainStatus ${u} 2>/dev/null)
  echo "${innerFailure}${u}\${r:+ (Result=$r, exit status $c)}"
fi`;
  });
  return `# Written by stratum: run in the machine once its boot is done.
# Each question bounded: a machine going down may accept and never answer.
t() { timeout 3 systemctl "$@"; }
t is-active --quiet ${innerTarget} && exit 0
${lines.join("\n")}
exit 1
`;
}

/**
 * The readiness check as a unit of the machine: part of its boot, so
 * nspawn's READY=1 (the host unit's start) comes only after it passed. It
 * runs whatever the target's job ended in (Wants=, not Requires=: a failed
 * dependency would skip it without failing it), and a failure ends the
 * machine at once with the check's status, which fails the host unit's
 * start; its lines reach the host unit's journal through the console.
 */
function readyUnitText(): string {
  return `# Written by stratum: the machine's readiness check.
[Unit]
Description=Stratum node stack's readiness check
After=${innerTarget}
FailureAction=exit-force

[Service]
Type=oneshot
RemainAfterExit=yes
ExecStart=/bin/sh /${readyCheck}
StandardOutput=journal+console
StandardError=journal+console
TimeoutStartSec=60
`;
}

/** The host directory the machine's probe socket is in: the machine unit's runtime directory. */
function runtimeDirName(slot: Slot): string {
  return machineUnit(slot).replace(/\.service$/, "");
}

/** The host path of slot `slot`'s probe directory (bound into the machine at innerProbeDir). */
export function probeDir(slot: Slot): string {
  return `/run/${runtimeDirName(slot)}`;
}

/** Where the probe directory is in the machine. */
const innerProbeDir = "/run/stratum-probe";
/** The probe socket's name in the probe directory. */
export const probeSocketName = "probe.sock";
/** The last line a probe's answer ends with: its command's exit status. */
export const probeExitMark = "stratum-probe-exit ";
/** The machine's socket unit on which the host asks for the stack's command probe. */
const probeSocketUnit = "stratum-probe.socket";

/**
 * The command probe as a socket-activated service of the machine: each
 * connection from the host runs the stack's `health.exec` once, as the
 * machine's systemd runs any of its services (the machine's capability
 * bounding set, seccomp filter, cgroup and namespaces, its own files),
 * and answers on the connection with the command's output and a last line
 * `stratum-probe-exit N`. The host only reads that answer: nothing of the
 * machine runs with the host's privileges, and no path of the machine is
 * followed by the host except the socket it connects to (in a directory
 * of the host's, bound in).
 */
function probeUnits(stack: Stack, node: string): Record<string, string> {
  const argv = expand(stack.health.exec!, "", node);
  return {
    [probeSocketUnit]: `# Written by stratum: the host asks the stack's command probe here.
[Unit]
Description=Stratum node stack's probe socket

[Socket]
ListenStream=${innerProbeDir}/${probeSocketName}
SocketMode=0600
Accept=yes
MaxConnections=8
`,
    "stratum-probe@.service": `# Written by stratum: the stack's command probe, once per connection.
[Unit]
Description=Stratum node stack's command probe
CollectMode=inactive-or-failed

[Service]
# Ahead of the stack's services for CPU, as the host's own process was: a
# probe that queues behind the workload it checks says "unhealthy" late.
CPUWeight=1000
StandardInput=socket
StandardOutput=socket
StandardError=socket
WorkingDirectory=/
ExecStart=/bin/sh -c ${quoteExecArg(`"$@"; r=$?; echo; echo "${probeExitMark}$r"`)} sh ${
      argv.map(quoteExecArg).join(" ")
    }
RuntimeMaxSec=30
`,
  };
}

/**
 * The machine's own units, in the slot's etc/systemd/system: one per
 * service, in the stack's order, and the default target that wants them
 * all. Units the host's /usr would start at first boot and that wait for
 * a person (systemd-firstboot) are masked.
 */
async function writeInnerUnits(slotDir: string, stack: Stack, node: string): Promise<void> {
  const dir = join(slotDir, innerUnitDir);
  await ensureDir(dir);
  const names = stack.services.map((s) => innerUnit(s.name));
  await writeFileDurable(
    join(dir, innerTarget),
    `# Written by stratum: the node stack, started once the machine's basic boot is done.
[Unit]
Description=Stratum node stack
Requires=basic.target
After=basic.target
${names.map((n) => `Requires=${n}\nAfter=${n}`).join("\n")}
Wants=${endUnit}
Wants=${readyUnit}
${stack.workloads?.length ? `Wants=${workloadsUnit}\n` : ""}${
      stack.health.exec ? `Wants=${probeSocketUnit}\n` : ""
    }AllowIsolate=yes
`,
    { mode: 0o644 },
  );
  await writeFileDurable(join(dir, endUnit), endUnitText(stack), { mode: 0o644 });
  await writeFileDurable(join(dir, readyUnit), readyUnitText(), { mode: 0o644 });
  if (stack.health.exec) {
    for (const [name, text] of Object.entries(probeUnits(stack, node))) {
      await writeFileDurable(join(dir, name), text, { mode: 0o644 });
    }
  }
  for (const s of stack.services) {
    await writeFileDurable(join(dir, innerUnit(s.name)), innerServiceText(s, node), {
      mode: 0o644,
    });
  }
  if (stack.workloads?.length) {
    await writeFileDurable(join(slotDir, stopWorkloadsFile), stopWorkloadsScript + "\n", {
      mode: 0o644,
    });
    await writeFileDurable(join(dir, workloadsUnit), workloadsUnitText(stack), { mode: 0o644 });
  }
  await symlinkDurable(innerTarget, join(dir, "default.target"));
  await symlinkDurable("/dev/null", join(dir, "systemd-firstboot.service"));
}

/** The script that kills the stack's workloads, in the slot. */
const stopWorkloadsFile = "etc/stratum/stop-workloads";
/** The machine's unit that stops the stack's workloads when the machine goes down. */
const workloadsUnit = "stratum-workloads.service";

/**
 * Kills the stack's workloads (containers, outside every unit of the
 * machine) when the machine goes down: a container's init ignores SIGTERM,
 * and the machine's shutdown would wait its 90 s for it before SIGKILL. It
 * is not ordered against the services, so the kill and their stop run side
 * by side (one after the other, they were most of the machine's stop in the
 * VM); ordered before them, as it was, the kill also ran while the runtime
 * was up. A container started after the kill still dies with the machine,
 * whose whole cgroup the host stops; host mode, where nothing else would
 * kill it, kills after its units stopped.
 */
function workloadsUnitText(stack: Stack): string {
  return `# Written by stratum: kills the stack's workloads when the machine goes down.
[Unit]
Description=Stratum node stack's workloads

[Service]
Type=oneshot
RemainAfterExit=yes
ExecStop=/bin/sh /${stopWorkloadsFile} ${stack.workloads!.map(quoteExecArg).join(" ")}
TimeoutStopSec=20
`;
}

/** The machine's unit that ends it at once when its stack is down. */
const endUnit = "stratum-end.service";

/**
 * Ends the machine as soon as its stack is down. It is stopped after every
 * service of the stack (its Before= is the stop order reversed), and then
 * systemd exits at once (SuccessAction=exit-force, no program run). The
 * rest of an orderly shutdown (the machine's own units, then its pod, bind
 * and tmpfs mounts, one umount process each) guards nothing of the node's:
 * its data is on the host's file systems, its mounts go with its
 * namespace. It took 1.3 s of the 2 s a machine's stop cost under the VM. systemd-shutdown
 * still kills what is left and unmounts in-process. It keeps the exit
 * status a failed service set (FailureAction=exit), as the orderly path does.
 */
function endUnitText(stack: Stack): string {
  const units = [
    ...stack.services.map((s) => innerUnit(s.name)),
    ...(stack.workloads?.length ? [workloadsUnit] : []),
  ];
  return `# Written by stratum: ends the machine at once when the node stack is down.
[Unit]
Description=End the machine once the Stratum node stack is down
${units.map((u) => `Before=${u}`).join("\n")}
SuccessAction=exit-force

[Service]
Type=oneshot
RemainAfterExit=yes
`;
}

/** A service's unit inside the machine: its end is the machine's end. */
function innerServiceText(s: Service, node: string): string {
  return `# Written by stratum: service ${s.name} of the node stack.
[Unit]
Description=Stratum ${s.name}
${orderLines(s, innerUnit)}# The stack starts, fails and stops as one, as in host mode: a service
# that fails or ends ends the machine, which the host sees.
FailureAction=exit
SuccessAction=exit

[Service]
Type=notify
NotifyAccess=main
${s.delegate ? "Delegate=yes\n" : ""}WorkingDirectory=/
ExecStart=${expand(s.exec, "", node).map(quoteExecArg).join(" ")}
ExecStopPost=/bin/sh /${saidFailed} %n
# Also on the machine's console: the host's journal of the machine's unit.
StandardOutput=journal+console
StandardError=journal+console
TimeoutStartSec=90
TimeoutStopSec=30
`;
}

/**
 * Whether the host runs the unified cgroup hierarchy alone (cgroup v2).
 * Asked of test(1): the artifact's permissions do not let Deno stat /sys
 * (found in the VM: the artifact wrote the legacy layout's unit).
 */
async function hostCgroupUnified(): Promise<boolean> {
  const r = await exec.run(["test", "-e", "/sys/fs/cgroup/cgroup.controllers"], {
    timeoutMs: 5000,
  }).catch(() => undefined);
  return r?.code === 0;
}

/**
 * The bind of the host's /lib/modules (read-only) the machine needs: always
 * with a node image (its tree has no modules for the host's kernel), else
 * only where /lib/modules is outside /usr (binding /usr does not bring it).
 */
async function modulesBind(ownRoot: boolean): Promise<string[]> {
  const real = await Deno.realPath("/lib/modules").catch(() => undefined);
  if (real === undefined) return [];
  return ownRoot || !real.startsWith("/usr/") ? ["--bind-ro=/lib/modules"] : [];
}

/** Whether `path` exists (as anything, a dangling link included). */
function exists(path: string): Promise<boolean> {
  return Deno.lstat(path).then(() => true, () => false);
}
