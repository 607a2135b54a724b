// deno-lint-ignore-file no-console
// The only module that writes to the terminal. With --json, stdout carries
// exactly one JSON document and everything else goes to stderr.
//
// A write that fails (the terminal hung up: EIO; a pipe whose reader is
// gone: EPIPE) is dropped: an operator's session that ends must never make
// a migration throw half-way. The run goes on or rolls back as it would
// have, and the journal and `node history` keep what it would have said.

/** Writes with `write`, dropping the line when the terminal or pipe is gone. */
function quietly(write: () => void): void {
  try {
    write();
  } catch { /* the reader is gone: nobody to tell */ }
}

/** Where a command writes: results to stdout, progress and logs to stderr. */
export class Output {
  constructor(readonly json: boolean) {}

  /** A progress or log line, always on stderr so stdout stays parseable. */
  log(line: string): void {
    quietly(() => console.error(line));
  }

  /** The command's result: `doc` as JSON with --json, else the human lines. */
  result(doc: unknown, human: () => string[]): void {
    if (this.json) quietly(() => console.log(JSON.stringify(doc, null, 2)));
    else for (const line of human()) quietly(() => console.log(line));
  }

  /** Plain text on stdout (help, command lists), whatever the mode. */
  text(s: string): void {
    quietly(() => console.log(s.endsWith("\n") ? s.slice(0, -1) : s));
  }

  /** A one-line error on stderr, prefixed like every CLI error. */
  error(message: string): void {
    quietly(() => console.error(`stratum: ${message}`));
  }

  /** Whether stderr is a terminal, for progress bars. */
  get interactive(): boolean {
    return Deno.stderr.isTerminal();
  }
}
