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
  | "credential-plugin" // the kubeconfig's exec credential plugin is missing or failed
  | "unauthorized" // 401: the credentials were refused
  | "forbidden" // 403: the credentials are good, RBAC denies the verb
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
    const signal = code > 128 && code < 160 ? ` (killed by signal ${code - 128})` : "";
    super(`${command}: ${detailOf(stderr) ?? `exit code ${code}`}${signal}`);
    this.command = command;
    this.code = code;
    this.stderr = stderr;
    this.reason = classify(stderr);
  }
}

/**
 * The line of kubectl's stderr that says what went wrong: its own error
 * line when there is one (client-go may follow it with advice and a URL),
 * else the last line.
 */
function detailOf(stderr: string): string | undefined {
  const lines = stderr.split("\n").map((l) => l.trim()).filter((l) => l !== "");
  const own = lines.findLast((l) => /^(error: |Error from server|Unable to connect)/.test(l));
  return (own ?? lines.at(-1))?.replace(/^error: /, "");
}

/** A kubectl call that got no answer in time and was killed, with its children. */
export class ErrCallTimeout extends Error {
  override name = "ErrCallTimeout";
  readonly command: string;
  readonly timeoutMs: number;
  constructor(command: string, timeoutMs: number) {
    super(`${command}: no answer after ${formatMs(timeoutMs)}, killed`);
    this.command = command;
    this.timeoutMs = timeoutMs;
  }
}

/** A kubectl call stopped by the caller's signal (SIGINT, SIGTERM), with its children. */
export class ErrCallInterrupted extends Error {
  override name = "ErrCallInterrupted";
  readonly command: string;
  constructor(command: string) {
    super(`${command}: stopped (interrupted)`);
    this.command = command;
  }
}

/**
 * kubectl could not be run at all: `present` false when there is no such
 * program (not installed, not on PATH), true when it is there but cannot be
 * executed (permissions, a directory, not a program).
 */
export class ErrKubectlMissing extends Error {
  override name = "ErrKubectlMissing";
  readonly binary: string;
  readonly present: boolean;
  constructor(binary: string, present: boolean) {
    super(
      present
        ? `${binary} cannot be executed (not an executable program)`
        : `${binary} not found (kubectl is not installed, or not on PATH)`,
    );
    this.binary = binary;
    this.present = present;
  }
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
  if (/getting credentials: |exec plugin|credential plugin/.test(s)) return "credential-plugin";
  if (/\(Unauthorized\)|You must be logged in to the server/.test(s)) return "unauthorized";
  if (/\(Forbidden\)| is forbidden: /.test(s)) return "forbidden";
  // Only the apiserver's own NotFound Status: "not found" elsewhere (a missing
  // credential plugin, a missing file) is not an object's absence.
  if (/Error from server \(NotFound\)/.test(s)) return "not-found";
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
