/**
 * Why a kubectl call failed, told apart from its stderr at this boundary so
 * nothing above it matches on message text. kubectl's exit code 1 lumps all
 * of these together.
 */
export type Reason =
  | "not-found" // the object, or its namespace, does not exist
  | "paused" // rollout restart of a paused Deployment
  | "on-delete" // rollout status of an OnDelete DaemonSet
  | "rollout-timeout" // rollout status --timeout passed
  | "progress-deadline" // the Deployment's own progress deadline passed
  | "deleted" // the object went away while rollout status watched it
  | "already-restarted" // a restart within the same second: kubectl sends no patch
  | "untrusted-ca" // x509: the kubeconfig's CA does not sign the apiserver's certificate
  | "unauthorized" // the credentials were refused
  | "unreachable" // no answer from the apiserver, or the request timed out
  | "other";

/** A kubectl call that exited non-zero. */
export class KubectlError extends Error {
  override name = "KubectlError";
  /** The call as an operator would type it. */
  readonly command: string;
  readonly code: number;
  readonly stderr: string;
  readonly reason: Reason;
  constructor(command: string, code: number, stderr: string) {
    const detail = stderr.trim().split("\n").filter((l) => l.trim() !== "").pop() ??
      `exit code ${code}`;
    super(`${command}: ${detail.replace(/^error: /, "")}`);
    this.command = command;
    this.code = code;
    this.stderr = stderr;
    this.reason = classify(stderr);
  }
}

/** A kubectl call that got no answer in time and was killed, with its children. */
export class CallTimeoutError extends Error {
  override name = "CallTimeoutError";
  readonly command: string;
  readonly timeoutMs: number;
  constructor(command: string, timeoutMs: number) {
    super(`${command}: no answer after ${formatMs(timeoutMs)}, killed`);
    this.command = command;
    this.timeoutMs = timeoutMs;
  }
}

/** kubectl could not be started at all (not installed, not executable). */
export class KubectlMissingError extends Error {
  override name = "KubectlMissingError";
}

/** Classifies kubectl's stderr. The texts are kubectl's own, 1.27 to 1.33. */
export function classify(stderr: string): Reason {
  const s = stderr;
  if (/can't restart paused deployment/.test(s)) return "paused";
  if (/only available for RollingUpdate strategy type/.test(s)) return "on-delete";
  if (/timed out waiting for the condition/.test(s)) return "rollout-timeout";
  if (/exceeded its progress deadline/.test(s)) return "progress-deadline";
  if (/object has been deleted/.test(s)) return "deleted";
  if (/already been triggered within the past second/.test(s)) return "already-restarted";
  if (/x509:|certificate signed by unknown authority|tls: failed to verify certificate/.test(s)) {
    return "untrusted-ca";
  }
  if (/\(Unauthorized\)|You must be logged in to the server|\(Forbidden\)/.test(s)) {
    return "unauthorized";
  }
  if (/\(NotFound\)|not found$/m.test(s)) return "not-found";
  if (
    /connection refused|no such host|i\/o timeout|Client\.Timeout exceeded|context deadline exceeded|Unable to connect to the server|the server is currently unable/
      .test(s)
  ) return "unreachable";
  return "other";
}

/** Formats a duration for messages and kubectl flags: "1500ms", "30s", "5m0s". */
export function formatMs(ms: number): string {
  if (ms < 1000 || ms % 1000 !== 0) return `${Math.max(0, Math.round(ms))}ms`;
  const s = ms / 1000;
  return s < 60 ? `${s}s` : `${Math.floor(s / 60)}m${s % 60}s`;
}
