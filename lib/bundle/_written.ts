// Files this process wrote into stratum's own copies and hashed from the
// very bytes it wrote. A slot is built from such a copy by hard links and
// its check before the start does not read them again: one read of the
// operator's bundle, one write, and what root runs is still what was
// hashed. Only root can change these files after the write (the staging
// directory is 0700 until the copy matched, the files root's own, 0644 or
// 0755); a change would still show as a new size or mtime, and any other
// process (a resume, the boot) hashes every file again.

/** A file as written, and the sha256 of what was written (undefined: not a listed file). */
interface Written {
  readonly size: number;
  readonly mtime: number;
  readonly sha256: string | undefined;
}

const written = new Map<string, Written>();

const keyOf = (st: Deno.FileInfo) => `${st.dev}:${st.ino}`;
const mtimeOf = (st: Deno.FileInfo) => st.mtime?.getTime() ?? -1;

/** Records `path`, just written whole and fsynced by this process, with the sha256 of its bytes. */
export async function noteWritten(path: string, sha256?: string): Promise<void> {
  const st = await Deno.lstat(path);
  written.set(keyOf(st), { size: st.size, mtime: mtimeOf(st), sha256 });
}

/** Whether `st` is a file this process wrote, unchanged since (size and mtime). */
export function wroteIt(st: Deno.FileInfo): boolean {
  const w = written.get(keyOf(st));
  return w !== undefined && st.isFile && w.size === st.size && w.mtime === mtimeOf(st);
}

/** Whether `st` is a file this process wrote with sha256 `want`, unchanged since. */
export function wroteHashed(st: Deno.FileInfo, want: string): boolean {
  return wroteIt(st) && written.get(keyOf(st))!.sha256 === want;
}
