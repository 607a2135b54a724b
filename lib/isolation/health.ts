import * as exec from "../exec/mod.ts";
import type { HostPaths, Systemctl } from "../host/mod.ts";
import { join } from "node:path";
import { probeDir, probeExitMark, probeSocketName } from "./nspawn_backend.ts";
import type { SlotRef } from "./slot.ts";
import { expand, type Stack } from "./stack.ts";

/**
 * Asks a stack's health URL once, bounded: `ok` when it answers 2xx within
 * `timeoutMs`; `detail` says what it did otherwise (for messages). Never
 * rejects: an unreachable stack is simply not healthy.
 */
export async function probeHealth(
  url: string,
  timeoutMs = 2000,
): Promise<{ ok: boolean; detail: string }> {
  const t0 = performance.now();
  try {
    const r = await fetch(url, { signal: AbortSignal.timeout(timeoutMs) });
    await r.body?.cancel();
    return { ok: r.ok, detail: `HTTP ${r.status}` };
  } catch (err) {
    // Why, and after how long: a refused connection is a stack not (yet)
    // listening; a timeout whose wait ran far past timeoutMs is this
    // process's own event loop held up, not the stack's slowness.
    const took = ((performance.now() - t0) / 1000).toFixed(1);
    const why = err instanceof DOMException && err.name === "TimeoutError"
      ? `none within ${timeoutMs / 1000} s`
      : innermost(err);
    return { ok: false, detail: `no answer (${why}; asked for ${took} s)` };
  }
}

/**
 * The last words of an error's innermost cause: fetch says "fetch failed",
 * its cause "…: tcp connect error: Connection refused (os error 111)".
 */
function innermost(err: unknown): string {
  let e = err;
  while (e instanceof Error && e.cause !== undefined) e = e.cause;
  const text = e instanceof Error ? e.message : String(e);
  return (text.split("\n", 1)[0]!.split(": ").pop() ?? text).slice(0, 160);
}

/** What a stack's probes need: where it runs, and how to reach its machine. */
export interface ProbeContext {
  readonly paths: HostPaths;
  readonly systemctl: Systemctl;
  readonly ref: SlotRef;
  /** The node's name, for `${NODE}`. */
  readonly node: string;
}

/**
 * How long a command probe may take: it starts programs (`ctr`, `etcdctl`)
 * that ask the stack in turn, seconds on a loaded or slow node (measured:
 * the example stack's probe took over 2 s in the VM while CI ran beside it).
 */
export const commandProbeMs = 10_000;

/**
 * Runs every probe of the stack's `health` once, bounded: the URL
 * (`timeoutMs`), then the command in the stack's own context (commandProbeMs):
 * in host mode a process of stratum's, in nspawn mode a service of the
 * slot's machine, asked over its probe socket (askMachine). `ok` only when
 * all pass; `detail` names the first that did not. Never rejects.
 */
export async function probeStack(
  stack: Stack,
  c: ProbeContext,
  timeoutMs = 2000,
): Promise<{ ok: boolean; detail: string }> {
  const http = await probeHealth(stack.health.url, timeoutMs);
  if (!http.ok || !stack.health.exec) return http;
  const what = stack.health.exec.join(" ");
  const r = c.ref.mode === "nspawn"
    ? await askMachine(join(probeDir(c.ref.slot), probeSocketName), commandProbeMs)
    : await exec.run(expand(stack.health.exec, c.paths.slot(c.ref.slot), c.node), {
      timeoutMs: commandProbeMs,
    }).catch((err) => err as Error);
  if (r instanceof Error) {
    return {
      ok: false,
      detail: r instanceof exec.ErrTimeout
        ? `${what}: did not finish in ${commandProbeMs / 1000} s`
        : `${what}: did not run (${r.message})`,
    };
  }
  // What the probe said last, so an operator sees why (one line, bounded).
  const said = `${r.stdout}\n${r.stderr}`.trim().split("\n").filter((l) => l.trim()).pop();
  return r.code === 0
    ? { ok: true, detail: `HTTP ok, ${what}: exit 0` }
    : { ok: false, detail: `${what}: exit ${r.code}${said ? `: ${said.slice(0, 200)}` : ""}` };
}

/**
 * The stack's probes all pass, asked again until `deadlineMs` has passed;
 * otherwise what the last ask said, for the operator. Asked at least twice,
 * each ask given its whole `askMs`: an ask this process stalled says
 * nothing of the stack. Measured in an emulated guest: a first ask of 13 s
 * for a 2 s timer (the main thread held by dax's WebAssembly compile and
 * fetch's first client), then a second ask cut to the 0.25 s the deadline
 * left, which a kubelet answering python in 0.2 s did not meet.
 */
export async function probeStackWithin(
  stack: Stack,
  c: ProbeContext,
  deadlineMs: number,
  askMs = 2000,
): Promise<{ ok: boolean; detail: string }> {
  const until = performance.now() + deadlineMs;
  for (let asks = 1;; asks++) {
    const r = await probeStack(stack, c, askMs);
    if (r.ok) return r;
    if (asks >= 2 && performance.now() + 250 >= until) {
      return { ok: false, detail: `${r.detail}, the last of ${asks} asks` };
    }
    await new Promise((r) => setTimeout(r, 250));
  }
}

/** The most of a probe's answer kept (its end, where the exit status and the last words are). */
const answerLimit = 64 * 1024;

/**
 * Asks the machine's probe socket (nspawn_backend.ts's stratum-probe.socket)
 * for one run of the command probe, and reads the answer: the command's
 * output, then `stratum-probe-exit N`. The machine runs the command as one
 * of its services; stratum only connects and reads, so the answer is the
 * machine's word and nothing more. An answer without its exit line (the
 * machine went down, or the socket is not the machine's) is an error.
 */
async function askMachine(
  path: string,
  timeoutMs: number,
): Promise<{ code: number; stdout: string; stderr: string } | Error> {
  let conn: Deno.UnixConn;
  try {
    conn = await Deno.connect({ transport: "unix", path });
  } catch (err) {
    return new Error(
      err instanceof Deno.errors.NotFound || err instanceof Deno.errors.ConnectionRefused
        ? "the machine does not run, or does not answer probes yet"
        : `cannot reach the machine's probe socket: ${(err as Error).message}`,
    );
  }
  let timedOut = false;
  const timer = setTimeout(() => {
    timedOut = true;
    try {
      conn.close();
    } catch { /* closed already */ }
  }, timeoutMs);
  let answer = new Uint8Array(0);
  try {
    await conn.closeWrite().catch(() => {});
    const buf = new Uint8Array(16 * 1024);
    for (;;) {
      const n = await conn.read(buf);
      if (n === null) break;
      const next = new Uint8Array(Math.min(answer.length + n, answerLimit));
      const keep = next.length - n;
      next.set(answer.subarray(answer.length - keep), 0);
      next.set(buf.subarray(0, n), keep);
      answer = next;
    }
  } catch (err) {
    if (!timedOut) return new Error(`the machine's answer broke off: ${(err as Error).message}`);
  } finally {
    clearTimeout(timer);
    try {
      conn.close();
    } catch { /* closed by the timer */ }
  }
  if (timedOut) return new exec.ErrTimeout([path], timeoutMs, false);
  const text = new TextDecoder().decode(answer).replace(/\s+$/, "");
  const lines = text.split("\n");
  const last = lines.pop() ?? "";
  const code = last.slice(probeExitMark.length);
  if (!last.startsWith(probeExitMark) || !/^\d+$/.test(code)) {
    return new Error("the machine ended its answer without an exit status");
  }
  return { code: Number(code), stdout: lines.join("\n"), stderr: "" };
}
