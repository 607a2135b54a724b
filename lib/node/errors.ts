/**
 * A request this node cannot act on, found before anything changed: the
 * command line reports it as bad input (exit 2). Test with instanceof.
 */
export class ErrBadRequest extends Error {
  override name = "ErrBadRequest";
}

/** A migration journal is there: finish or acknowledge it before starting another. */
export class ErrJournalExists extends ErrBadRequest {
  override name = "ErrJournalExists";
}

/** The node has no applied stack (no /etc/stratum/node.json) to migrate or upgrade. */
export class ErrNotInstalled extends ErrBadRequest {
  override name = "ErrNotInstalled";
}

/**
 * The release the node runs does not match what was signed (a file of its
 * slot changed): it is never started. Not retried, since a retry cannot
 * succeed: `stratum node repair --bundle DIR` rebuilds it from the
 * operator's copy of the same release. Test with instanceof.
 */
export class ErrDamagedRelease extends Error {
  override name = "ErrDamagedRelease";
}
