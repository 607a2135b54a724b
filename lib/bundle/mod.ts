/**
 * Bundles: what a node runs, one directory per isolation mode, each with a
 * `SHA256SUMS` manifest and, when signed, `SHA256SUMS.sig`, the raw Ed25519
 * signature of that manifest (interchangeable with `openssl pkeyutl -rawin`).
 * A node trusts the public keys in /etc/stratum/trust/*.pem: with any
 * installed, only a bundle one of them signed is used.
 *
 * Verification streams each file in fixed-size chunks, several at once, so
 * memory does not grow with the bundle; installation copies, fsyncs,
 * verifies and swaps a symlink, so the installed path is always a whole
 * verified bundle.
 *
 * @example Verify a bundle against a node's trust store
 * ```ts
 * import * as bundle from "./mod.ts";
 * const trust = await bundle.loadTrust("/etc/stratum/trust");
 * const v = await bundle.verifyBundle("/srv/bundle/host", { trust });
 * console.log(v.files, v.bytes, v.keyId);
 * ```
 *
 * @module
 */

export { BundleError, type BundleFault } from "./errors.ts";
export {
  formatManifest,
  hashFile,
  listTree,
  makeManifest,
  manifestable,
  manifestName,
  parseManifest,
  recordName,
  signatureName,
  type TreeFile,
} from "./manifest.ts";
export {
  keyIdOf,
  loadTrust,
  readPrivateKey,
  readPublicKey,
  sign,
  signer,
  type SigningKey,
  type TrustedKey,
} from "./signature.ts";
export { type Verified, VerifiedContent, verifyBundle, type VerifyOptions } from "./verify.ts";
export { checkSlot, linkOrCopyTree, normalizeModes } from "./modes.ts";
export { type Checked, checkInstalled, readRecordedSigner } from "./installed_check.ts";
export {
  type BundleIdentity,
  compareVersions,
  identityName,
  readIdentity,
  versionProblem,
  writeIdentity,
} from "./identity.ts";
export {
  dropStaged,
  installBundle,
  installedDir,
  previousDir,
  previousPath,
  promoteBundle,
  sizeOf,
  stageBundle,
  stagedPath,
  type StageHooks,
} from "./install.ts";
