import { durationMs } from "../duration/mod.ts";
import { ErrUsage } from "./exit.ts";

export { formatDuration } from "../duration/mod.ts";

/**
 * A flag's Go-style duration ("5m", "30s", "1m30s", "1.5s", "500ms") in
 * milliseconds, as kubectl's own flags take them. Zero and negative
 * durations, and anything else, are a ErrUsage naming the flag.
 */
export function parseDuration(flag: string, text: string, allowZero = false): number {
  const ms = durationMs(text, allowZero);
  if (ms === undefined) {
    throw new ErrUsage(
      `invalid ${flag} ${JSON.stringify(text)}: want a positive duration such as 30s, 5m or 1m30s`,
    );
  }
  return ms;
}
