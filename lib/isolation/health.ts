import * as exec from "../exec/mod.ts";
import type { HostPaths, Systemctl } from "../host/mod.ts";
import { machineUnit } from "./nspawn_backend.ts";
import type { SlotRef } from "./slot.ts";
import { expand, type Stack } from "./stack.ts";

/**
 * Asks a stack's health URL once, bounded: `ok` when it answers 2xx within
 * `timeoutMs`; `detail` says what it did otherwise (for messages). Never
 * rejects: an unreachable stack is simply not healthy.
 */
export async function probeHealth(
  url: string,
  timeoutMs = 2000,
): Promise<{ ok: boolean; detail: string }> {
  try {
    const r = await fetch(url, { signal: AbortSignal.timeout(timeoutMs) });
    await r.body?.cancel();
    return { ok: r.ok, detail: `HTTP ${r.status}` };
  } catch {
    return { ok: false, detail: "no answer" };
  }
}

/** What a stack's probes need: where it runs, and how to reach its machine. */
export interface ProbeContext {
  readonly paths: HostPaths;
  readonly systemctl: Systemctl;
  readonly ref: SlotRef;
  /** The node's name, for `${NODE}`. */
  readonly node: string;
}

/**
 * How long a command probe may take: it starts programs (`ctr`, `etcdctl`)
 * that ask the stack in turn, seconds on a loaded or slow node (measured:
 * the example stack's probe took over 2 s in the VM while CI ran beside it).
 */
export const commandProbeMs = 10_000;

/**
 * Runs every probe of the stack's `health` once, bounded: the URL
 * (`timeoutMs`), then the command in the stack's own context (inside the
 * slot's machine in nspawn mode: nsenter into its systemd, so the command
 * sees the machine's mounts and files; commandProbeMs). `ok` only when all
 * pass; `detail` names the first that did not. Never rejects.
 */
export async function probeStack(
  stack: Stack,
  c: ProbeContext,
  timeoutMs = 2000,
): Promise<{ ok: boolean; detail: string }> {
  const http = await probeHealth(stack.health.url, timeoutMs);
  if (!http.ok || !stack.health.exec) return http;
  const argv = c.ref.mode === "nspawn"
    ? await inMachine(c, expand(stack.health.exec, "", c.node))
    : expand(stack.health.exec, c.paths.slot(c.ref.slot), c.node);
  if (!argv) return { ok: false, detail: "the machine does not run" };
  const what = stack.health.exec.join(" ");
  const r = await exec.run(argv, { timeoutMs: commandProbeMs }).catch((err) => err as Error);
  if (r instanceof Error) {
    return {
      ok: false,
      detail: r instanceof exec.ErrTimeout
        ? `${what}: did not finish in ${commandProbeMs / 1000} s`
        : `${what}: did not run (${r.message})`,
    };
  }
  // What the probe said last, so an operator sees why (one line, bounded).
  const said = `${r.stdout}\n${r.stderr}`.trim().split("\n").filter((l) => l.trim()).pop();
  return r.code === 0
    ? { ok: true, detail: `HTTP ok, ${what}: exit 0` }
    : { ok: false, detail: `${what}: exit ${r.code}${said ? `: ${said.slice(0, 200)}` : ""}` };
}

/**
 * `argv` as run inside slot `c.ref.slot`'s machine (nsenter into its
 * systemd, the one child of nspawn, the unit's main process), or undefined
 * when none runs. The child is read by the shell: Deno asks for every
 * permission to read another process's /proc entries. nsenter does not
 * fork (-F): a shell in the machine's mounts forks `argv` into its PIDs,
 * so a machine going down kills the probe at once (a child nsenter forks
 * would leave nsenter stopped, and the machine waiting for its reaping).
 */
async function inMachine(c: ProbeContext, argv: string[]): Promise<string[] | undefined> {
  const p = await c.systemctl.show(machineUnit(c.ref.slot), ["MainPID"]).catch(() => undefined);
  const pid = Number(p?.MainPID ?? 0);
  if (!pid) return undefined;
  return [
    "/bin/sh",
    "-c",
    'p=$1; shift; exec nsenter -F -t $(cat /proc/$p/task/$p/children) -m -p -- /bin/sh -c \'"$@"; exit $?\' sh "$@"',
    "sh",
    String(pid),
    ...argv,
  ];
}
