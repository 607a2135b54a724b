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
 * Host packages each mode runs its stack with: in nspawn mode kubelet and
 * containerd run inside the machine, so only the nspawn runtime is needed on
 * the host. Which of them an apt pin keeps off: {@linkcode conflictingPackages}.
 */
export const hostPackages: Readonly<Record<Mode, readonly string[]>> = Object.freeze({
  host: Object.freeze(["kubelet", "containerd", "cri-tools"]),
  nspawn: Object.freeze(["systemd-container"]),
});

/**
 * The packages an apt pin keeps off the host in each mode: only those that
 * would conflict with it. In nspawn mode a host kubelet, containerd or
 * crictl would fight the machine's for ports, sockets and cgroups. Host mode
 * pins nothing: systemd-container (systemd-nspawn, machinectl) starts
 * nothing by itself, so it does not conflict with a stack on the host, and a
 * later move into nspawn mode needs it installed (preflight checks it).
 */
export const conflictingPackages: Readonly<Record<Mode, readonly string[]>> = Object.freeze({
  host: Object.freeze([]),
  nspawn: hostPackages.host,
});

/**
 * The operator's opt-out (docs/cli.md): `{"packagePins": false}` here and
 * no command writes an apt pin (and each removes the ones it wrote).
 */
export const hostPrepConfig = "/etc/stratum/host-prep.json";

/** The boot-time firewall flush unit: clears stale stack chains before any stack starts. */
export const firewallUnit = "stratum-firewall-flush.service";

function pinFile(paths: HostPaths, mode: Mode): string {
  return join(paths.aptPreferencesDir, `stratum-${mode}.pref`);
}

/**
 * Whether the operator turned the pins off in {@linkcode hostPrepConfig};
 * throws, naming the file, when it is there but not `{"packagePins": BOOL}`.
 * Preflight and `node install` ask it before anything changes.
 */
export async function packagePinsWanted(paths: HostPaths): Promise<boolean> {
  const file = paths.at(hostPrepConfig);
  let text: string;
  try {
    text = await Deno.readTextFile(file);
  } catch (err) {
    if (err instanceof Deno.errors.NotFound) return true;
    throw err;
  }
  let doc: unknown;
  try {
    doc = JSON.parse(text);
  } catch {
    throw new Error(`${file} is not JSON (want {"packagePins": false} or no file)`);
  }
  const pins = (doc as { packagePins?: unknown } | null)?.packagePins;
  if (
    typeof doc !== "object" || doc === null || Array.isArray(doc) ||
    (pins !== undefined && typeof pins !== "boolean")
  ) {
    throw new Error(`${file}: want {"packagePins": true|false}`);
  }
  return pins !== false;
}

/**
 * The packages dpkg has installed (status `install ok installed`, or any
 * state but not-installed and config-files: a half-installed package is
 * there too), read from the root's dpkg status file; none when there is none.
 */
export async function installedPackages(paths: HostPaths): Promise<Set<string>> {
  const text = await Deno.readTextFile(paths.at("/var/lib/dpkg/status")).catch((err) => {
    if (err instanceof Deno.errors.NotFound) return "";
    throw err;
  });
  const out = new Set<string>();
  for (const stanza of text.split(/\n\s*\n/)) {
    const name = /^Package:\s*(\S+)/m.exec(stanza)?.[1];
    const status = /^Status:\s*(.*)$/m.exec(stanza)?.[1]?.trim().split(/\s+/).at(-1);
    if (name && status && status !== "not-installed" && status !== "config-files") {
      out.add(name);
    }
  }
  return out;
}

/**
 * The pin file's text for `mode`, or undefined when nothing is pinned: only
 * the conflicting packages that are not installed now. A pin on an installed
 * package does not remove it, it only stops its (security) updates, so an
 * installed one is never pinned.
 */
function pinText(mode: Mode, installed: Set<string>): string | undefined {
  const keepOff = conflictingPackages[mode].filter((p) => !installed.has(p));
  if (keepOff.length === 0) return undefined;
  return `# Written by stratum: in ${mode} mode these packages stay off the host (they would
# conflict with the stack in the machine). Only packages not installed when
# the host was prepared are pinned; {"packagePins": false} in
# ${hostPrepConfig} turns this off. Removed when the node leaves ${mode} mode.
Package: ${keepOff.join(" ")}
Pin: release *
Pin-Priority: -1
`;
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

/**
 * Applies the host preparation a bootstrap in `mode` would have: its
 * boot-time firewall flush unit (enabled), and an apt pin that keeps the
 * packages that would conflict with the mode, and are not installed, off
 * the host (none with the opt-out in {@linkcode hostPrepConfig}). Removes
 * the other mode's. Idempotent.
 * Returns whether unit files changed, so the caller reloads systemd.
 */
export async function prepareHost(paths: HostPaths, mode: Mode): Promise<boolean> {
  const other: Mode = mode === "host" ? "nspawn" : "host";
  await removeFileDurable(pinFile(paths, other));
  const pin = (await packagePinsWanted(paths))
    ? pinText(mode, await installedPackages(paths))
    : undefined;
  if (pin === undefined) {
    await removeFileDurable(pinFile(paths, mode));
  } else {
    await ensureDir(paths.aptPreferencesDir);
    await writeFileDurable(pinFile(paths, mode), pin, { mode: 0o644 });
  }
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
