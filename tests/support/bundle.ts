// Builds node-stack bundles for tests and the demo: one directory per mode
// with a stack.json, a small Python stack (a long-running process that tells
// systemd it is ready and answers /healthz), a host config file it writes,
// and the SHA256SUMS manifest (written by lib/bundle, as `stratum bundle make` does). Python 3 from the host's /usr runs it in both
// modes (nspawn binds /usr read-only into the machine).

import { dirname, join } from "node:path";
import * as bundle from "../../lib/bundle/mod.ts";
import type { Mode } from "../../lib/isolation/mod.ts";

/** How the stack behaves, for fault injection through the bundle. */
export type Behavior = "ok" | "fail-start" | "unhealthy";

export const stackPort = 18080;

const stackPy = `import http.server, os, signal, socket, sys, threading

opts = dict(a[2:].split("=", 1) for a in sys.argv[1:] if a.startswith("--") and "=" in a)
port = int(opts.get("port", "${stackPort}"))
behavior = opts.get("behavior", "ok")
label = "%s %s" % (opts.get("mode", "?"), opts.get("name", "node"))
if behavior == "fail-start":
    print("stack: refusing to start (behavior=fail-start)", file=sys.stderr)
    sys.exit(3)

class Health(http.server.BaseHTTPRequestHandler):
    def do_GET(self):
        ok = self.path == "/healthz" and behavior != "unhealthy"
        body = ("ok %s\\n" % label if ok else "not ready\\n").encode()
        self.send_response(200 if ok else 503)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)
    def log_message(self, *args):
        pass

http.server.ThreadingHTTPServer.allow_reuse_address = True
server = http.server.ThreadingHTTPServer(("127.0.0.1", port), Health)
stop = lambda *_: threading.Thread(target=server.shutdown, daemon=True).start()
signal.signal(signal.SIGTERM, stop)
signal.signal(signal.SIGINT, stop)
addr = os.environ.get("NOTIFY_SOCKET")
if addr:
    s = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
    s.connect("\\0" + addr[1:] if addr.startswith("@") else addr)
    s.send(b"READY=1")
    s.close()
server.serve_forever()
sys.exit(0)
`;

/** Writes `<dir>/<mode>/` for each mode; returns `dir`. */
export async function makeBundle(
  dir: string,
  opts: { behavior?: Partial<Record<Mode, Behavior>>; port?: number } = {},
): Promise<string> {
  for (const mode of ["host", "nspawn"] as const) {
    const m = join(dir, mode);
    const behavior = opts.behavior?.[mode] ?? "ok";
    const port = opts.port ?? stackPort;
    const files: Record<string, string> = {
      "stack/stack.py": stackPy,
      "host-files/90-stratum.conf": `# stratum ${mode} mode\nnet.ipv4.ip_forward = 1\n`,
      "stack.json": JSON.stringify(
        {
          services: [{
            name: "node",
            exec: [
              "/usr/bin/python3",
              "${SLOT}/stack/stack.py",
              `--port=${port}`,
              "--name=${NODE}",
              `--mode=${mode}`,
              `--behavior=${behavior}`,
            ],
          }],
          health: { url: `http://127.0.0.1:${port}/healthz` },
          hostFiles: { "/etc/sysctl.d/90-stratum.conf": "host-files/90-stratum.conf" },
        },
        null,
        2,
      ) + "\n",
    };
    for (const [f, text] of Object.entries(files)) {
      await Deno.mkdir(dirname(join(m, f)), { recursive: true });
      await Deno.writeTextFile(join(m, f), text);
    }
    await bundle.makeManifest(m);
  }
  return dir;
}
