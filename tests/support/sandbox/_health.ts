// The test stack's health endpoint, as the sandbox drivers read it.

export const healthUrl = Deno.env.get("HEALTH_URL") ?? "http://127.0.0.1:18080/healthz";

/** "STATUS BODY" of the health endpoint, or "refused" when nothing answers. */
export async function health(): Promise<string> {
  try {
    const r = await fetch(healthUrl, { signal: AbortSignal.timeout(2000) });
    return `${r.status} ${(await r.text()).trim()}`;
  } catch {
    return "refused";
  }
}
