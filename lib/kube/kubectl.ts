import * as exec from "../exec/mod.ts";
import {
  ErrCallInterrupted,
  ErrCallTimeout,
  ErrKubectlMissing,
  formatMs,
  KubectlError,
} from "./errors.ts";

/** Which kubectl to run and which apiserver it talks to. */
export interface Config {
  /** The kubectl binary. Default "kubectl" from PATH. */
  readonly binary?: string;
  readonly kubeconfig?: string;
  readonly context?: string;
  /**
   * The KUBECONFIG of the environment stratum runs in, which kubectl
   * inherits when no kubeconfig is given: hints carry it, so that they reach
   * the same apiserver from the operator's shell.
   */
  readonly envKubeconfig?: string;
  /** Extra environment for every call (tests set KUBECACHEDIR). */
  readonly env?: Readonly<Record<string, string>>;
}

/** Options of one call. */
export interface CallOptions {
  /** The call's own deadline, in ms: past it the call and its children are killed. */
  readonly timeout: number;
  /** Return stdout and stderr interleaved, as a terminal would show them. */
  readonly combined?: boolean;
  /** Kills the call early (SIGINT, SIGTERM): it rejects with ErrCallInterrupted. */
  readonly signal?: AbortSignal | undefined;
}

/**
 * Runs one kubectl call under its own deadline and resolves with its output.
 * Rejects with KubectlError on a non-zero exit, ErrCallTimeout when it had
 * to be killed at its deadline, ErrCallInterrupted when the signal stopped
 * it, and ErrKubectlMissing when kubectl cannot be run. Never waits on a
 * hung call.
 */
export type Kubectl = (args: readonly string[], opts: CallOptions) => Promise<string>;

/**
 * The real kubectl, through lib/exec (dax): each call is killed with its
 * whole process group at its deadline or when the signal fires, and dies
 * with stratum when stratum is killed.
 */
export function kubectl(cfg: Config = {}): Kubectl {
  const binary = cfg.binary ?? "kubectl";
  const conn = connectionArgs(cfg);
  const show = commandLine(cfg);
  return async (args, opts) => {
    const command = show(args.join(" "));
    let r: exec.Output;
    try {
      r = await exec.run([binary, ...conn, ...args], {
        timeoutMs: opts.timeout,
        signal: opts.signal,
        env: { ...cfg.env },
        combined: opts.combined === true,
      });
    } catch (err) {
      if (err instanceof exec.ErrTimeout) {
        throw err.aborted
          ? new ErrCallInterrupted(command)
          : new ErrCallTimeout(command, opts.timeout);
      }
      if (err instanceof exec.ErrNotFound) throw new ErrKubectlMissing(binary, err.present);
      throw err;
    }
    if (r.code !== 0) {
      throw new KubectlError(command, r.code, opts.combined ? r.combined : r.stderr);
    }
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
 * POSIX shell. Without a kubeconfig but with the environment's KUBECONFIG,
 * the line starts with `KUBECONFIG=...`: the operator's shell may have
 * another one, or none.
 */
export function commandLine(cfg: Config = {}): (args: string) => string {
  const env = !cfg.kubeconfig && cfg.envKubeconfig
    ? [`KUBECONFIG=${shellQuote(cfg.envKubeconfig)}`]
    : [];
  const prefix = [...env, "kubectl", ...connectionArgs(cfg).map(shellQuote)].join(" ");
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
