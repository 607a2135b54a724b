import type * as host from "../host/mod.ts";
import type * as node from "../node/mod.ts";

/** What the node and migrate commands need from outside; main.ts builds the real ones. */
export interface Deps {
  readonly systemctl: () => host.Systemctl;
  /** Aborted on SIGINT/SIGTERM (reason: Interrupted): a migration's forward path stops and rolls back. */
  readonly interrupted: AbortSignal;
  /** How systemd runs this program, for the boot unit. */
  readonly selfCommand: node.SelfCommand;
  /** STRATUM_FAILPOINT, for the end-to-end tests (lib/node/failpoint.ts). */
  readonly failpoint: string | undefined;
  /** Kills this process at once (SIGKILL), for the failpoints. */
  readonly killSelf: () => void;
}
