import { join } from "node:path";
import { sha256Hex } from "../host/sha256.ts";
import { ErrUnsafeFile, readSmallFile } from "../host/small_file.ts";
import { BundleError } from "./errors.ts";
import { identityName } from "./identity.ts";
import { manifestName, parseManifest, recordName, signatureName } from "./manifest.ts";
import { keyOfSpki, type TrustedKey } from "./signature.ts";
import { checkSignature, identityOf, type VerifyOptions } from "./verify.ts";

/** One file of the record. */
export interface RecordedFile {
  readonly size: number;
  readonly mode: number;
}

/** The key that signed an installed copy, as its record keeps it (TrustedKey's id and spki). */
export interface RecordedSigner {
  readonly id: string;
  readonly spki: string;
}

/**
 * The record's text for `files` (path → size and mode) and the key whose
 * signature verified when the copy was made (none: it was not signed, or no
 * key was trusted).
 */
export function formatRecord(
  files: ReadonlyMap<string, RecordedFile>,
  signer?: RecordedSigner,
): string {
  return JSON.stringify({
    version: 1,
    files: Object.fromEntries(files),
    ...(signer ? { signer } : {}),
  }) + "\n";
}

/**
 * The key an installed copy's record names as the one that signed it when it
 * was installed, or undefined (no record, one an older stratum wrote without
 * it, or an unsigned copy). Only as good as the record: it is root's, in a
 * directory only root writes, as the copy it describes is; whoever can
 * rewrite it can rewrite the files too. Used to tell a release whose key was
 * retired from one whose signature no key made (node status).
 */
export async function readRecordedSigner(dir: string): Promise<TrustedKey | undefined> {
  const bytes = await small(join(dir, recordName), 64 << 20).catch(() => undefined);
  if (!bytes) return undefined;
  let s: unknown;
  try {
    s = JSON.parse(new TextDecoder().decode(bytes)).signer;
  } catch {
    return undefined;
  }
  const spki = (s as { spki?: unknown } | undefined)?.spki;
  if (typeof spki !== "string") return undefined;
  return await keyOfSpki(spki, `${join(dir, recordName)} (signer)`);
}

/** What the cheap check of an installed copy found. */
export interface Checked {
  readonly manifestDigest: string;
  readonly files: number;
  readonly bytes: number;
  readonly keyId?: string;
  /** The key that signed is no longer trusted (VerifyOptions.recordedSigner). */
  readonly keyRetired?: true;
  readonly warnings: readonly string[];
}

async function small(path: string, max: number): Promise<Uint8Array<ArrayBuffer> | undefined> {
  try {
    return await readSmallFile(path, max);
  } catch (err) {
    if (err instanceof ErrUnsafeFile) throw new BundleError("unsafe", err.message);
    throw err;
  }
}

/**
 * Checks an installed copy (stratum's own, under /var/lib/stratum/bundles)
 * without hashing its files: the manifest's signature against the node's
 * trust, BUNDLE.json and stack.json against the manifest (small), and every
 * listed file present as a regular file with the size and mode recorded
 * when it was copied. What the full check (verifyBundle) finds and this
 * does not: a file altered in place with its size kept. Every slot start
 * hashes the slot in full; `node status --verify` hashes the installed copy.
 */
export async function checkInstalled(dir: string, opts: VerifyOptions = {}): Promise<Checked> {
  const manifest = await small(join(dir, manifestName), 16 << 20);
  if (!manifest) {
    throw new BundleError("manifest", `Bundle ${dir} has no ${manifestName}`, manifestName);
  }
  const sig = await small(join(dir, signatureName), 4096);
  const { keyId, keyRetired, warnings } = await checkSignature(dir, manifest, sig, opts);
  const listed = parseManifest(new TextDecoder().decode(manifest), dir);
  const recordBytes = await small(join(dir, recordName), 64 << 20);
  if (!recordBytes) {
    throw new BundleError(
      "manifest",
      `Bundle ${dir} has no ${recordName} (installed by an older stratum): check it with stratum node status --verify`,
      recordName,
    );
  }
  let recorded: Record<string, RecordedFile>;
  try {
    recorded = JSON.parse(new TextDecoder().decode(recordBytes)).files ?? {};
  } catch {
    throw new BundleError("manifest", `Bundle ${dir}: ${recordName} is not JSON`, recordName);
  }
  const kept = new Map<string, Uint8Array>();
  let bytes = 0;
  for (const [f, want] of listed) {
    const st = await Deno.lstat(join(dir, f)).catch(() => undefined);
    const r = recorded[f];
    if (!st?.isFile) throw new BundleError("file", `Bundle ${dir}: ${f} is missing`, f);
    if (!r || st.size !== r.size || ((st.mode ?? 0) & 0o7777) !== r.mode) {
      throw new BundleError(
        "file",
        `Bundle ${dir}: ${f} is not as it was installed (size ${st.size}, mode ${
          ((st.mode ?? 0) & 0o7777).toString(8)
        }${r ? `; recorded ${r.size}, ${r.mode.toString(8)}` : "; not recorded"})`,
        f,
      );
    }
    bytes += st.size;
    if (f === identityName || f === "stack.json") {
      const b = (await small(join(dir, f), 1 << 20))!;
      if ((await sha256Hex(b)) !== want) {
        throw new BundleError("file", `Bundle ${dir}: ${f} does not match its sha256`, f);
      }
      kept.set(f, b);
    }
  }
  identityOf(kept, dir, keyId, opts, warnings);
  return {
    manifestDigest: await sha256Hex(manifest),
    files: listed.size,
    bytes,
    ...(keyId ? { keyId } : {}),
    ...(keyRetired ? { keyRetired } : {}),
    warnings,
  };
}
