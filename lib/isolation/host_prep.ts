import { join } from "node:path";
import {
  ensureDir,
  type HostPaths,
  removeFileDurable,
  symlinkDurable,
  writeFileDurable,
} from "../host/mod.ts";
import type { Mode } from "./mode.ts";

/**
 * Host packages each mode runs its stack with. In the other mode they must
 * stay off the host: in nspawn mode kubelet and containerd run inside the
 * machine, and a host copy would fight it for ports and cgroups; in host mode
 * the nspawn runtime is not needed.
 */
export const hostPackages: Readonly<Record<Mode, readonly string[]>> = Object.freeze({
  host: Object.freeze(["kubelet", "containerd", "cri-tools"]),
  nspawn: Object.freeze(["systemd-container"]),
});

/** The boot-time firewall flush unit: clears stale stack chains before any stack starts. */
export const firewallUnit = "stratum-firewall-flush.service";

function pinFile(paths: HostPaths, mode: Mode): string {
  return join(paths.aptPreferencesDir, `stratum-${mode}.pref`);
}

function firewallUnitText(mode: Mode): string {
  const what = mode === "host"
    ? "the host stack's STRATUM chains"
    : "the host-side forwarding chains of the nspawn machine";
  return `# Written by stratum for ${mode} mode. Flushes ${what} at boot, before the
# node stack starts, as a fresh ${mode}-mode bootstrap would.
[Unit]
Description=Flush stale Stratum firewall chains (${mode} mode)
DefaultDependencies=no
Before=network-pre.target stratum-a.target stratum-b.target
Wants=network-pre.target

[Service]
Type=oneshot
RemainAfterExit=yes
ExecStart=-/usr/sbin/iptables -w -F STRATUM-INPUT
ExecStart=-/usr/sbin/iptables -w -F STRATUM-FORWARD

[Install]
WantedBy=multi-user.target
`;
}

function pinText(mode: Mode): string {
  const other: Mode = mode === "host" ? "nspawn" : "host";
  const keepOff = hostPackages[other].filter((p) => !hostPackages[mode].includes(p));
  return `# Written by stratum: in ${mode} mode these packages stay off the host.
Package: ${keepOff.join(" ")}
Pin: release *
Pin-Priority: -1
`;
}

/**
 * Applies the host preparation a bootstrap in `mode` would have: its
 * boot-time firewall flush unit (enabled), and apt pins that keep the other
 * mode's packages off the host. Removes the other mode's. Idempotent.
 * Returns whether unit files changed, so the caller reloads systemd.
 */
export async function prepareHost(paths: HostPaths, mode: Mode): Promise<boolean> {
  const other: Mode = mode === "host" ? "nspawn" : "host";
  await removeFileDurable(pinFile(paths, other));
  await ensureDir(paths.aptPreferencesDir);
  await writeFileDurable(pinFile(paths, mode), pinText(mode), { mode: 0o644 });
  const unit = join(paths.unitDir, firewallUnit);
  const want = firewallUnitText(mode);
  const had = await Deno.readTextFile(unit).catch(() => undefined);
  await ensureDir(paths.unitDir);
  if (had !== want) await writeFileDurable(unit, want, { mode: 0o644 });
  const wants = join(paths.unitDir, "multi-user.target.wants");
  await ensureDir(wants);
  const link = join(wants, firewallUnit);
  await symlinkDurable(`../${firewallUnit}`, link);
  return had !== want;
}

/** Removes what prepareHost installed for `mode`. Idempotent. */
export async function unprepareHost(paths: HostPaths, mode: Mode): Promise<void> {
  await removeFileDurable(pinFile(paths, mode));
  const unit = join(paths.unitDir, firewallUnit);
  if ((await Deno.readTextFile(unit).catch(() => "")).includes(`for ${mode} mode`)) {
    await removeFileDurable(join(paths.unitDir, "multi-user.target.wants", firewallUnit));
    await removeFileDurable(unit);
  }
}
