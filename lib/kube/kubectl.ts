import $ from "dax";
import { CallTimeoutError, formatMs, KubectlError, KubectlMissingError } from "./errors.ts";

/** Which kubectl to run and which apiserver it talks to. */
export interface Config {
  /** The kubectl binary. Default "kubectl" from PATH. */
  readonly binary?: string;
  readonly kubeconfig?: string;
  readonly context?: string;
  /** Extra environment for every call (tests set KUBECACHEDIR). */
  readonly env?: Readonly<Record<string, string>>;
}

/** Options of one call. */
export interface CallOptions {
  /** The call's own deadline, in ms: past it the call and its children are killed. */
  readonly timeout: number;
  /** Return stdout and stderr interleaved, as a terminal would show them. */
  readonly combined?: boolean;
  /** Kills the call early, e.g. when the caller's total deadline passes. */
  readonly signal?: AbortSignal;
}

/**
 * Runs one kubectl call under its own deadline and resolves with its output.
 * Rejects with KubectlError on a non-zero exit and CallTimeoutError when it
 * had to be killed. Never waits on a hung call.
 */
export type Kubectl = (args: readonly string[], opts: CallOptions) => Promise<string>;

/** How long kubectl gets to die after SIGTERM before SIGKILL. */
const killGraceSeconds = 1;

/**
 * The real kubectl, through dax. Each call runs under coreutils `timeout`,
 * which puts kubectl in its own process group and signals the whole group at
 * the deadline (SIGTERM, then SIGKILL a second later), so a dispatcher's or
 * plugin's children die with it; dax's own timeout is the backstop.
 */
export function kubectl(cfg: Config = {}): Kubectl {
  const binary = cfg.binary ?? "kubectl";
  const conn = connectionArgs(cfg);
  const show = hint(cfg);
  return async (args, opts) => {
    const secs = (opts.timeout / 1000).toFixed(3);
    let cmd = $`timeout --kill-after=${killGraceSeconds} ${secs} ${binary} ${conn} ${args}`
      .env({ ...cfg.env })
      .noThrow()
      .stdin("null")
      .timeout(opts.timeout + (killGraceSeconds + 2) * 1000);
    cmd = opts.combined ? cmd.captureCombined() : cmd.stdout("piped").stderr("piped");
    if (opts.signal) cmd = cmd.signal(opts.signal);
    const started = performance.now();
    const r = await cmd;
    const elapsed = performance.now() - started;
    const command = show(args.join(" "));
    // 124: timeout's own code; 137: it had to SIGKILL; 143/124 from dax's backstop.
    if ((r.code === 124 || r.code === 137 || r.code === 143) && elapsed >= opts.timeout * 0.95) {
      throw new CallTimeoutError(command, opts.timeout);
    }
    if (opts.signal?.aborted) throw new CallTimeoutError(command, elapsed);
    if (r.code === 127 || r.code === 126) {
      throw new KubectlMissingError(`Cannot run ${binary}: exit code ${r.code}`);
    }
    const stderr = opts.combined ? r.combined : r.stderr;
    if (r.code !== 0) throw new KubectlError(command, r.code, stderr);
    return opts.combined ? r.combined : r.stdout;
  };
}

/** The flags that point kubectl at the configured apiserver. */
export function connectionArgs(cfg: Config): string[] {
  return [
    ...(cfg.kubeconfig ? ["--kubeconfig", cfg.kubeconfig] : []),
    ...(cfg.context ? ["--context", cfg.context] : []),
  ];
}

/**
 * The command line an operator runs by hand against the same apiserver:
 * `kubectl`, the same --kubeconfig and --context, then `args`, quoted for a
 * POSIX shell.
 */
export function hint(cfg: Config = {}): (args: string) => string {
  const prefix = ["kubectl", ...connectionArgs(cfg).map(shellQuote)].join(" ");
  return (args) => `${prefix} ${args}`;
}

/** A duration kubectl's flags accept. */
export function durationFlag(ms: number): string {
  return formatMs(Math.max(1, Math.ceil(ms)));
}

/** Quotes `s` for a POSIX shell when it needs it; plain words stay as they are. */
export function shellQuote(s: string): string {
  return /^[A-Za-z0-9_./:=@%+,-]+$/.test(s) ? s : `'${s.replaceAll("'", `'\\''`)}'`;
}
