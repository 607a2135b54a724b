// The kernel settings a stack's host files ask for (a container runtime's
// overlay and br_netfilter modules, ip_forward, bridge-nf-call-iptables):
// applied when a slot is prepared, before its stack starts, and put back by
// a rollback. A boot applies the files themselves (systemd-sysctl and
// systemd-modules-load read the same paths).

import { dirname, join } from "node:path";
import * as exec from "../exec/mod.ts";
import { type HostPaths, removeFileDurable, writeFileDurable } from "../host/mod.ts";

/** The host files whose content is kernel state (both are among the snapshot's files). */
export const sysctlFile = "/etc/sysctl.d/90-stratum.conf";
export const modulesFile = "/etc/modules-load.d/stratum.conf";

/** Where each key's value before the first change is kept until the change is kept or undone. */
function recordPath(paths: HostPaths): string {
  return join(dirname(paths.snapshotDir), "kernel-before.json");
}

/**
 * A sysctl key as the kernel names it: components of letters, digits, `_`
 * and `-`, separated by `.` or `/` (net.ipv4.ip_forward, net/ipv4/ip_forward),
 * not starting with `-` (an option to sysctl(8)). No globs.
 */
const sysctlKey = /^[A-Za-z0-9_][A-Za-z0-9_-]*([./][A-Za-z0-9_-]+)*$/;
/** A kernel module name as modprobe(8) takes it, not starting with `-` (an option). */
const moduleName = /^[A-Za-z0-9_][A-Za-z0-9_-]*$/;

/** A line of a sysctl.d or modules-load.d file that says nothing (blank, comment). */
function blank(line: string): boolean {
  return !line || line.startsWith("#") || line.startsWith(";");
}

/** The key and value of a sysctl.d line (a leading `-`: ignore a failure, as sysctl reads it). */
function sysctlLine(line: string): [string, string] | undefined {
  const eq = line.indexOf("=");
  if (eq < 0) return undefined;
  const key = line.slice(0, eq).trim().replace(/^-/, "");
  if (!sysctlKey.test(key)) return undefined;
  return [key.replaceAll("/", "."), line.slice(eq + 1).trim()];
}

/** `key = value` lines of a sysctl.d file (comments, blanks and a leading `-` as sysctl reads them). */
export function parseSysctl(text: string): Map<string, string> {
  const out = new Map<string, string>();
  for (const raw of text.split("\n")) {
    const line = raw.trim();
    if (blank(line)) continue;
    const kv = sysctlLine(line);
    if (kv) out.set(kv[0], kv[1]);
  }
  return out;
}

/** Module names of a modules-load.d file. */
export function parseModules(text: string): string[] {
  return text.split("\n").map((l) => l.trim()).filter((l) => !blank(l) && moduleName.test(l));
}

/** Whether host file `hostPath` is one of the two whose content is kernel settings. */
export function isKernelFile(hostPath: string): boolean {
  return hostPath === sysctlFile || hostPath === modulesFile;
}

/**
 * Why the text of host file `hostPath` is not kernel settings stratum
 * applies, naming its first bad line; undefined when it is, or when the
 * file is not one of the two kernel files. A line that is neither a module
 * name nor a `key = value` with a kernel sysctl key is refused, not passed
 * on: `-r` or `--p = x` would be read as options of modprobe or sysctl.
 */
export function kernelFileProblem(hostPath: string, text: string): string | undefined {
  if (!isKernelFile(hostPath)) return undefined;
  for (const [i, raw] of text.split("\n").entries()) {
    const line = raw.trim();
    if (blank(line)) continue;
    if (hostPath === modulesFile && !moduleName.test(line)) {
      return `line ${i + 1} ${JSON.stringify(line)} is not a kernel module name ` +
        "(letters, digits, _ and -, not starting with -)";
    }
    if (hostPath === sysctlFile && !sysctlLine(line)) {
      return `line ${i + 1} ${JSON.stringify(line)} is not a sysctl setting ` +
        "(key = value, the key's parts letters, digits, _ and -, separated by . or /, not starting with -)";
    }
  }
  return undefined;
}

async function readText(paths: HostPaths, p: string): Promise<string> {
  return await Deno.readTextFile(paths.at(p)).catch(() => "");
}

async function readRecord(paths: HostPaths): Promise<Map<string, string>> {
  const text = await Deno.readTextFile(recordPath(paths)).catch(() => "{}");
  try {
    return new Map(Object.entries(JSON.parse(text) as Record<string, string>));
  } catch {
    return new Map();
  }
}

/** sysctl(8), not /proc/sys: the artifact's permissions do not cover /proc. */
async function sysctlGet(key: string): Promise<string | undefined> {
  const r = await exec.run(["sysctl", "-n", "--", key], { timeoutMs: 5000 }).catch(() => undefined);
  return r?.code === 0 ? r.stdout.trim() : undefined;
}

async function sysctlSet(key: string, value: string): Promise<void> {
  await exec.output(["sysctl", "-q", "-w", "--", `${key}=${value}`], { timeoutMs: 5000 });
}

/**
 * Applies the host's sysctl and modules files as they are now (a slot's
 * prepare just wrote them): loads the modules, sets each key, having first
 * recorded, durably, the value of each key not recorded yet. Only for the
 * real root: a scratch root's files are not this kernel's.
 */
export async function applyKernelConfig(paths: HostPaths): Promise<void> {
  if (paths.root !== "/") return;
  const modules = parseModules(await readText(paths, modulesFile));
  if (modules.length > 0) {
    await exec.output(["modprobe", "-a", "--", ...modules], { timeoutMs: 30_000 });
  }
  const want = parseSysctl(await readText(paths, sysctlFile));
  const record = await readRecord(paths);
  let grew = false;
  for (const key of want.keys()) {
    if (record.has(key)) continue;
    const v = await sysctlGet(key);
    if (v !== undefined) {
      record.set(key, v);
      grew = true;
    }
  }
  if (grew) {
    await writeFileDurable(recordPath(paths), JSON.stringify(Object.fromEntries(record)) + "\n", {
      mode: 0o600,
    });
  }
  for (const [key, value] of want) await sysctlSet(key, value);
}

/**
 * After a rollback restored the host files: each key changed since the
 * record sets what the restored file says, or its value before. Modules
 * stay loaded (unloading one can break what else uses it). Idempotent.
 */
export async function restoreKernelConfig(paths: HostPaths): Promise<void> {
  if (paths.root !== "/") return;
  const record = await readRecord(paths);
  const restored = parseSysctl(await readText(paths, sysctlFile));
  for (const [key, before] of record) await sysctlSet(key, restored.get(key) ?? before);
  await discardKernelRecord(paths);
}

/** The change is kept (or none is under way): the record of values before it goes. */
export async function discardKernelRecord(paths: HostPaths): Promise<void> {
  await removeFileDurable(recordPath(paths));
}
