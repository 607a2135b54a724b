import { join } from "node:path";
import { ErrUnsafeFile, readSmallFile } from "../host/small_file.ts";
import { sha256Hex } from "../host/sha256.ts";
import { BundleError } from "./errors.ts";

/** A public key a node trusts to sign bundles. */
export interface TrustedKey {
  /** The first 16 hex digits of the sha256 of its DER (SPKI) encoding. */
  readonly id: string;
  /** Where it was read from. */
  readonly source: string;
  readonly key: CryptoKey;
  /** Its SPKI (DER) encoding, base64: what an installed copy records of its signer. */
  readonly spki: string;
}

/** The DER bytes of a PEM block with `label` (e.g. "PUBLIC KEY"). */
function pemBody(pem: string, label: string): Uint8Array<ArrayBuffer> | undefined {
  const m = new RegExp(`-----BEGIN ${label}-----([A-Za-z0-9+/=\\s]+)-----END ${label}-----`)
    .exec(pem);
  if (!m) return undefined;
  const bin = atob(m[1]!.replace(/\s+/g, ""));
  return Uint8Array.from(bin, (c) => c.charCodeAt(0));
}

/** The key id of an SPKI encoding: what `openssl pkey -pubin -outform DER | sha256sum` starts with. */
export async function keyIdOf(spki: Uint8Array<ArrayBuffer>): Promise<string> {
  return (await sha256Hex(spki)).slice(0, 16);
}

/** The SPKI encoding of a raw 32-byte Ed25519 public key (RFC 8410). */
function spkiOfRaw(raw: Uint8Array): Uint8Array<ArrayBuffer> {
  const prefix = [0x30, 0x2a, 0x30, 0x05, 0x06, 0x03, 0x2b, 0x65, 0x70, 0x03, 0x21, 0x00];
  return Uint8Array.from([...prefix, ...raw]);
}

/** Reads an Ed25519 public key (PEM, "PUBLIC KEY", as `openssl pkey -pubout` writes it). */
export async function readPublicKey(pem: string, source: string): Promise<TrustedKey> {
  const der = pemBody(pem, "PUBLIC KEY");
  try {
    if (!der) throw new Error("no PUBLIC KEY block");
    const key = await crypto.subtle.importKey("spki", der, { name: "Ed25519" }, true, ["verify"]);
    return { id: await keyIdOf(der), source, key, spki: btoa(String.fromCharCode(...der)) };
  } catch (err) {
    throw new BundleError(
      "trust",
      `${source} is not an Ed25519 public key in PEM (${err instanceof Error ? err.message : err})`,
    );
  }
}

/**
 * A public key from its SPKI encoding in base64 (TrustedKey.spki, as an
 * installed copy's record keeps its signer), or undefined when it is not an
 * Ed25519 key.
 */
export async function keyOfSpki(spki: string, source: string): Promise<TrustedKey | undefined> {
  try {
    const der = Uint8Array.from(atob(spki), (c) => c.charCodeAt(0));
    const key = await crypto.subtle.importKey("spki", der, { name: "Ed25519" }, true, ["verify"]);
    return { id: await keyIdOf(der), source, key, spki };
  } catch {
    return undefined;
  }
}

/** A signing key and the id of its public half. */
export interface SigningKey {
  readonly id: string;
  readonly key: CryptoKey;
  /** The public half, PEM: what a node installs in /etc/stratum/trust. */
  readonly publicPem: string;
}

/** Reads an Ed25519 private key (PEM, "PRIVATE KEY", as `openssl genpkey -algorithm ed25519` writes it). */
export async function readPrivateKey(pem: string, source: string): Promise<SigningKey> {
  const der = pemBody(pem, "PRIVATE KEY");
  try {
    if (!der) throw new Error("no PRIVATE KEY block");
    const key = await crypto.subtle.importKey("pkcs8", der, { name: "Ed25519" }, true, ["sign"]);
    const jwk = await crypto.subtle.exportKey("jwk", key);
    const raw = Uint8Array.from(
      atob(jwk.x!.replace(/-/g, "+").replace(/_/g, "/")),
      (c) => c.charCodeAt(0),
    );
    const spki = spkiOfRaw(raw);
    const b64 = btoa(String.fromCharCode(...spki));
    return {
      id: await keyIdOf(spki),
      key,
      publicPem: `-----BEGIN PUBLIC KEY-----\n${b64}\n-----END PUBLIC KEY-----\n`,
    };
  } catch (err) {
    throw new BundleError(
      "trust",
      `${source} is not an Ed25519 private key in PEM (${
        err instanceof Error ? err.message : err
      })`,
    );
  }
}

/**
 * The keys in a trust directory (`*.pem`, sorted by name). No directory: no
 * keys. Everything else fails closed, naming the file: a trust store that is
 * a link, or cannot be read; a file in it that is not a `*.pem` Ed25519
 * public key (a `release.pub` is not silently ignored), a link, a FIFO; the
 * directory or a key owned by another user than root (or the user running
 * stratum) or writable by group or others, since whoever can write there
 * decides what root runs.
 */
export async function loadTrust(dir: string): Promise<TrustedKey[]> {
  const st = await Deno.lstat(dir).catch((err) => {
    if (err instanceof Deno.errors.NotFound) return undefined;
    throw err;
  });
  if (!st) return [];
  if (st.isSymlink) {
    throw new BundleError("trust", `Trust store ${dir} is a symlink: it must be a real directory`);
  }
  if (!st.isDirectory) throw new BundleError("trust", `Trust store ${dir} is not a directory`);
  guarded(dir, st);
  const names: string[] = [];
  for await (const e of Deno.readDir(dir)) {
    if (!e.name.endsWith(".pem")) {
      throw new BundleError(
        "trust",
        `Trust store ${dir} holds ${e.name}, which is not a *.pem key: remove it, or name an Ed25519 public key KEY.pem`,
        e.name,
      );
    }
    names.push(e.name);
  }
  const keys: TrustedKey[] = [];
  for (const n of names.sort()) {
    const path = join(dir, n);
    let pem: Uint8Array | undefined;
    try {
      pem = await readSmallFile(path, 64 * 1024);
    } catch (err) {
      if (err instanceof ErrUnsafeFile) throw new BundleError("trust", err.message, n);
      throw err;
    }
    if (!pem) throw new BundleError("trust", `Trust key ${path} vanished while it was read`, n);
    guarded(path, await Deno.lstat(path));
    keys.push(await readPublicKey(new TextDecoder().decode(pem), path));
  }
  return keys;
}

/** Refuses a trust path another user owns or that group or others can write. */
function guarded(path: string, st: Deno.FileInfo): void {
  const uid = Deno.uid();
  if (st.uid !== 0 && st.uid !== uid) {
    throw new BundleError("trust", `${path} is owned by uid ${st.uid}, not root: refused as trust`);
  }
  if ((st.mode ?? 0) & 0o022) {
    throw new BundleError(
      "trust",
      `${path} is writable by group or others (mode ${
        ((st.mode ?? 0) & 0o7777).toString(8)
      }): refused as trust`,
    );
  }
}

/** The raw 64-byte Ed25519 signature of `data`, as `openssl pkeyutl -sign -rawin` makes it. */
export async function sign(data: Uint8Array<ArrayBuffer>, key: SigningKey): Promise<Uint8Array> {
  return new Uint8Array(await crypto.subtle.sign({ name: "Ed25519" }, key.key, data));
}

/** The trusted key whose signature `sig` is over `data`, or undefined. */
export async function signer(
  data: Uint8Array<ArrayBuffer>,
  sig: Uint8Array<ArrayBuffer>,
  keys: readonly TrustedKey[],
): Promise<TrustedKey | undefined> {
  if (sig.length !== 64) return undefined;
  for (const k of keys) {
    if (await crypto.subtle.verify({ name: "Ed25519" }, k.key, sig, data)) return k;
  }
  return undefined;
}
