import { createHash } from "node:crypto";
import { join } from "node:path";
import { BundleError } from "./errors.ts";

/** A public key a node trusts to sign bundles. */
export interface TrustedKey {
  /** The first 16 hex digits of the sha256 of its DER (SPKI) encoding. */
  readonly id: string;
  /** Where it was read from. */
  readonly source: string;
  readonly key: CryptoKey;
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
export function keyIdOf(spki: Uint8Array): string {
  return createHash("sha256").update(spki).digest("hex").slice(0, 16);
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
    return { id: keyIdOf(der), source, key };
  } catch (err) {
    throw new BundleError(
      "trust",
      `${source} is not an Ed25519 public key in PEM (${err instanceof Error ? err.message : err})`,
    );
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
      id: keyIdOf(spki),
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
 * The keys in a trust directory (`*.pem`, sorted by name). No directory, or
 * none in it: no keys. A file that is not an Ed25519 public key is an error:
 * a trust store that cannot be read must not silently trust less.
 */
export async function loadTrust(dir: string): Promise<TrustedKey[]> {
  const names: string[] = [];
  try {
    for await (const e of Deno.readDir(dir)) if (e.name.endsWith(".pem")) names.push(e.name);
  } catch (err) {
    if (err instanceof Deno.errors.NotFound) return [];
    throw err;
  }
  const keys: TrustedKey[] = [];
  for (const n of names.sort()) {
    const path = join(dir, n);
    keys.push(await readPublicKey(await Deno.readTextFile(path), path));
  }
  return keys;
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
