import { ErrUsage } from "./exit.ts";

const units: Readonly<Record<string, number>> = { ms: 1, s: 1000, m: 60_000, h: 3_600_000 };

/**
 * Parses a Go-style duration ("5m", "30s", "1m30s", "1.5s", "500ms") into
 * milliseconds, as kubectl's own flags take them. Zero and negative
 * durations, and anything else, are a ErrUsage naming the flag.
 */
export function parseDuration(flag: string, text: string, allowZero = false): number {
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
  if (s === "" || at !== s.length || !(total > 0 || (allowZero && total === 0))) {
    throw new ErrUsage(
      `invalid ${flag} ${JSON.stringify(text)}: want a positive duration such as 30s, 5m or 1m30s`,
    );
  }
  return total;
}

/**
 * A duration as parseDuration takes it back, the way an operator would type
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
