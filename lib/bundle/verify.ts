import { sha256Hex } from "../host/sha256.ts";
import { BundleReader, type Inode } from "./_reader.ts";
import { BundleError } from "./errors.ts";
import { type BundleIdentity, identityName, parseIdentity } from "./identity.ts";
import {
  eachLimited,
  hashConcurrency,
  hashHandle,
  manifestName,
  parseManifest,
  readHandle,
  recordName,
  signatureName,
} from "./manifest.ts";
import { signer, type TrustedKey } from "./signature.ts";

/** Bounds on what is read before anything is verified: a manifest line per file, a raw signature. */
const maxManifestBytes = 16 << 20;
const maxSignatureBytes = 4096;
/** Files whose verified bytes are kept (the identity, the stack): parsed from what was hashed. */
const keptFiles = [identityName, "stack.json"];
const maxKeptBytes = 1 << 20;

/** A small file of the bundle, read whole and bounded; undefined when absent. */
async function small(
  b: BundleReader,
  file: string,
  max: number,
  read?: Map<string, Inode>,
): Promise<Uint8Array<ArrayBuffer> | undefined> {
  if (!(await b.exists(file))) return undefined;
  const fh = await b.file(file);
  const st = await fh.stat().catch(async (err) => {
    await fh.close();
    throw err;
  });
  read?.set(file, { dev: st.dev, ino: st.ino });
  const got = await readHandle(fh, max).finally(() => fh.close());
  if (!got) {
    throw new BundleError(
      "unsafe",
      `Bundle ${b.dir}: ${file} is larger than the ${max} bytes allowed: refused`,
      file,
    );
  }
  return got;
}

/**
 * The bytes a verification checked, for whatever this run does next: the
 * copy is held to `listed` and written from `manifest` and `signature`, and
 * the identity and stack are parsed from the bytes that were hashed, never
 * read again from a directory its carrier may change. Left out of JSON.
 */
export class VerifiedContent {
  readonly manifest: Uint8Array<ArrayBuffer>;
  readonly signature: Uint8Array<ArrayBuffer> | undefined;
  /** Path → sha256 hex, as the manifest lists them. */
  readonly listed: ReadonlyMap<string, string>;
  /** BUNDLE.json and stack.json as hashed, when the bundle has them. */
  readonly kept: ReadonlyMap<string, Uint8Array<ArrayBuffer>>;
  /** Each listed file's inode, as hashed: the copy must open that very file. */
  readonly inodes: ReadonlyMap<string, Inode>;
  /**
   * The files' hashes are still to be checked, by the copy that reads them
   * (stageBundle): everything else (signature, listing, inodes, BUNDLE.json
   * and stack.json) was. See VerifyOptions.deferHashes.
   */
  readonly deferred: boolean;
  /** The key whose signature verified, when one did: recorded with the installed copy. */
  readonly signer: { readonly id: string; readonly spki: string } | undefined;
  constructor(o: {
    manifest: Uint8Array<ArrayBuffer>;
    signature: Uint8Array<ArrayBuffer> | undefined;
    listed: ReadonlyMap<string, string>;
    kept: ReadonlyMap<string, Uint8Array<ArrayBuffer>>;
    inodes: ReadonlyMap<string, Inode>;
    deferred?: boolean;
    signer?: { readonly id: string; readonly spki: string } | undefined;
  }) {
    this.manifest = o.manifest;
    this.signature = o.signature;
    this.listed = o.listed;
    this.kept = o.kept;
    this.inodes = o.inodes;
    this.deferred = o.deferred ?? false;
    this.signer = o.signer;
  }
  toJSON(): undefined {
    return undefined;
  }
}

/** How a bundle is checked. */
export interface VerifyOptions {
  /** The node's trusted keys; with any, the bundle must be signed by one of them. */
  readonly trust?: readonly TrustedKey[];
  /** Where the keys came from, for messages (e.g. /etc/stratum/trust). */
  readonly trustDir?: string;
  /** Refuse an unsigned bundle even when the node trusts no keys. */
  readonly requireSignature?: boolean;
  /**
   * The mode the bundle is used as: its BUNDLE.json must name it. A bundle
   * whose signature was checked must have a BUNDLE.json (fail closed).
   */
  readonly mode?: string;
  /**
   * The directory is stratum's own installed copy: its record of sizes and
   * modes (installed_check.ts), which is not part of the signed bundle, is
   * allowed beside the listed files. A carrier's bundle never has one.
   */
  readonly installed?: boolean;
  /** A seam for tests of the carrier's races: called after each listed file was read and hashed. */
  readonly afterHash?: (file: string) => Promise<void>;
  /**
   * Check everything but the hashes of the files other than BUNDLE.json and
   * stack.json, which a copy made right after checks as it reads them
   * (stageBundle): the operator's bundle is then read once. The result is
   * `content.deferred` and is not a verification until that copy matched.
   */
  readonly deferHashes?: boolean;
  /**
   * The key an installed copy recorded as its signer when it was installed
   * (readRecordedSigner), for `node status` only: a signature by it that no
   * key trusted now made still verifies, with `keyRetired` and a warning,
   * so a key rotation does not make every running release "not verified".
   * Never given where a bundle is about to be run (install, upgrade,
   * rollback, migrate): there only the trust store decides.
   */
  readonly recordedSigner?: TrustedKey;
}

/** What a verified bundle is. */
export interface Verified {
  /** The sha256 of the manifest that was checked: names exactly what was verified. */
  readonly manifestDigest: string;
  readonly files: number;
  readonly bytes: number;
  /** The id of the trusted key whose signature verified, when one did. */
  readonly keyId?: string;
  /** The key that signed is no longer in the trust store (VerifyOptions.recordedSigner). */
  readonly keyRetired?: true;
  /** What its BUNDLE.json says, when it has one. */
  readonly identity?: BundleIdentity;
  /** Accepted, but the operator should know: unsigned, or signed with nothing to check it against. */
  readonly warnings: readonly string[];
  /** What was checked, byte for byte (not part of a JSON report). */
  readonly content: VerifiedContent;
}

/**
 * Checks a bundle's mode directory: first its manifest's signature against
 * the trusted keys, then every file against the manifest (`sha256sum -c`
 * can check the same by hand), streaming each file in fixed-size chunks,
 * several at once. Refuses, naming the bundle and the file or key: no
 * manifest, a malformed line or one leaving the bundle, a symlink or device,
 * a file missing, not listed or altered; with trusted keys, no signature or
 * one no trusted key made. Every file is opened without following a link or
 * blocking and must be the inode the listing saw (see BundleReader), and each
 * small file that decides something (manifest, signature, BUNDLE.json,
 * stack.json) is read once: what is parsed is what was hashed.
 */
export async function verifyBundle(dir: string, opts: VerifyOptions = {}): Promise<Verified> {
  // The bundle's directory itself must be a real directory: a link would
  // let whoever owns its target change what was verified after the fact.
  const st = await Deno.lstat(dir).catch(() => undefined);
  if (st?.isSymlink) {
    throw new BundleError("unsafe", `Bundle ${dir} is a symlink; bundles are plain directories`);
  }
  if (!st?.isDirectory) {
    throw new BundleError(
      "manifest",
      `Bundle ${dir} has no ${manifestName} manifest (or does not exist)`,
      manifestName,
    );
  }
  const b = await BundleReader.open(dir);
  const read = new Map<string, Inode>();
  const manifest = await small(b, manifestName, maxManifestBytes, read);
  if (!manifest) {
    throw new BundleError(
      "manifest",
      `Bundle ${dir} has no ${manifestName} manifest (or does not exist)`,
      manifestName,
    );
  }
  const sig = await small(b, signatureName, maxSignatureBytes, read);

  const { keyId, keyRetired, signer: key, warnings } = await checkSignature(
    dir,
    manifest,
    sig,
    opts,
  );

  const listed = parseManifest(new TextDecoder().decode(manifest), dir);
  const tree = await b.list();
  const found = new Map(tree.map((f) => [f.path, f.size]));
  for (const f of tree) {
    const own = f.path === manifestName || f.path === signatureName ||
      (opts.installed === true && f.path === recordName);
    if (!own && !listed.has(f.path)) {
      throw new BundleError("file", `Bundle ${dir}: ${f.path} is not in ${manifestName}`, f.path);
    }
  }
  for (const f of listed.keys()) {
    if (!found.has(f)) throw new BundleError("file", `Bundle ${dir}: ${f} is missing`, f);
  }
  // The manifest and signature checked are the ones the listing saw.
  for (const [f, was] of read) {
    const now = b.inodes.get(f);
    if (now?.dev !== was.dev || now.ino !== was.ino) {
      throw new BundleError("unsafe", `Bundle ${dir}: ${f} changed while it was verified`, f);
    }
  }
  const kept = new Map<string, Uint8Array<ArrayBuffer>>();
  await eachLimited([...listed], hashConcurrency(), async ([f, want]) => {
    let got: string;
    if (keptFiles.includes(f)) {
      const bytes = (await small(b, f, maxKeptBytes))!;
      got = await sha256Hex(bytes);
      kept.set(f, bytes);
    } else if (opts.deferHashes) {
      return;
    } else {
      const fh = await b.file(f);
      got = await hashHandle(fh).finally(() => fh.close());
    }
    if (got !== want) {
      throw new BundleError("file", `Bundle ${dir}: ${f} does not match its sha256`, f);
    }
    await opts.afterHash?.(f);
  });
  let bytes = 0;
  for (const f of listed.keys()) bytes += found.get(f)!;
  // The identity is the bytes that matched the manifest the signature
  // covers: one read, so it cannot say one thing to the hash and another to
  // the version check.
  const identity = identityOf(kept, dir, keyId, opts, warnings);
  return {
    manifestDigest: await sha256Hex(manifest),
    files: listed.size,
    bytes,
    ...(keyId ? { keyId } : {}),
    ...(keyRetired ? { keyRetired } : {}),
    ...(identity ? { identity } : {}),
    warnings,
    content: new VerifiedContent({
      manifest,
      signature: sig,
      listed,
      kept,
      inodes: new Map([...listed.keys()].map((f) => [f, b.inodes.get(f)!])),
      deferred: opts.deferHashes === true,
      signer: key ? { id: key.id, spki: key.spki } : undefined,
    }),
  };
}

/**
 * Checks a manifest's signature against the node's trust (fails closed:
 * with any trusted key, only a signature by one of them passes). Returns the
 * key that signed and what the operator should know.
 */
export async function checkSignature(
  dir: string,
  manifest: Uint8Array<ArrayBuffer>,
  sig: Uint8Array<ArrayBuffer> | undefined,
  opts: VerifyOptions,
): Promise<
  {
    keyId: string | undefined;
    keyRetired?: true;
    signer?: TrustedKey;
    warnings: string[];
  }
> {
  const trust = opts.trust ?? [];
  const trustDir = opts.trustDir ?? "the trust store";
  const warnings: string[] = [];
  let keyId: string | undefined;
  const ids = trust.map((k) => k.id).join(", ");
  if (trust.length > 0) {
    if (!sig) {
      throw new BundleError(
        "unsigned",
        `Bundle ${dir} is not signed (no ${signatureName}); this node trusts only key ${ids} (${trustDir})`,
        signatureName,
      );
    }
    const k = await signer(manifest, sig, trust);
    // Trusted when it was installed, and its key since removed (a key
    // rotation): still a signature of these bytes by that key, said so.
    const retired = !k && opts.recordedSigner &&
        !trust.some((t) => t.id === opts.recordedSigner!.id)
      ? await signer(manifest, sig, [opts.recordedSigner])
      : undefined;
    if (retired) {
      warnings.push(
        `verified by a key no longer trusted: ${retired.id}, recorded when it was installed, is not in ${trustDir} (trusted: ${ids}); upgrade to a release signed by a trusted key`,
      );
      return { keyId: retired.id, keyRetired: true, signer: retired, warnings };
    }
    if (!k) {
      const what = sig.length === 64 ? "is not" : `is malformed (${sig.length} bytes, not 64), not`;
      throw new BundleError(
        "untrusted",
        `Bundle ${dir}: ${signatureName} ${what} a signature of ${manifestName} by a trusted key (trusted: ${ids} in ${trustDir})`,
        signatureName,
      );
    }
    keyId = k.id;
    return { keyId, signer: k, warnings };
  } else if (opts.requireSignature) {
    throw new BundleError(
      sig ? "untrusted" : "unsigned",
      `Bundle ${dir}: a signature is required, but no trusted key is installed in ${trustDir}`,
      signatureName,
    );
  } else {
    warnings.push(
      sig
        ? `bundle ${dir} is signed, but no trusted key is installed in ${trustDir}: the signature was not checked`
        : `bundle ${dir} is not signed and no trusted key is installed in ${trustDir}: accepted on its checksums alone`,
    );
  }

  return { keyId, warnings };
}

/** The identity BUNDLE.json's verified bytes declare, held to the signature and the mode asked for. */
export function identityOf(
  kept: ReadonlyMap<string, Uint8Array>,
  dir: string,
  keyId: string | undefined,
  opts: VerifyOptions,
  warnings: string[],
): BundleIdentity | undefined {
  const idBytes = kept.get(identityName);
  const identity = idBytes && parseIdentity(idBytes, dir);
  if (!identity && keyId) {
    throw new BundleError(
      "manifest",
      `Bundle ${dir} is signed but names no mode and version (${identityName}): re-make it with stratum bundle make --version V, then sign it`,
      identityName,
    );
  }
  if (identity && opts.mode !== undefined && identity.mode !== opts.mode) {
    throw new BundleError(
      "mode",
      `Bundle ${dir} is a ${identity.mode} bundle (${identityName}), not ${opts.mode}`,
      identityName,
    );
  }
  if (!identity) {
    warnings.push(`bundle ${dir} names no mode and version (${identityName})`);
  }
  return identity;
}
