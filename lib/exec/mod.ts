/**
 * Runs one external program under its own deadline, through dax, and tells
 * a clean exit from a death by signal.
 *
 * Every call runs as `timeout --kill-after=G S sh -c '"$@"; exit $?' sh ARGV`:
 *
 * - `timeout` makes the call its own process group and signals the whole
 *   group at the deadline (SIGTERM, then SIGKILL G seconds later), so
 *   children of the program die with it; its exit code is then 124 (or 137).
 * - the `sh` in between turns a death by signal into an ordinary exit code
 *   128+N. dax 0.49 reports a child killed by a signal it did not send as
 *   exit code 0, and `timeout` re-raises its child's signal on itself, so
 *   without the shell an OOM-killed or SIGKILLed program reads as success.
 * - `setpriv --pdeathsig TERM` (util-linux) in front of `timeout` makes the
 *   kernel send `timeout` SIGTERM when stratum dies, even by SIGKILL; it
 *   passes that on to the whole group and SIGKILLs it G seconds later, so
 *   nothing a killed stratum started outlives it. Without setpriv on PATH
 *   the calls still run, and a killed stratum's calls end at their deadline.
 *
 * @example
 * ```ts
 * import * as exec from "./mod.ts";
 * const r = await exec.run(["ip", "-j", "link", "show"], { timeoutMs: 10_000 });
 * if (r.code !== 0) throw new exec.ExitError(r);
 * ```
 *
 * @module
 */

/** dax, loaded at the first call: the commands that run no program never pay for it. */
let dax: Promise<typeof import("dax")> | undefined;

/**
 * Loads dax now. Its evaluation compiles its WebAssembly shell parser on the
 * main thread (0.1 s here, over 10 s in an emulated guest under load), and
 * no timer fires meanwhile: a caller that times something concurrent (a
 * health probe beside a first `systemctl` call) loads it first, so the
 * load's stall is not counted against what it times.
 */
export function load(): Promise<typeof import("dax")> {
  return dax ??= import("dax");
}

/** Options of one call. */
export interface RunOptions {
  /** The call's deadline in ms: past it the program and its children are killed. */
  readonly timeoutMs: number;
  /** Kills the call early. */
  readonly signal?: AbortSignal | undefined;
  /** Extra environment. */
  readonly env?: Readonly<Record<string, string>>;
  /** Interleave stdout and stderr into `combined`, as a terminal shows them. */
  readonly combined?: boolean;
  /** The program's standard input; unset: none (/dev/null). */
  readonly input?: string;
}

/** What a call that ran to an end returned. */
export interface Output {
  readonly argv: readonly string[];
  readonly code: number;
  readonly stdout: string;
  readonly stderr: string;
  /** stdout and stderr interleaved; set only with `combined`. */
  readonly combined: string;
  readonly elapsedMs: number;
}

/** How long a program gets to die after SIGTERM before SIGKILL, in seconds. */
export const killGraceSeconds = 1;

/** A call that passed its deadline, or was aborted, and was killed with its children. */
export class ErrTimeout extends Error {
  override name = "ErrTimeout";
  readonly argv: readonly string[];
  readonly timeoutMs: number;
  /** True when the caller's signal stopped it, false when its deadline passed. */
  readonly aborted: boolean;
  constructor(argv: readonly string[], timeoutMs: number, aborted: boolean) {
    super(
      aborted
        ? `${argv.join(" ")}: stopped (aborted)`
        : `${argv.join(" ")}: no answer after ${timeoutMs} ms, killed`,
    );
    this.argv = argv;
    this.timeoutMs = timeoutMs;
    this.aborted = aborted;
  }
}

/** A program that is not installed or cannot be executed. */
export class ErrNotFound extends Error {
  override name = "ErrNotFound";
  readonly program: string;
  /** False: no such program (exit 127); true: there, but it cannot be executed (126). */
  readonly present: boolean;
  constructor(program: string, code: number) {
    super(`Cannot run ${program}: ${code === 127 ? "not found" : "not executable"}`);
    this.program = program;
    this.present = code !== 127;
  }
}

/** A program that exited non-zero, or died by a signal (code 128+N). */
export class ExitError extends Error {
  override name = "ExitError";
  readonly argv: readonly string[];
  readonly code: number;
  readonly stderr: string;
  constructor(out: Output) {
    const last = out.stderr.trim().split("\n").filter((l) => l.trim() !== "").pop();
    const why = out.code > 128 && out.code < 160
      ? `killed by signal ${out.code - 128}`
      : `exit code ${out.code}`;
    super(`${out.argv.join(" ")}: ${last ? `${last} (${why})` : why}`);
    this.argv = out.argv;
    this.code = out.code;
    this.stderr = out.stderr;
  }
}

/**
 * Runs `argv` and resolves with its output whatever its exit code. Rejects
 * with ErrTimeout when it was killed at its deadline or by the signal, and
 * ErrNotFound when the program cannot be run.
 */
export async function run(argv: readonly string[], opts: RunOptions): Promise<Output> {
  const secs = (opts.timeoutMs / 1000).toFixed(3);
  const guard = setpriv() ? ["setpriv", "--pdeathsig", "TERM"] : [];
  const { $ } = await load();
  let cmd =
    $`${guard} timeout --kill-after=${killGraceSeconds} ${secs} sh -c ${'"$@"; exit $?'} sh ${[
      ...argv,
    ]}`
      .env({ ...opts.env })
      .noThrow()
      // dax's own deadline is only a backstop for a `timeout` that hangs.
      .timeout(opts.timeoutMs + (killGraceSeconds + 2) * 1000);
  cmd = opts.input === undefined ? cmd.stdin("null") : cmd.stdinText(opts.input);
  cmd = opts.combined ? cmd.captureCombined() : cmd.stdout("piped").stderr("piped");
  if (opts.signal) cmd = cmd.signal(opts.signal);
  const started = performance.now();
  const r = await cmd;
  const elapsedMs = performance.now() - started;
  if (opts.signal?.aborted) throw new ErrTimeout(argv, elapsedMs, true);
  if (
    (r.code === 124 || r.code === 137 || r.code === 143) && elapsedMs >= opts.timeoutMs * 0.95
  ) {
    throw new ErrTimeout(argv, opts.timeoutMs, false);
  }
  if (r.code === 127 || r.code === 126) throw new ErrNotFound(argv[0] ?? "", r.code);
  return {
    argv,
    code: r.code,
    stdout: opts.combined ? "" : r.stdout,
    stderr: opts.combined ? "" : r.stderr,
    combined: opts.combined ? r.combined : "",
    elapsedMs,
  };
}

let hasSetpriv: boolean | undefined;

/** Whether setpriv is on PATH; looked up once. */
function setpriv(): boolean {
  if (hasSetpriv === undefined) {
    const dirs = (Deno.env.get("PATH") ?? "/usr/bin:/bin").split(":");
    hasSetpriv = dirs.some((d) => {
      try {
        return Deno.statSync(`${d || "."}/setpriv`).isFile;
      } catch {
        return false;
      }
    });
  }
  return hasSetpriv;
}

/** Runs `argv` and resolves with its stdout; any non-zero exit rejects with ExitError. */
export async function output(argv: readonly string[], opts: RunOptions): Promise<string> {
  const r = await run(argv, opts);
  if (r.code !== 0) throw new ExitError(r);
  return r.stdout;
}
