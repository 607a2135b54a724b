/** Why a bundle must not be used. */
export type BundleFault =
  | "manifest" // no SHA256SUMS, or a line that is malformed or leaves the bundle
  | "file" // a file missing, not listed, or whose digest differs
  | "unsafe" // a symlink, device, FIFO or socket: never part of a bundle
  | "unsigned" // no signature where one is required
  | "untrusted" // a signature no trusted key verifies
  | "trust" // a trust store key that cannot be read
  | "mode" // a bundle used as another mode than its BUNDLE.json names
  | "downgrade" // an older version than the one installed, without --allow-downgrade
  | "changed"; // not the bundle verified earlier in the same run (changed under us)

/** A bundle that must not be used; `file` names the file at fault when there is one. */
export class BundleError extends Error {
  override name = "BundleError";
  readonly fault: BundleFault;
  /** The file at fault, relative to the bundle's mode directory, when one is. */
  readonly file: string | undefined;
  constructor(fault: BundleFault, message: string, file?: string) {
    super(message);
    this.fault = fault;
    this.file = file;
  }
}
