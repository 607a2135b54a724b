// Which systemd service a process runs in, from its cgroup: how a status
// tells a change running detached (a transient `stratum-change-….service`)
// from one an operator runs in a terminal (a session scope).

import * as exec from "../exec/mod.ts";

/**
 * The service named by the text of /proc/PID/cgroup: the last element of
 * the unified hierarchy's path (`0::`) or, on a hybrid host where that is
 * not systemd's, of the systemd one (`name=systemd`), when it ends in
 * `.service`; else undefined (a session's `.scope`, the root).
 */
export function serviceInCgroup(text: string): string | undefined {
  for (const l of text.split("\n")) {
    const path = /^(?:0:|\d+:name=systemd):(.*)$/.exec(l.trim())?.[1];
    const last = path?.split("/").pop();
    if (last && /^[A-Za-z0-9:_.\\@-]+\.service$/.test(last)) return last;
  }
  return undefined;
}

/** The systemd service process `pid` runs in, or undefined (none, or it cannot be told). */
export async function serviceOf(pid: number): Promise<string | undefined> {
  // The real cat, by path: Deno wants --allow-all to read /proc/PID.
  const r = await exec.run(["/bin/cat", `/proc/${pid}/cgroup`], { timeoutMs: 5_000 })
    .catch(() => undefined);
  return r?.code === 0 ? serviceInCgroup(r.stdout) : undefined;
}
