import { join } from "node:path";
import { readSmallFile } from "../host/small_file.ts";
import { writeFileDurable } from "../host/durable_file.ts";
import { BundleError } from "./errors.ts";

/**
 * The file in each mode directory that says what the bundle is: its mode
 * and its version. It is listed in the manifest like any file, so the
 * signature over the manifest covers it: a signed `host/` cannot pass as
 * `nspawn/`, and a node can refuse an older version than it runs.
 */
export const identityName = "BUNDLE.json";

/** What a bundle's BUNDLE.json says. */
export interface BundleIdentity {
  readonly mode: string;
  /** Dotted numbers, compared numerically: `1`, `1.2`, `1.2.10`. */
  readonly version: string;
}

const versionPattern = /^\d{1,9}(\.\d{1,9}){0,3}$/;

/** Why `v` is not a bundle version, or undefined. */
export function versionProblem(v: unknown): string | undefined {
  return typeof v === "string" && versionPattern.test(v)
    ? undefined
    : `version ${JSON.stringify(v)} is not dotted numbers (1, 1.2, 1.2.10)`;
}

/** Compares two versions numerically, part by part: negative when a < b. */
export function compareVersions(a: string, b: string): number {
  const pa = a.split(".").map(Number);
  const pb = b.split(".").map(Number);
  for (let i = 0; i < Math.max(pa.length, pb.length); i++) {
    const d = (pa[i] ?? 0) - (pb[i] ?? 0);
    if (d !== 0) return d;
  }
  return 0;
}

/** The identity a mode directory declares; undefined when it has no BUNDLE.json. */
export async function readIdentity(dir: string): Promise<BundleIdentity | undefined> {
  const bytes = await readSmallFile(join(dir, identityName), 64 * 1024).catch((err) => {
    throw new BundleError(
      "manifest",
      `Bundle ${dir}: ${identityName}: ${err.message}`,
      identityName,
    );
  });
  return bytes && parseIdentity(bytes, dir);
}

/** The identity BUNDLE.json's bytes declare (`dir` names the bundle in errors). */
export function parseIdentity(bytes: Uint8Array, dir: string): BundleIdentity {
  let o: { mode?: unknown; version?: unknown };
  try {
    o = JSON.parse(new TextDecoder().decode(bytes));
  } catch {
    throw new BundleError("manifest", `Bundle ${dir}: ${identityName} is not JSON`, identityName);
  }
  const problem = typeof o?.mode !== "string" ? `"mode" is missing` : versionProblem(o.version);
  if (problem) {
    throw new BundleError("manifest", `Bundle ${dir}: ${identityName}: ${problem}`, identityName);
  }
  return { mode: o.mode as string, version: o.version as string };
}

/** Writes BUNDLE.json for a mode directory (before its manifest is made). */
export async function writeIdentity(dir: string, id: BundleIdentity): Promise<void> {
  const problem = versionProblem(id.version);
  if (problem) throw new BundleError("manifest", `Bundle ${dir}: ${problem}`, identityName);
  // Atomic: a full disk or a crash leaves the old BUNDLE.json or the new one, never a torn one.
  await writeFileDurable(join(dir, identityName), JSON.stringify(id) + "\n", { mode: 0o644 });
}
