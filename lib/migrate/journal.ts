import { isMode, isSlot, type Mode } from "../isolation/mod.ts";
import { isStep, type Step } from "./step.ts";
import { isStrategy, type Strategy, StrategyInPlace } from "./strategy.ts";

/** The schema version of a Journal. */
export const JournalVersion = 1;

/**
 * The small state file of a migration in progress. It is written atomically
 * before each step (see InPlaceSpec.record), so a process that restarts
 * mid-migration can tell what may have happened and resume or roll back. It
 * holds no credentials.
 */
export interface Journal {
  readonly version: number;
  readonly strategy: Strategy;
  readonly from: Mode;
  readonly to: Mode;
  /** The blue/green slots of an in-place migration. Reprovision leaves them out. */
  readonly sourceSlot?: string;
  readonly targetSlot?: string;
  readonly step: Step;
  readonly startedAt: Date;
  readonly updatedAt: Date;
  /**
   * Counts the resumes since the step last changed (and, for a reprovision,
   * the handoff runs), so recovery can give up after a bounded number.
   */
  readonly attempts?: number;
  /** The failure that ended the migration, for operators. */
  readonly message?: string;
}

/** Serialises a journal with the seed's field names, RFC 3339 times, empty fields left out. */
export function encodeJournal(j: Journal): string {
  const out: Record<string, unknown> = {
    version: j.version,
    strategy: j.strategy,
    from: j.from,
    to: j.to,
  };
  if (j.sourceSlot) out.sourceSlot = j.sourceSlot;
  if (j.targetSlot) out.targetSlot = j.targetSlot;
  out.step = j.step;
  out.startedAt = j.startedAt.toISOString();
  out.updatedAt = j.updatedAt.toISOString();
  if (j.attempts) out.attempts = j.attempts;
  if (j.message) out.message = j.message;
  return JSON.stringify(out, null, 2) + "\n";
}

/**
 * Parses and checks a journal. Throws a plain Error naming what is wrong;
 * the store wraps it with the file's path.
 */
export function decodeJournal(text: string): Journal {
  if (text.trim() === "") throw new Error("file is empty");
  let raw: unknown;
  try {
    raw = JSON.parse(text);
  } catch (err) {
    const why = (err instanceof Error ? err.message : String(err)).replace(/\s+/g, " ");
    throw new Error(`not JSON (${why})`);
  }
  if (typeof raw !== "object" || raw === null || Array.isArray(raw)) {
    throw new Error("not a JSON object");
  }
  const o = raw as Record<string, unknown>;
  if (o.version !== JournalVersion) {
    throw new Error(
      typeof o.version === "number" && o.version > JournalVersion
        ? `version ${o.version} was written by a newer stratum (this one reads ${JournalVersion})`
        : `unsupported version ${JSON.stringify(o.version)}`,
    );
  }
  if (!isStrategy(o.strategy)) throw new Error(`unknown strategy ${JSON.stringify(o.strategy)}`);
  if (!isMode(o.from)) throw new Error(`unknown mode in "from": ${JSON.stringify(o.from)}`);
  if (!isMode(o.to)) throw new Error(`unknown mode in "to": ${JSON.stringify(o.to)}`);
  // from === to is an upgrade: the same mode, a new bundle, through the other slot.
  if (o.from === o.to && o.strategy !== StrategyInPlace) {
    throw new Error(`"from" and "to" are both ${o.from}: only an in-place upgrade keeps the mode`);
  }
  if (!isStep(o.step)) throw new Error(`unknown step ${JSON.stringify(o.step)}`);
  for (const k of ["sourceSlot", "targetSlot"] as const) {
    if (o[k] !== undefined && !isSlot(o[k])) {
      throw new Error(`unknown slot in "${k}": ${JSON.stringify(o[k])}`);
    }
  }
  if (
    o.attempts !== undefined &&
    !(typeof o.attempts === "number" && Number.isInteger(o.attempts) && o.attempts >= 0 &&
      o.attempts <= maxAttemptsField)
  ) {
    throw new Error(`"attempts" is not a count: ${JSON.stringify(o.attempts)}`);
  }
  if (o.message !== undefined && typeof o.message !== "string") {
    throw new Error(`"message" is not a string`);
  }
  const startedAt = parseTime(o.startedAt, "startedAt");
  const updatedAt = parseTime(o.updatedAt, "updatedAt");
  const j: Journal = {
    version: JournalVersion,
    strategy: o.strategy,
    from: o.from,
    to: o.to,
    step: o.step,
    startedAt,
    updatedAt,
    ...(typeof o.sourceSlot === "string" ? { sourceSlot: o.sourceSlot } : {}),
    ...(typeof o.targetSlot === "string" ? { targetSlot: o.targetSlot } : {}),
    ...(typeof o.attempts === "number" && o.attempts > 0 ? { attempts: o.attempts } : {}),
    ...(typeof o.message === "string" && o.message !== "" ? { message: o.message } : {}),
  };
  return j;
}

/**
 * The largest `attempts` a journal may hold. The loop guard stops at a few;
 * anything near this is a damaged file, not a count.
 */
const maxAttemptsField = 1000;

const rfc3339 = /^(\d{4})-(\d{2})-(\d{2})T(\d{2}):(\d{2}):(\d{2})(\.\d+)?(Z|[+-](\d{2}):(\d{2}))$/;

/**
 * Parses an RFC 3339 time strictly. `Date.parse` accepts what a clock never
 * shows (`2024-02-30` becomes March 1st, `T24:00` the next day), and a journal
 * holding such a time was not written by stratum.
 */
function parseTime(v: unknown, field: string): Date {
  const bad = () => new Error(`"${field}" is not an RFC 3339 time: ${JSON.stringify(v)}`);
  if (typeof v !== "string") throw bad();
  const m = rfc3339.exec(v);
  if (!m) throw bad();
  const [y, mo, d, h, mi, s] = m.slice(1, 7).map(Number) as [
    number,
    number,
    number,
    number,
    number,
    number,
  ];
  const offH = m[9] === undefined ? 0 : Number(m[9]);
  const offM = m[10] === undefined ? 0 : Number(m[10]);
  const civil = new Date(Date.UTC(y, mo - 1, d, h, mi, s));
  if (
    civil.getUTCFullYear() !== y || civil.getUTCMonth() !== mo - 1 || civil.getUTCDate() !== d ||
    h > 23 || mi > 59 || s > 59 || offH > 23 || offM > 59
  ) {
    throw bad();
  }
  return new Date(v);
}
