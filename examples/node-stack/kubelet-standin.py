"""The part of kubelet's job stratum must not break, for the example node stack.

It talks to containerd over its socket (ctr), mounts a tmpfs volume under
/var/lib/kubelet/pods/<uid>/volumes/ as kubelet mounts a Secret, and keeps a
container running that bind-mounts that volume and reads it. The node's
image is imported from the bundle once, on the node's first start (an
air-gapped node's preload); after that it must still be in containerd's
store, and the stand-in fails rather than import it again.
"""
import os, signal, socket, subprocess, sys, threading, time

opts = dict(a[2:].split("=", 1) for a in sys.argv[1:] if a.startswith("--") and "=" in a)
image_tar = opts["image-tar"]
image = opts.get("image", "stratum.local/busybox:1")
node = opts.get("node", "node")
pod = "pod-1"
volume = "/var/lib/kubelet/pods/%s/volumes/kubernetes.io~secret/token" % pod
imported = "/var/lib/kubelet/stratum-images-imported"
ctr = ["ctr", "--address", "/run/containerd/containerd.sock", "--namespace", "stratum"]


def say(msg):
    print("kubelet-standin: " + msg, flush=True)


def run(*args, check=True):
    r = subprocess.run(ctr + list(args), capture_output=True, text=True)
    if check and r.returncode != 0:
        raise SystemExit("kubelet-standin: ctr %s: %s" % (" ".join(args), r.stderr.strip()))
    return r


def kernel_log():
    """What kubelet does first: its OOM watcher opens the kernel log. In nspawn
    mode the machine has /dev/kmsg only with the stack's kernel-log grant
    (and reading it needs CAP_SYSLOG where kernel.dmesg_restrict is 1)."""
    try:
        open("/dev/kmsg", "rb").close()
    except OSError as e:
        raise SystemExit("failed to run Kubelet: failed to create kubelet: open /dev/kmsg: %s"
                         % e.strerror.lower())


def cgroup_controllers():
    """kubelet's container manager reads the cgroup controllers it may use.
    On cgroup v2 it panics when it cannot ("cannot read cgroup controllers
    at /sys/fs/cgroup"); on v1 it refuses to start without cpu, cpuacct,
    cpuset and memory mounted ("system validation failed - Following Cgroup
    subsystem not mounted")."""
    root = "/sys/fs/cgroup"
    if os.path.exists(root + "/cgroup.controllers"):
        try:
            open(root + "/cgroup.controllers").read()
        except OSError:
            raise SystemExit("cannot read cgroup controllers at %s" % root)
        return
    want = {"cpu", "cpuacct", "cpuset", "memory"}
    for line in open("/proc/self/mounts"):
        f = line.split()
        if len(f) > 3 and f[2] == "cgroup":
            want -= set(f[3].split(","))
    if want:
        raise SystemExit("system validation failed - Following Cgroup subsystem not mounted: [%s]"
                         % " ".join(sorted(want)))


def kernel_tunables():
    """kubelet's container manager sets these kernel settings itself and will
    not start when it cannot (setupKernelTunables, "Failed to start
    ContainerManager"): in an nspawn machine /proc/sys is read-only, so the
    stack's host files set them on the host first."""
    want = {"vm/overcommit_memory": "1", "vm/panic_on_oom": "0", "kernel/panic": "10",
            "kernel/panic_on_oops": "1", "kernel/keys/root_maxkeys": "1000000",
            "kernel/keys/root_maxbytes": "25000000"}
    for key, value in want.items():
        path = "/proc/sys/" + key
        if open(path).read().strip() == value:
            continue
        try:
            with open(path, "w") as f:
                f.write(value)
        except OSError as e:
            raise SystemExit("Failed to start ContainerManager: open %s: %s" % (path, e.strerror.lower()))


def pod_cgroup():
    """kubelet does not run a pod it cannot place under kubepods.slice:
    "Failed to start ContainerManager" err="failed to initialize top level
    QOS containers" when the slice cannot be made, and a pod sandbox that
    fails to start when its slice cannot. The container must be there."""
    want = "/kubepods.slice/kubepods-besteffort.slice/%s/cri-containerd-%s.scope" % (
        pod_slice, pod)
    rows = [l.split() for l in run("task", "ls").stdout.splitlines()[1:]]
    pid = next((r[1] for r in rows if len(r) >= 2 and r[0] == pod), None)
    cgroup = ""
    if pid:
        for line in open("/proc/%s/cgroup" % pid):
            f = line.strip().split(":", 2)
            if len(f) == 3 and f[1] in ("", "name=systemd"):
                cgroup = f[2]
    if cgroup != want:
        raise SystemExit("Failed to start ContainerManager: failed to initialize top level QOS "
                         "containers: pod %s runs in cgroup %r, not %s" % (pod, cgroup, want))


def ready():
    addr = os.environ.get("NOTIFY_SOCKET")
    if addr:
        s = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
        s.connect("\0" + addr[1:] if addr.startswith("@") else addr)
        s.send(b"READY=1")
        s.close()


kernel_log()
cgroup_controllers()
kernel_tunables()
for _ in range(100):
    if run("version", check=False).returncode == 0:
        break
    time.sleep(0.1)
else:
    raise SystemExit("kubelet-standin: containerd does not answer on its socket")

names = run("images", "ls", "-q").stdout.split()
if image not in names:
    if os.path.exists(imported):
        raise SystemExit("kubelet-standin: image %s was imported once and is gone from containerd's store" % image)
    run("images", "import", "--no-unpack", image_tar)
    with open(imported, "w") as f:
        f.write(image + "\n")
    say("imported %s (first start)" % image)

# The volume, as kubelet mounts a Secret: a tmpfs in the stack's own mounts.
os.makedirs(volume, exist_ok=True)
if subprocess.run(["mountpoint", "-q", volume]).returncode != 0:
    subprocess.run(["mount", "-t", "tmpfs", "-o", "size=1m,mode=0700", "tmpfs", volume], check=True)
with open(os.path.join(volume, "token"), "w") as f:
    f.write("secret for %s\n" % node)

# A container left by the stack that ran before (its task died with it).
run("task", "kill", "-s", "SIGKILL", pod, check=False)
run("task", "delete", "-f", pod, check=False)
run("containers", "delete", pod, check=False)
# As kubelet with the systemd cgroup driver places a pod: under
# kubepods.slice, in a slice per pod and a scope per container, made by the
# node's systemd (in nspawn mode, the machine's: it must be able to make
# slices with the controllers delegated to it). A pod's UID has its dashes
# as underscores there, as a dash nests slices.
pod_slice = "kubepods-besteffort-pod%s.slice" % pod.replace("-", "_")
run("run", "-d", "--net-host", "--runc-systemd-cgroup",
    "--cgroup", "%s:cri-containerd:%s" % (pod_slice, pod),
    "--mount", "type=bind,src=%s,dst=/run/secret,options=rbind:ro" % volume,
    image, pod, "/bin/sh", "-c",
    "while :; do cat /run/secret/token > /tmp/seen; sleep 1; done")
pod_cgroup()
say("container %s runs under kubepods.slice, reading the volume" % pod)

done = threading.Event()
signal.signal(signal.SIGTERM, lambda *_: done.set())
ready()
# A task reported STOPPED (or gone) three checks in a row has ended; an
# UNKNOWN status is a shim slow to answer (a loaded node), not an end.
gone = 0
while not done.wait(5):
    rows = [l.split() for l in run("task", "ls", check=False).stdout.splitlines()[1:]]
    status = next((r[2] for r in rows if len(r) >= 3 and r[0] == pod), "GONE")
    gone = gone + 1 if status in ("STOPPED", "GONE") else 0
    if gone >= 3:
        raise SystemExit("kubelet-standin: container %s stopped" % pod)
# As kubelet: its pods outlive it; stopping the stack is stratum's job.
sys.exit(0)
