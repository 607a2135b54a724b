/**
 * Asks an http:// health URL with one HTTP/1.1 GET over a plain TCP
 * connection and reads its status line: `ok` for 2xx within `timeoutMs`.
 *
 * Not fetch(): a new process's first fetch sets up Deno's HTTP client, about
 * 30–70 ms on a host and seconds on a loaded or emulated node (measured in
 * the VM: kubelet's /healthz answered in 0.2 s while every `node status`
 * said "no answer" within its 2 s), so the bound would time stratum, not the
 * stack. A health check needs the status only; the body is not read.
 */
export async function askHttp(
  url: string,
  timeoutMs: number,
): Promise<{ ok: boolean; detail: string }> {
  let u: URL;
  try {
    u = new URL(url);
  } catch {
    return { ok: false, detail: `not a URL: ${url}` };
  }
  if (u.protocol !== "http:") return { ok: false, detail: `not an http:// URL: ${url}` };
  let conn: Deno.TcpConn | undefined;
  let timer: ReturnType<typeof setTimeout> | undefined;
  const expired = new Promise<"timeout">((resolve) => {
    timer = setTimeout(() => resolve("timeout"), timeoutMs);
  });
  const ask = async (): Promise<{ ok: boolean; detail: string }> => {
    conn = await Deno.connect({
      hostname: u.hostname.replace(/^\[(.*)\]$/, "$1"),
      port: u.port ? Number(u.port) : 80,
    });
    const request = `GET ${u.pathname}${u.search} HTTP/1.1\r\nHost: ${u.host}\r\n` +
      "User-Agent: stratum\r\nAccept: */*\r\nConnection: close\r\n\r\n";
    await conn.write(new TextEncoder().encode(request));
    const buf = new Uint8Array(8192);
    let got = 0;
    let head = "";
    while (got < buf.length) {
      const n = await conn.read(buf.subarray(got));
      if (n === null) break;
      got += n;
      head = new TextDecoder().decode(buf.subarray(0, got));
      if (head.includes("\r\n")) break;
    }
    const status = /^HTTP\/1\.[01] (\d{3})/.exec(head)?.[1];
    if (!status) return { ok: false, detail: "no HTTP answer" };
    const code = Number(status);
    return { ok: code >= 200 && code < 300, detail: `HTTP ${code}` };
  };
  try {
    const r = await Promise.race([ask(), expired]);
    return r === "timeout" ? { ok: false, detail: "no answer" } : r;
  } catch {
    return { ok: false, detail: "no answer" };
  } finally {
    clearTimeout(timer);
    try {
      conn?.close();
    } catch { /* closed already */ }
  }
}
