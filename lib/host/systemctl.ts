import * as exec from "../exec/mod.ts";

/** A systemctl call that failed, with the unit and systemd's own message. */
export class UnitError extends Error {
  override name = "UnitError";
  readonly unit: string;
  readonly action: string;
  /** systemd's words: the stderr of systemctl, or the unit's Result when that says more. */
  readonly detail: string;
  constructor(action: string, unit: string, detail: string) {
    super(`systemctl ${action} ${unit}: ${detail}`);
    this.unit = unit;
    this.action = action;
    this.detail = detail;
  }
}

/** Options for {@linkcode Systemctl}. */
export interface SystemctlOptions {
  /** Deadline of each call, in ms. Default 90 s (systemd's own default stop timeout). */
  readonly timeout?: number;
}

/** Options of one call. */
export interface UnitCallOptions {
  readonly signal?: AbortSignal;
}

/**
 * systemctl through dax, each call under a deadline. Failures become
 * UnitError carrying systemd's message; `start` adds the unit's Result and
 * exit status, which is what the journal would say (the sandbox logs to kmsg,
 * where `journalctl -u` does not show systemd's own lines).
 */
export class Systemctl {
  readonly timeout: number;
  constructor(opts: SystemctlOptions = {}) {
    this.timeout = opts.timeout ?? 90_000;
  }

  async start(unit: string, opts: UnitCallOptions = {}): Promise<void> {
    const r = await this.#run(["start", unit], opts);
    if (r.code !== 0) {
      const why = await this.#whyFailed(unit);
      throw new UnitError("start", unit, [lastLine(r.stderr), why].filter(Boolean).join("; "));
    }
  }

  /**
   * Stops one unit, or several in one call (one systemd transaction, one
   * process: a migration's stop is part of its downtime). A unit that is
   * not loaded is already stopped; any other failure is a UnitError.
   */
  async stop(units: string | readonly string[], opts: UnitCallOptions = {}): Promise<void> {
    const list = typeof units === "string" ? [units] : units;
    if (list.length === 0) return;
    const r = await this.#run(["stop", ...list], opts);
    if (r.code === 0) return;
    // One "Failed to stop U: ..." line per unit that failed; warnings aside.
    const failed = r.stderr.split("\n").filter((l) => /^(Failed to|Job for)/.test(l));
    const real = failed.filter((l) => !/not loaded/.test(l));
    if (real.length > 0 || failed.length === 0) {
      throw new UnitError("stop", list.join(" "), real.at(-1) ?? lastLine(r.stderr));
    }
  }

  /**
   * Whether one unit is active. One unit per call on purpose: `is-active A B`
   * succeeds when any of them is.
   */
  async isActive(unit: string, opts: UnitCallOptions = {}): Promise<boolean> {
    const r = await this.#run(["is-active", "--quiet", unit], opts);
    return r.code === 0;
  }

  async daemonReload(opts: UnitCallOptions = {}): Promise<void> {
    const r = await this.#run(["daemon-reload"], opts);
    if (r.code !== 0) throw new UnitError("daemon-reload", "", lastLine(r.stderr));
  }

  async enable(unit: string, opts: UnitCallOptions = {}): Promise<void> {
    const r = await this.#run(["enable", unit], opts);
    if (r.code !== 0) throw new UnitError("enable", unit, lastLine(r.stderr));
  }

  async disable(unit: string, opts: UnitCallOptions = {}): Promise<void> {
    const r = await this.#run(["disable", unit], opts);
    if (r.code !== 0 && !/not loaded|does not exist/.test(r.stderr)) {
      throw new UnitError("disable", unit, lastLine(r.stderr));
    }
  }

  /** Clears a failed unit's state, so a later start is not refused and stop leaves no trace. */
  async resetFailed(unit: string, opts: UnitCallOptions = {}): Promise<void> {
    await this.#run(["reset-failed", unit], opts);
  }

  /** Reads unit properties (`systemctl show -p`). */
  async show(
    unit: string,
    props: string[],
    opts: UnitCallOptions = {},
  ): Promise<Record<string, string>> {
    const r = await this.#run(["show", unit, ...props.map((p) => `--property=${p}`)], opts);
    const out: Record<string, string> = {};
    for (const line of r.stdout.split("\n")) {
      const i = line.indexOf("=");
      if (i > 0) out[line.slice(0, i)] = line.slice(i + 1);
    }
    return out;
  }

  async #whyFailed(unit: string): Promise<string> {
    const p = await this.show(unit, ["Result", "ExecMainCode", "ExecMainStatus"]).catch(() => ({}));
    const parts = Object.entries(p).filter(([, v]) => v !== "" && v !== "success" && v !== "0");
    return parts.map(([k, v]) => `${k}=${v}`).join(" ");
  }

  async #run(args: string[], opts: UnitCallOptions): Promise<exec.Output> {
    try {
      return await exec.run(["systemctl", "--no-ask-password", ...args], {
        timeoutMs: this.timeout,
        signal: opts.signal,
      });
    } catch (err) {
      if (err instanceof exec.ErrTimeout) {
        throw new UnitError(
          args[0]!,
          args[1] ?? "",
          opts.signal?.aborted ? "stopped (aborted)" : `no answer after ${this.timeout} ms`,
        );
      }
      throw err;
    }
  }
}

function lastLine(s: string): string {
  return s.trim().split("\n").filter((l) => l.trim() !== "").pop() ?? "";
}
