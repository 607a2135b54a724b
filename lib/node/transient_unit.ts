// Running stratum itself as a transient systemd unit (`systemd-run`): the
// reprovision handoff and a `--detach`ed change. Either must outlive the
// command that started it (its session, its terminal, the stack a reset
// stops), and the unit's journal is where an operator follows it.

import * as exec from "../exec/mod.ts";
import type { SelfCommand } from "./boot_unit.ts";

/** What {@linkcode startTransient} runs. */
export interface TransientUnit {
  /** The unit's name, `….service`: systemd refuses one that is loaded already. */
  readonly unit: string;
  readonly description: string;
  /** How systemd runs this program (its path, and the environment it needs). */
  readonly self: SelfCommand;
  /** stratum's arguments, after the program. */
  readonly args: readonly string[];
  /** `systemd-run --property=` assignments, e.g. `KillMode=mixed`. */
  readonly properties?: readonly string[];
  /**
   * STRATUM_FAILPOINT, passed on to the unit (a test aid: the unit's
   * environment is systemd's, not the caller's, so it is set only when the
   * caller has it).
   */
  readonly failpoint?: string | undefined;
  readonly signal?: AbortSignal;
}

/** systemd-run could not start the unit (its name taken, systemd unreachable): nothing runs. */
export class ErrUnitNotStarted extends Error {
  override name = "ErrUnitNotStarted";
  constructor(readonly unit: string, readonly reason: string) {
    super(`cannot start the unit ${unit}: ${reason}`);
  }
}

/** The systemd-run command line that starts `o` (collected once it ends, failed or not). */
export function transientArgv(o: TransientUnit): string[] {
  return [
    "systemd-run",
    `--unit=${o.unit}`,
    "--collect",
    `--description=${o.description}`,
    ...(o.properties ?? []).map((p) => `--property=${p}`),
    ...Object.entries(o.self.env ?? {}).map(([k, v]) => `--setenv=${k}=${v}`),
    ...(o.failpoint ? [`--setenv=STRATUM_FAILPOINT=${o.failpoint}`] : []),
    "--",
    ...o.self.argv,
    ...o.args,
  ];
}

/**
 * Starts stratum as the transient unit `o.unit` and returns once systemd
 * has started it (not when it ends). ErrUnitNotStarted, with systemd-run's
 * own reason, when it did not start.
 */
export async function startTransient(o: TransientUnit): Promise<void> {
  const r = await exec.run(transientArgv(o), {
    timeoutMs: 60_000,
    ...(o.signal ? { signal: o.signal } : {}),
  }).catch((e) => e as Error);
  if (r instanceof Error || r.code !== 0) {
    throw new ErrUnitNotStarted(
      o.unit,
      r instanceof Error ? r.message : r.stderr.trim() || `exit code ${r.code}`,
    );
  }
}
