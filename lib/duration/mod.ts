// Go-style durations ("5m", "1m30s", "500ms"), the way kubectl's own flags
// take them, in both directions. Neutral ground: the CLI parses flags with
// it and the node's step lines print with it, and neither depends on the
// other.

const units: Readonly<Record<string, number>> = { ms: 1, s: 1000, m: 60_000, h: 3_600_000 };

/**
 * The milliseconds `text` says ("5m", "30s", "1m30s", "1.5s", "500ms"), or
 * undefined when it is not a duration or not positive ("0" is zero when
 * `allowZero`). The caller says which flag was wrong.
 */
export function durationMs(text: string, allowZero = false): number | undefined {
  const s = text.trim();
  if (allowZero && s === "0") return 0;
  const re = /(\d+(?:\.\d+)?)(ms|s|m|h)/y;
  let total = 0;
  let at = 0;
  while (at < s.length) {
    re.lastIndex = at;
    const m = re.exec(s);
    if (!m) break;
    total += Number(m[1]) * units[m[2]!]!;
    at = re.lastIndex;
  }
  if (s === "" || at !== s.length || !(total > 0 || (allowZero && total === 0))) return undefined;
  return total;
}

/**
 * A duration as durationMs takes it back, the way an operator would type
 * the flag: 2m, 1m30s, 1.5s, 500ms. Messages that name a flag's value say it
 * in the flag's own words.
 */
export function formatDuration(ms: number): string {
  if (ms < 1000) return `${ms}ms`;
  const h = Math.floor(ms / 3_600_000);
  const m = Math.floor((ms % 3_600_000) / 60_000);
  const s = (ms % 60_000) / 1000;
  return `${h ? `${h}h` : ""}${m ? `${m}m` : ""}${s ? `${s}s` : ""}`;
}
