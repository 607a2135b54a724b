/**
 * Asks a stack's health URL once, bounded: `ok` when it answers 2xx within
 * `timeoutMs`; `detail` says what it did otherwise (for messages). Never
 * rejects: an unreachable stack is simply not healthy.
 */
export async function probeHealth(
  url: string,
  timeoutMs = 2000,
): Promise<{ ok: boolean; detail: string }> {
  try {
    const r = await fetch(url, { signal: AbortSignal.timeout(timeoutMs) });
    await r.body?.cancel();
    return { ok: r.ok, detail: `HTTP ${r.status}` };
  } catch {
    return { ok: false, detail: "no answer" };
  }
}
