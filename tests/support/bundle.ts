// Builds node-stack bundles for tests and the demo: one directory per mode
// with a stack.json, a small Python stack (a long-running process that tells
// systemd it is ready and answers /healthz, and counts its starts in a file
// under the node's declared state directory), a host config file it writes,
// and the SHA256SUMS manifest (written by lib/bundle, as `stratum bundle
// make` does). Python 3 from the host's /usr runs it in both modes (nspawn
// binds /usr read-only into the machine). makeEtcdBundle builds the real
// stateful stack: Debian's etcd on a declared data directory.

import { dirname, join } from "node:path";
import * as bundle from "../../lib/bundle/mod.ts";
import type { Mode } from "../../lib/isolation/mod.ts";

/** How the stack behaves, for fault injection through the bundle. */
export type Behavior = "ok" | "fail-start" | "unhealthy";

export const stackPort = 18080;

/** The test stack's state directory: its start counter lives there, as a node's data does. */
export const stackState = "/var/lib/stratum-test-node";

const stackPy = `import http.server, os, signal, socket, sys, threading

opts = dict(a[2:].split("=", 1) for a in sys.argv[1:] if a.startswith("--") and "=" in a)
port = int(opts.get("port", "${stackPort}"))
behavior = opts.get("behavior", "ok")
label = "%s %s" % (opts.get("mode", "?"), opts.get("name", "node"))
if behavior == "fail-start":
    print("stack: refusing to start (behavior=fail-start)", file=sys.stderr)
    sys.exit(3)

# --plant=LOG (tests/confinement_test.ts): root in the machine swaps its
# /bin (the slot's link to usr/bin, on the machine's volatile overlay) for a
# directory whose sh logs the confinement it runs with to LOG, then runs
# dash. What stratum runs as /bin/sh in the machine then shows its powers.
plant = opts.get("plant")
if plant:
    script = ("#!/usr/bin/dash\\n{ echo run; grep -E '^(CapEff|Seccomp):' /proc/self/status"
              " || echo 'CapEff: unreadable'; } >> %s 2>&1\\nexec /usr/bin/dash \\"$@\\"\\n" % plant)
    if os.path.islink("/bin"):
        os.unlink("/bin")
    os.makedirs("/bin", exist_ok=True)
    with open("/bin/sh.tmp", "w") as f:
        f.write(script)
    os.chmod("/bin/sh.tmp", 0o755)
    os.rename("/bin/sh.tmp", "/bin/sh")

# --kmsg=open: what kubelet does first (its OOM watcher): open the kernel
# log, and fail with kubelet's own words when it cannot (an nspawn machine
# without the kernel-log grant has no /dev/kmsg).
if opts.get("kmsg") == "open":
    try:
        open("/dev/kmsg", "rb").close()
    except OSError as e:
        print("failed to run Kubelet: failed to create kubelet: open /dev/kmsg: %s" % e.strerror.lower(), file=sys.stderr)
        sys.exit(1)

# The node's data: a start counter in the state directory, written durably.
state = opts.get("state")
counter = opts.get("counter", "starts")
starts = 0
if state:
    try:
        with open(os.path.join(state, counter)) as f:
            starts = int(f.read())
    except FileNotFoundError:
        pass
    starts += 1
    tmp = os.path.join(state, counter + ".tmp")
    with open(tmp, "w") as f:
        f.write(str(starts))
        f.flush()
        os.fsync(f.fileno())
    os.rename(tmp, os.path.join(state, counter))
    d = os.open(state, os.O_RDONLY)
    os.fsync(d)
    os.close(d)

class Health(http.server.BaseHTTPRequestHandler):
    def do_GET(self):
        if self.path in ("/starts", "/release"):
            body = ("%s\\n" % (starts if self.path == "/starts" else opts.get("release", "1"))).encode()
            self.send_response(200)
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)
            return
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
  opts: {
    behavior?: Partial<Record<Mode, Behavior>>;
    port?: number;
    /** A second service (its own process, port + 1), as a node stack of several services. */
    twoServices?: boolean;
    /** Declare no state directory (a stateless stack). */
    stateless?: boolean;
    /** The stack's release (default 1): another release is another bundle (an upgrade). */
    release?: string;
    /** More lines of a mode's sysctl file (its host file /etc/sysctl.d/90-stratum.conf). */
    sysctl?: Partial<Record<Mode, string>>;
    /** Kernel modules a mode's stack loads (its host file /etc/modules-load.d/stratum.conf). */
    modules?: Partial<Record<Mode, string[]>>;
    /** The stack's command probe (health.exec), in both modes. */
    healthExec?: string[];
    /** nspawn mode's stack plants its own /bin/sh, logging to this file (stack.py's --plant). */
    plant?: string;
    /** The stack opens /dev/kmsg at start, as kubelet does (stack.py's --kmsg=open). */
    kmsg?: boolean;
    /** nspawn mode's stack.json `grants`. */
    grants?: string[];
  } = {},
): Promise<string> {
  for (const mode of ["host", "nspawn"] as const) {
    const behavior = opts.behavior?.[mode] ?? "ok";
    const port = opts.port ?? stackPort;
    const service = (name: string, p: number) => ({
      name,
      exec: [
        "/usr/bin/python3",
        "${SLOT}/stack/stack.py",
        `--port=${p}`,
        "--name=${NODE}",
        `--mode=${mode}`,
        `--behavior=${behavior}`,
        ...(opts.stateless ? [] : [`--state=${stackState}`, `--counter=starts-${name}`]),
        ...(opts.release ? [`--release=${opts.release}`] : []),
        ...(opts.plant && mode === "nspawn" ? [`--plant=${opts.plant}`] : []),
        ...(opts.kmsg ? ["--kmsg=open"] : []),
      ],
    });
    await writeMode(join(dir, mode), {
      "BUNDLE.json": JSON.stringify({ mode, version: opts.release ?? "1" }) + "\n",
      "stack/stack.py": stackPy,
      "host-files/90-stratum.conf": `# stratum ${mode} mode\nnet.ipv4.ip_forward = 1\n${
        opts.sysctl?.[mode] ? `${opts.sysctl[mode]}\n` : ""
      }`,
      ...(opts.modules?.[mode]
        ? { "host-files/modules.conf": opts.modules[mode]!.map((m) => `${m}\n`).join("") }
        : {}),
      "stack.json": JSON.stringify(
        {
          services: [
            service("node", port),
            ...(opts.twoServices ? [service("aux", port + 1)] : []),
          ],
          health: {
            url: `http://127.0.0.1:${port}/healthz`,
            ...(opts.healthExec ? { exec: opts.healthExec } : {}),
          },
          hostFiles: {
            "/etc/sysctl.d/90-stratum.conf": "host-files/90-stratum.conf",
            ...(opts.modules?.[mode]
              ? { "/etc/modules-load.d/stratum.conf": "host-files/modules.conf" }
              : {}),
          },
          ...(opts.stateless ? {} : { state: [stackState] }),
          ...(opts.grants && mode === "nspawn" ? { grants: opts.grants } : {}),
        },
        null,
        2,
      ) + "\n",
    });
  }
  return dir;
}

/** etcd's data directory in the etcd bundle: the node's state. */
export const etcdData = "/var/lib/etcd-node";
/** etcd's client URL in the etcd bundle (loopback of the node's network namespace). */
export const etcdUrl = "http://127.0.0.1:2379";

/**
 * Writes a bundle whose stack is Debian's etcd (`/usr/bin/etcd`, package
 * etcd-server), a single member on loopback with its data in {@linkcode
 * etcdData}, for both modes; returns `dir`. etcd tells systemd when it
 * serves (sd_notify), so the units' Type=notify holds for it.
 */
export async function makeEtcdBundle(
  dir: string,
  opts: { release?: string } = {},
): Promise<string> {
  for (const mode of ["host", "nspawn"] as const) {
    await writeMode(join(dir, mode), {
      "BUNDLE.json": JSON.stringify({ mode, version: opts.release ?? "1" }) + "\n",
      "stack.json": JSON.stringify(
        {
          services: [{
            name: "etcd",
            exec: [
              "/usr/bin/etcd",
              "--name=${NODE}",
              `--data-dir=${etcdData}`,
              `--listen-client-urls=${etcdUrl}`,
              `--advertise-client-urls=${etcdUrl}`,
              "--listen-peer-urls=http://127.0.0.1:2380",
              "--initial-advertise-peer-urls=http://127.0.0.1:2380",
              "--initial-cluster=${NODE}=http://127.0.0.1:2380",
              "--log-level=warn",
              // A single member elects itself after one election timeout:
              // a short one makes each start (and each test) a second faster.
              "--heartbeat-interval=50",
              "--election-timeout=250",
            ],
          }],
          health: { url: `${etcdUrl}/health` },
          state: [etcdData],
        },
        null,
        2,
      ) + "\n",
    });
  }
  return dir;
}

/** Where the kubelet stand-in mounts its volume, as kubelet mounts a Secret. */
export const volumeDir = "/var/lib/kubelet/pods/pod-1/volumes/kubernetes.io~secret/token";
/** The mark the volume stack's runtime side leaves in its /run, which its command probe checks. */
export const volumeProbeMark = "/run/stratum-volume-probe";
/** The health URL of the volume stack: the runtime's side answers 200 only while it sees the volume. */
export const volumeUrl = "http://127.0.0.1:18090/healthz";

const volumesPy = `import http.server, os, signal, socket, subprocess, sys, threading

opts = dict(a[2:].split("=", 1) for a in sys.argv[1:] if a.startswith("--") and "=" in a)
volume = "${volumeDir}"
secret = "secret for %s" % opts.get("name", "node")

def ready():
    addr = os.environ.get("NOTIFY_SOCKET")
    if addr:
        s = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
        s.connect("\\0" + addr[1:] if addr.startswith("@") else addr)
        s.send(b"READY=1")
        s.close()

if opts.get("role") == "kubelet":
    # As kubelet mounts a Secret: a tmpfs under /var/lib/kubelet/pods, made
    # in this service's mount namespace, then left to the runtime to use.
    os.makedirs(volume, exist_ok=True)
    subprocess.run(["mount", "-t", "tmpfs", "-o", "size=1m,mode=0700", "tmpfs", volume], check=True)
    with open(os.path.join(volume, "token"), "w") as f:
        f.write(secret)
    done = threading.Event()
    signal.signal(signal.SIGTERM, lambda *_: done.set())
    ready()
    done.wait()
    subprocess.run(["umount", volume])
    sys.exit(0)

# The runtime's side: what a container bind-mounting the volume would read.
# It also leaves a mark in its own /run, which the stack's command probe
# checks: inside the machine in nspawn mode (the host's /run never has it).
with open("${volumeProbeMark}", "w") as f:
    f.write("up")
class Health(http.server.BaseHTTPRequestHandler):
    def do_GET(self):
        try:
            with open(os.path.join(volume, "token")) as f:
                seen = f.read() == secret
        except OSError:
            seen = False
        body = (("sees %s\\n" % secret) if seen else "no volume\\n").encode()
        self.send_response(200 if seen else 503)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)
    def log_message(self, *args):
        pass

http.server.ThreadingHTTPServer.allow_reuse_address = True
server = http.server.ThreadingHTTPServer(("127.0.0.1", 18090), Health)
signal.signal(signal.SIGTERM, lambda *_: threading.Thread(target=server.shutdown, daemon=True).start())
ready()
server.serve_forever()
`;

/**
 * Writes a bundle whose stack is the part of a Kubernetes node stratum must
 * not break without running containers: a kubelet stand-in that mounts a
 * tmpfs volume under /var/lib/kubelet/pods (started after the runtime's
 * side), and the runtime's side, which is healthy only while it sees that
 * volume. One machine per service cannot pass this (nspawn's binds are
 * one-way); one booted machine, or host mode, can. Returns `dir`.
 */
export async function makeVolumeBundle(dir: string): Promise<string> {
  for (const mode of ["host", "nspawn"] as const) {
    const role = (
      r: string,
    ) => ["/usr/bin/python3", "${SLOT}/stack/volumes.py", `--role=${r}`, "--name=${NODE}"];
    await writeMode(join(dir, mode), {
      "BUNDLE.json": JSON.stringify({ mode, version: "1" }) + "\n",
      "stack/volumes.py": volumesPy,
      "stack.json": JSON.stringify(
        {
          services: [
            { name: "runtime", exec: role("runtime"), delegate: true },
            { name: "kubelet", exec: role("kubelet"), after: ["runtime"] },
          ],
          health: { url: volumeUrl, exec: ["/bin/sh", "-c", `test -e ${volumeProbeMark}`] },
          state: ["/var/lib/kubelet"],
        },
        null,
        2,
      ) + "\n",
    });
  }
  return dir;
}

/** The file a node image marks itself with (tests/support/node_image/build.sh): not on the host. */
export const nodeImageMark = "/usr/share/stratum-node-image";

/**
 * Gives the nspawn mode of the test bundle at `dir` (makeBundle's) its own
 * root tree: the tar `image` as `rootfs.tar`, named by stack.json's `root`,
 * and a command probe that passes only where the image's mark is (so only
 * on the image's userland), then makes its manifest anew.
 */
export async function withNodeImage(dir: string, image: string): Promise<string> {
  const m = join(dir, "nspawn");
  await Deno.copyFile(image, join(m, "rootfs.tar"));
  const stack = JSON.parse(await Deno.readTextFile(join(m, "stack.json")));
  stack.root = "rootfs.tar";
  stack.health.exec = ["/bin/sh", "-c", `test -e ${nodeImageMark}`];
  await writeMode(m, { "stack.json": JSON.stringify(stack, null, 2) + "\n" });
  return dir;
}

async function writeMode(m: string, files: Record<string, string>): Promise<void> {
  for (const [f, text] of Object.entries(files)) {
    await Deno.mkdir(dirname(join(m, f)), { recursive: true });
    await Deno.writeTextFile(join(m, f), text);
  }
  await bundle.makeManifest(m);
}

/** The cgroup the workload bundle's service puts its "container" in, outside its unit. */
export const workloadCgroup = "/stratum-test-workloads";

const workloadPy = `import glob, os, socket, subprocess, sys, signal

def escape(cgroup="${workloadCgroup}"):
    # As runc places a container: a cgroup of its own, outside the unit, in
    # every hierarchy (cgroup v2's one, or each v1 one).
    root = "/sys/fs/cgroup"
    hiers = [root] if os.path.exists(root + "/cgroup.controllers") else glob.glob(root + "/*/")
    for h in hiers:
        d = h.rstrip("/") + cgroup
        try:
            os.makedirs(d, exist_ok=True)
            with open(d + "/cgroup.procs", "w") as f:
                f.write("0")
        except OSError:
            pass

subprocess.Popen(["sleep", "1000"], preexec_fn=escape, start_new_session=True)
if len(sys.argv) > 1:
    # A container as containerd runs one, in a namespace and a cgroup the
    # stack does not declare: its root file system under the runtime's
    # state directory, its command run with that as its root.
    rootfs = sys.argv[1] + "/io.containerd.runtime.v2.task/operator/c1/rootfs"
    os.makedirs(rootfs + "/bin", exist_ok=True)
    subprocess.run(["cp", "/bin/busybox", rootfs + "/bin/busybox"], check=True)
    def contain():
        escape("/stratum-test-operator/c1")
        os.chroot(rootfs)
        os.chdir("/")
    subprocess.Popen(["/bin/busybox", "sleep", "1001"], preexec_fn=contain, start_new_session=True)
addr = os.environ.get("NOTIFY_SOCKET")
if addr:
    s = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
    s.connect("\\0" + addr[1:] if addr.startswith("@") else addr)
    s.send(b"READY=1")
signal.signal(signal.SIGTERM, lambda *_: sys.exit(0))
signal.pause()
`;

/**
 * Writes a bundle whose one service starts a process that leaves its unit's
 * cgroup for ${workloadCgroup}, as a container runtime's containers do; the
 * stack declares that cgroup as its workloads (unless `declare: false`).
 * With `runtime`, it also starts a "container" (`busybox sleep 1001`, its
 * root a rootfs under the runtime's state directory, in an undeclared
 * cgroup), and the stack names that containerd runtime when `declare`.
 * Returns `dir`.
 */
export async function makeWorkloadBundle(
  dir: string,
  opts: { declare?: boolean; runtime?: { state: string; declare: boolean } } = {},
): Promise<string> {
  for (const mode of ["host", "nspawn"] as const) {
    await writeMode(join(dir, mode), {
      "BUNDLE.json": JSON.stringify({ mode, version: "1" }) + "\n",
      "stack/workload.py": workloadPy,
      "stack.json": JSON.stringify(
        {
          services: [{
            name: "app",
            exec: [
              "/usr/bin/python3",
              "\${SLOT}/stack/workload.py",
              ...(opts.runtime ? [opts.runtime.state] : []),
            ],
          }],
          health: { url: "http://127.0.0.1:18091/" },
          ...(opts.declare !== false ? { workloads: [workloadCgroup] } : {}),
          ...(opts.runtime?.declare
            ? { runtime: { kind: "containerd", state: opts.runtime.state } }
            : {}),
        },
        null,
        2,
      ) + "\n",
    });
  }
  return dir;
}
