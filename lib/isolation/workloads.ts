import * as exec from "../exec/mod.ts";
import type { CallOptions } from "./backend.ts";
import type { Runtime, Stack } from "./stack.ts";

/** Processes of a stack's workloads were still running after the slot stopped. */
export class ErrWorkloadsLeft extends Error {
  override name = "ErrWorkloadsLeft";
}

/**
 * Kills every process in the workloads cgroups (each hierarchy's copy of
 * the path: cgroup v2, or every v1 hierarchy) and waits until none is
 * left, ~10 s at most. cgroup.kill (v2) first, so a process forking while
 * it dies cannot escape; then SIGKILL of what each cgroup.procs lists
 * (zombies stay listed until reaped, hence the wait). The waits grow from
 * 20 ms: a killed container is gone by the next look, and the source's
 * stop is downtime. The shell reads /sys: the artifact's permissions do
 * not cover it.
 */
export const stopWorkloadsScript = `root=/sys/fs/cgroup
hiers=$root
[ -e $root/cgroup.controllers ] || hiers=$(ls -d $root/*/ 2>/dev/null | sed 's:/$::')
i=0
wait=0.02
while :; do
  pids=
  for w in "$@"; do
    for h in $hiers; do
      d=$h$w
      [ -d "$d" ] || continue
      [ -e "$d/cgroup.kill" ] && echo 1 >"$d/cgroup.kill" 2>/dev/null
      pids="$pids $(find "$d" -name cgroup.procs -exec cat {} + 2>/dev/null)"
    done
  done
  pids=$(echo $pids)
  [ -z "$pids" ] && exit 0
  i=$((i + 1))
  [ $i -gt 50 ] && { echo "$pids" | tr ' ' '\\n' | sort -un | tr '\\n' ' '; exit 1; }
  kill -9 $pids 2>/dev/null
  sleep $wait
  case $wait in 0.02) wait=0.05 ;; 0.05) wait=0.1 ;; *) wait=0.2 ;; esac
done`;

/**
 * Kills every container the runtime's state directories (each argument, a
 * containerd `state`) hold a root file system for, in every namespace and
 * whatever its cgroup, and waits until none is left (~10 s at most; exit 1
 * names the pids left). A container's processes are found by their root
 * directory: the same directory (device and inode, `test -ef`) as a
 * `rootfs` mounted under `<state>/io.containerd.runtime.v2.task/`; the
 * path a process's root link reads is no use, as it is "/" in the
 * container's own mount namespace. Each one's cgroup (v2) is killed whole
 * unless it is the root or one of systemd's own slices, so a process
 * forking while it dies cannot escape. A container of an nspawn machine is
 * not found: its rootfs is mounted in the machine, not on the host. Only
 * shell builtins run per process: the source's stop is downtime.
 */
export const stopContainersScript = `roots=
for s in "$@"; do
  for r in "$s"/io.containerd.runtime.v2.task/*/*/rootfs; do
    [ -d "$r" ] && roots="$roots $r"
  done
done
[ -z "$roots" ] && exit 0
i=0
wait=0.02
while :; do
  pids=
  for p in /proc/[0-9]*; do
    for r in $roots; do
      [ "$p/root" -ef "$r" ] && { pids="$pids \${p#/proc/}"; break; }
    done
  done
  [ -z "$pids" ] && exit 0
  i=$((i + 1))
  [ $i -gt 50 ] && { echo $pids; exit 1; }
  for p in $pids; do
    cg=
    while read -r l; do
      case $l in 0::/?*) cg=\${l#0::} ;; esac
    done 2>/dev/null </proc/$p/cgroup
    case \${cg#/} in
      ''|init.scope*|system.slice|user.slice*|machine.slice|-.slice) ;;
      *) [ -e "/sys/fs/cgroup$cg/cgroup.kill" ] && echo 1 >"/sys/fs/cgroup$cg/cgroup.kill" 2>/dev/null ;;
    esac
  done
  kill -9 $pids 2>/dev/null
  sleep $wait
  case $wait in 0.02) wait=0.05 ;; 0.05) wait=0.1 ;; *) wait=0.2 ;; esac
done`;

/**
 * After a host-mode slot's units stopped: kills the stack's declared
 * workloads (their cgroups, the fast path) and then every container its
 * runtime ran (stopContainersScript), and fails while one is left, so the
 * other stack never starts beside them.
 */
export async function stopWorkloads(
  stack: Pick<Stack, "workloads" | "runtime"> | undefined,
  opts: CallOptions = {},
): Promise<void> {
  const cgroups = stack?.workloads ?? [];
  const call = { timeoutMs: 20_000, ...(opts.signal ? { signal: opts.signal } : {}) };
  if (cgroups.length > 0) {
    const r = await exec.run(["/bin/sh", "-c", stopWorkloadsScript, "sh", ...cgroups], call);
    if (r.code !== 0) {
      throw new ErrWorkloadsLeft(
        `the stack's workloads still run after its slot stopped (cgroups ${
          cgroups.join(", ")
        }: pids ${r.stdout.trim() || "unknown"}; ${r.stderr.trim()})`,
      );
    }
  }
  await stopContainers(stack?.runtime, call);
}

/** stopContainersScript for the stack's runtime, if it names one. */
async function stopContainers(
  runtime: Runtime | undefined,
  call: { timeoutMs: number; signal?: AbortSignal },
): Promise<void> {
  if (!runtime) return;
  const r = await exec.run(["/bin/sh", "-c", stopContainersScript, "sh", runtime.state], call);
  if (r.code !== 0) {
    throw new ErrWorkloadsLeft(
      `containers of the stack's ${runtime.kind} still run after its slot stopped (pids ${
        r.stdout.trim() || "unknown"
      }, root file systems under ${runtime.state}/io.containerd.runtime.v2.task; ${r.stderr.trim()})`,
    );
  }
}
