import * as exec from "../exec/mod.ts";
import type { CallOptions } from "./backend.ts";

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

export async function stopWorkloads(
  cgroups: readonly string[],
  opts: CallOptions = {},
): Promise<void> {
  if (cgroups.length === 0) return;
  const r = await exec.run(["/bin/sh", "-c", stopWorkloadsScript, "sh", ...cgroups], {
    timeoutMs: 20_000,
    ...(opts.signal ? { signal: opts.signal } : {}),
  });
  if (r.code !== 0) {
    throw new ErrWorkloadsLeft(
      `the stack's workloads still run after its slot stopped (cgroups ${
        cgroups.join(", ")
      }: pids ${r.stdout.trim() || "unknown"}; ${r.stderr.trim()})`,
    );
  }
}
