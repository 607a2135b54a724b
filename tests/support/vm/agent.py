# The test node's agent: reads one JSON request per line from a serial port
# (raw mode), runs it, and writes one JSON reply per line. The host side is
# tests/support/vm.ts. Requests: {"id": N, "argv": [...], "timeout": S,
# "env": {...}}; replies: {"id": N, "code": C, "out": B64, "err": B64}.
# On start it says {"ready": BOOT_ID} so the host knows the node booted.
import base64, json, os, subprocess, sys, termios, time, tty

port = os.open(sys.argv[1], os.O_RDWR | os.O_NOCTTY)
tty.setraw(port)
attrs = termios.tcgetattr(port)
attrs[3] &= ~termios.ECHO
termios.tcsetattr(port, termios.TCSANOW, attrs)
r = os.fdopen(port, "rb", buffering=0)
w = os.fdopen(os.dup(port), "wb", buffering=0)


def say(doc):
    w.write((json.dumps(doc) + "\n").encode())


with open("/proc/sys/kernel/random/boot_id") as f:
    say({"ready": f.read().strip()})
buf = b""
while True:
    chunk = r.read(4096)
    if not chunk:
        # No host on the other end (hang-up): do not spin the guest's CPU.
        time.sleep(0.05)
        continue
    buf += chunk
    while b"\n" in buf:
        line, buf = buf.split(b"\n", 1)
        line = line.strip()
        if not line.startswith(b"{"):
            continue
        try:
            req = json.loads(line)
        except ValueError:
            continue
        env = dict(os.environ, PATH="/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin")
        env.update(req.get("env", {}))
        try:
            p = subprocess.run(req["argv"], capture_output=True, timeout=req.get("timeout", 600), env=env, stdin=subprocess.DEVNULL)
            code, out, err = p.returncode, p.stdout, p.stderr
        except subprocess.TimeoutExpired as e:
            code, out, err = 124, e.stdout or b"", (e.stderr or b"") + b"agent: timed out"
        except OSError as e:
            code, out, err = 127, b"", str(e).encode()
        if code < 0:
            code = 128 - code
        say({"id": req["id"], "code": code, "out": base64.b64encode(out).decode(), "err": base64.b64encode(err).decode()})
