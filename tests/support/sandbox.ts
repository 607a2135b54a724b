// The systemd sandbox: a real systemd as PID 1 of private namespaces (see
// sandbox/boot.sh and docs/testing.md), for tests of the backends and the migrate
// CLI against real systemd. Start it with `await using sb = await
// Sandbox.start()`: it is killed by its PID (SIGKILL, which takes the whole
// PID namespace with it) when the test ends, passed or failed.

import $ from "dax";
import { dirname } from "node:path";

const bootScript = new URL("./sandbox/boot.sh", import.meta.url).pathname;
export const repoRoot = new URL("../../", import.meta.url).pathname.replace(/\/$/, "");

export interface ExecResult {
  code: number;
  stdout: string;
  stderr: string;
}

/**
 * Why the sandbox cannot run on this machine, or undefined: root, unshare
 * of every namespace, systemd, nsenter. The constants below are checked
 * once, when the module loads; call this again after installing packages.
 */
export async function whySandboxUnavailable(): Promise<string | undefined> {
  if (Deno.uid() !== 0) return "the systemd sandbox needs root";
  for (const bin of ["unshare", "nsenter", "/lib/systemd/systemd", "systemctl"]) {
    if (!(await $.which(bin)) && !(await exists(bin))) return `${bin} is not installed`;
  }
  const r = await $`unshare --pid --fork --mount --uts --ipc --net --mount-proc true`.noThrow()
    .quiet();
  if (r.code !== 0) return `the kernel refuses new namespaces (unshare exit ${r.code})`;
  return undefined;
}

/** Why nspawn tests cannot run, or undefined (see whySandboxUnavailable). */
export async function whyNspawnUnavailable(): Promise<string | undefined> {
  return await whySandboxUnavailable() ??
    (await exists("/usr/bin/systemd-nspawn")
      ? (await exists("/usr/bin/python3") ? undefined : "/usr/bin/python3 is not installed")
      : "systemd-nspawn is not installed (Debian package systemd-container)");
}

export const sandboxUnavailable: string | undefined = await whySandboxUnavailable();
export const nspawnUnavailable: string | undefined = await whyNspawnUnavailable();

async function exists(p: string): Promise<boolean> {
  return await Deno.stat(p).then(() => true, () => false);
}

export class Sandbox implements AsyncDisposable {
  #child: Deno.ChildProcess;
  readonly pid: number;

  private constructor(child: Deno.ChildProcess, pid: number) {
    this.#child = child;
    this.pid = pid;
  }

  /**
   * Boots a sandbox and waits until its systemd reports running (every job
   * of the boot done). With `state`, /etc and /var live in that directory on
   * disk and survive {@linkcode powerCut}, so `start` again boots the same
   * node; `unit` picks what to boot (multi-user.target: as a node does).
   */
  static async start(
    opts: { state?: string; unit?: "sandbox.target" | "multi-user.target" } = {},
  ): Promise<Sandbox> {
    // Asked again when it was missing at load: the demo installs packages after.
    const why = sandboxUnavailable && await whySandboxUnavailable();
    if (why) throw new Error(`sandbox unavailable: ${why}`);
    // Paths the sandbox must still see if they live under the host's /tmp.
    const keep = [repoRoot, dirname(await Deno.realPath(Deno.execPath())), Deno.env.get("DENO_DIR")]
      .filter((p): p is string => p !== undefined && p.startsWith("/tmp/"));
    const child = new Deno.Command("unshare", {
      args: ["--pid", "--fork", "--mount", "--uts", "--ipc", "--net", "--mount-proc", bootScript],
      env: {
        KEEP: keep.join(":"),
        ...(opts.state ? { STATE: opts.state } : {}),
        UNIT: opts.unit ?? "sandbox.target",
      },
      stdin: "null",
      stdout: "null",
      stderr: "piped",
    }).spawn();
    let pid: number | undefined;
    for (let i = 0; i < 100 && pid === undefined; i++) {
      const out = await $`ps -o pid= --ppid ${child.pid}`.noThrow().text();
      pid = out.trim() ? Number(out.trim().split("\n")[0]) : undefined;
      if (pid === undefined) await sleep(50);
    }
    if (pid === undefined) {
      child.kill("SIGKILL");
      await child.status;
      throw new Error("sandbox: systemd did not start");
    }
    const sb = new Sandbox(child, pid);
    for (let i = 0; i < 300; i++) {
      const r = await sb.exec(["systemctl", "is-system-running"]);
      const state = r.stdout.trim();
      if (state === "running" || state === "degraded") return sb;
      await sleep(100);
    }
    const failed = await sb.exec(["systemctl", "--failed", "--no-legend"]);
    await sb[Symbol.asyncDispose]();
    throw new Error(`sandbox: systemd did not reach running: ${failed.stdout}`);
  }

  /** Runs argv inside the sandbox (its mounts, PIDs, network, hostname, IPC). */
  async exec(
    argv: string[],
    opts: { env?: Record<string, string>; cwd?: string } = {},
  ): Promise<ExecResult> {
    // Deno.Command, not dax: dax reports a process killed by a signal as exit
    // code 0, and crash tests need to see the 137 of a SIGKILL.
    const r = await new Deno.Command("nsenter", {
      args: this.#enter(argv, opts),
      stdin: "null",
      stdout: "piped",
      stderr: "piped",
    }).output();
    const text = new TextDecoder();
    return { code: r.code, stdout: text.decode(r.stdout), stderr: text.decode(r.stderr) };
  }

  /** Runs a shell script inside; fails the test on a non-zero exit. */
  async sh(script: string): Promise<string> {
    const r = await this.exec(["bash", "-c", script]);
    if (r.code !== 0) throw new Error(`sandbox: ${script}: exit ${r.code}: ${r.stderr}`);
    return r.stdout;
  }

  /** Starts `deno ARGS` inside and returns its host PID, for killing it mid-run. */
  spawnDeno(args: string[], env: Record<string, string> = {}): Deno.ChildProcess {
    return this.spawn([Deno.execPath(), ...args], env);
  }

  /** Starts argv inside, in the checkout, without waiting for it. */
  spawn(argv: string[], env: Record<string, string> = {}): Deno.ChildProcess {
    return new Deno.Command("nsenter", {
      args: this.#enter(argv, {
        env: { NO_COLOR: "1", ...env },
        cwd: repoRoot,
      }),
      stdin: "null",
      stdout: "piped",
      stderr: "piped",
    }).spawn();
  }

  /** Runs `deno ARGS` inside, in the checkout. */
  async deno(args: string[], env: Record<string, string> = {}): Promise<ExecResult> {
    return await this.exec([Deno.execPath(), ...args], {
      env: { NO_COLOR: "1", ...env },
      cwd: repoRoot,
    });
  }

  /** nsenter's arguments to run argv in every namespace of the sandbox. */
  #enter(argv: string[], opts: { env?: Record<string, string>; cwd?: string }): string[] {
    return [
      ...["-t", String(this.pid), "-m", "-p", "-n", "-u", "-i"],
      ...(opts.cwd ? ["--wd=" + opts.cwd] : []),
      "--",
      "env",
      ...Object.entries(opts.env ?? {}).map(([k, v]) => `${k}=${v}`),
      ...argv,
    ];
  }

  /** Whether a unit is active inside the sandbox. */
  async isActive(unit: string): Promise<boolean> {
    return (await this.exec(["systemctl", "is-active", "--quiet", unit])).code === 0;
  }

  /**
   * A power cut: SIGKILL of the sandbox's systemd, which kills every process
   * in its PID namespace at once; nothing gets to stop cleanly. (The same
   * kernel keeps unsynced data, which is why durability is checked under
   * strace separately.)
   */
  async powerCut(): Promise<void> {
    await this[Symbol.asyncDispose]();
  }

  async [Symbol.asyncDispose](): Promise<void> {
    try {
      Deno.kill(this.pid, "SIGKILL");
    } catch { /* already gone */ }
    await this.#child.status;
    await this.#child.stderr.cancel().catch(() => {});
  }
}

function sleep(ms: number): Promise<void> {
  return new Promise((r) => setTimeout(r, ms));
}
