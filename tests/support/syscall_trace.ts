// Reads an `strace -f -y` trace and checks the durable-write protocol of
// docs/durability.md for one file: each rename of a temp file onto it is
// preceded by an fsync of the temp file (after its last write) and followed
// by an fsync of the directory before the next rename or unlink of it; each
// unlink is followed by a directory fsync; it is never truncated in place.

import { dirname } from "node:path";

export interface Syscall {
  pid: string;
  name: string;
  args: string;
  /** The path strace -y printed for the first (fd) argument, if any. */
  fdPath: string | undefined;
  /** Line index where the call started and where it returned. */
  start: number;
  end: number;
}

export const tracedCalls =
  "openat,write,pwrite64,fsync,fdatasync,rename,renameat,renameat2,unlink,unlinkat,close";

/** Parses a trace, joining `<unfinished ...>` and `resumed>` halves per thread. */
export function parseTrace(text: string): Syscall[] {
  const out: Syscall[] = [];
  const pending = new Map<string, { name: string; head: string; start: number }>();
  text.split("\n").forEach((line, i) => {
    const m = /^(\d+)\s+(.*)$/.exec(line);
    if (!m) return;
    const [, pid, rest] = m as unknown as [string, string, string];
    const unfinished = /^(\w+)\((.*) <unfinished \.\.\.>$/.exec(rest);
    if (unfinished) {
      pending.set(pid, { name: unfinished[1]!, head: unfinished[2]!, start: i });
      return;
    }
    const resumed = /^<\.\.\. (\w+) resumed>(.*)$/.exec(rest);
    if (resumed) {
      const p = pending.get(pid);
      if (!p) return;
      pending.delete(pid);
      out.push(make(pid, p.name, p.head + resumed[2]!, p.start, i));
      return;
    }
    const call = /^(\w+)\((.*)$/.exec(rest);
    if (call) out.push(make(pid, call[1]!, call[2]!, i, i));
  });
  return out;
}

function make(pid: string, name: string, args: string, start: number, end: number): Syscall {
  const fd = /^-?\d+<([^>]*)>/.exec(args);
  return { pid, name, args, fdPath: fd?.[1], start, end };
}

function quoted(args: string): string[] {
  return [...args.matchAll(/"((?:[^"\\]|\\.)*)"/g)].map((m) => m[1]!);
}

export interface DurableReport {
  problems: string[];
  saves: number;
  fsyncs: number;
}

/** Checks every save and removal of `target` in the trace. */
export function checkDurable(calls: Syscall[], target: string): DurableReport {
  const dir = dirname(target);
  const problems: string[] = [];
  const isSync = (c: Syscall) => c.name === "fsync" || c.name === "fdatasync";
  const events = calls.filter((c) =>
    ((c.name === "rename" || c.name.startsWith("renameat")) && quoted(c.args)[1] === target) ||
    ((c.name === "unlink" || c.name === "unlinkat") && quoted(c.args)[0] === target)
  );
  let saves = 0;
  events.forEach((ev, k) => {
    const next = events[k + 1]?.start ?? Infinity;
    const dirSynced = calls.some((c) =>
      isSync(c) && c.fdPath === dir && c.start > ev.end && c.end < next
    );
    if (ev.name.startsWith("unlink")) {
      if (!dirSynced) {
        problems.push(`no fsync of ${dir} after unlinking ${target} (line ${ev.start})`);
      }
      return;
    }
    saves++;
    const tmp = quoted(ev.args)[0]!;
    if (dirname(tmp) !== dir) problems.push(`temp file ${tmp} is not in ${dir}`);
    const lastWrite = Math.max(
      -1,
      ...calls.filter((c) => (c.name === "write" || c.name === "pwrite64") && c.fdPath === tmp).map(
        (c) => c.end,
      ),
    );
    if (lastWrite < 0) problems.push(`no write to ${tmp} before its rename (line ${ev.start})`);
    const tmpSynced = calls.some((c) =>
      isSync(c) && c.fdPath === tmp && c.start > lastWrite && c.end < ev.start
    );
    if (!tmpSynced) {
      problems.push(`no fsync of ${tmp} between its last write and its rename (line ${ev.start})`);
    }
    if (!dirSynced) {
      problems.push(`no fsync of ${dir} after the rename onto ${target} (line ${ev.start})`);
    }
  });
  for (const c of calls) {
    if (c.name === "openat" && quoted(c.args)[0] === target && /O_TRUNC/.test(c.args)) {
      problems.push(`${target} opened with O_TRUNC in place (line ${c.start})`);
    }
  }
  return { problems, saves, fsyncs: calls.filter(isSync).length };
}
