# Runs a command inside the sandbox as an operator's session would, waits
# until the migration journal records STEP, then ends the session one way,
# and prints one JSON line: the command's exit code (128+N when a signal
# killed it), the output it wrote before the end, and whether it was still
# running when the session ended.
#
#   python3 session_end.py HOW STEP -- ARGV...
#
# HOW:
#   pty-close    ARGV is the session leader on a pty; the pty's master is
#                closed (script(1) or sshd going away): the kernel hangs the
#                terminal up and sends SIGHUP.
#   ssh-drop     a shell is the session leader on a pty (an SSH login), ARGV
#                its job; the master is closed: the kernel sends the shell
#                SIGHUP, the shell sends it on to its job (as an interactive
#                bash does) and exits, and the kernel sends the foreground
#                process group SIGHUP again as the session leader exits: two
#                SIGHUPs, a moment apart.
#   leader-kill  a shell is the session leader on a pty, ARGV its job; the
#                shell is SIGKILLed: the kernel sends SIGHUP to the
#                foreground process group.
#   signal:SIG   ARGV on pipes; SIG is sent to it (kill -SIG).
#   pipes-close  ARGV's stdout and stderr are pipes whose reading ends are
#                closed: its next writes fail (EPIPE).
#   pipes-close+repeat:SIG
#                as pipes-close, then SIG is sent every 100 ms until ARGV
#                exits (an operator insisting on a run that is stuck).
import ctypes
import json
import os
import pty
import select
import signal
import subprocess
import sys
import time

how, step, argv = sys.argv[1], sys.argv[2], sys.argv[4:]
journal = "/var/lib/stratum/migration.json"

# Orphans (the job whose shell was killed) are reparented to us, so their
# exit status can be collected.
PR_SET_CHILD_SUBREAPER = 36
ctypes.CDLL(None, use_errno=True).prctl(PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0)


def step_now():
    try:
        with open(journal) as f:
            return json.load(f).get("step")
    except (OSError, ValueError):
        return None


def drain(fds, out, timeout):
    r, _, _ = select.select(fds, [], [], timeout)
    for fd in r:
        try:
            b = os.read(fd, 65536)
        except OSError:
            b = b""
        out.append(b)


out = []
deadline = time.time() + 120
if how in ("pty-close", "ssh-drop", "leader-kill"):
    quoted = " ".join("'" + a.replace("'", "'\\''") + "'" for a in argv)
    if how == "pty-close":
        cmd = argv
    elif how == "ssh-drop":
        cmd = ["/bin/bash", "-c", quoted + ' & c=$!; trap "kill -HUP $c; sleep 0.3; exit 129" HUP; wait $c']
    else:
        # Not `exec`: the shell stays the session leader, the job its child.
        cmd = ["/bin/bash", "-c", quoted + "; exit $?"]
    leader, master = pty.fork()
    if leader == 0:
        os.execvp(cmd[0], cmd)
    while time.time() < deadline and step_now() != step:
        drain([master], out, 0.1)
    drain([master], out, 0.1)
    reached = step_now() == step
    if how == "leader-kill":
        os.kill(leader, signal.SIGKILL)
        # The master stays open (sshd would close it too, a moment later).
    else:
        os.close(master)
    job = leader if how == "pty-close" else None
else:
    p = subprocess.Popen(argv, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    fds = [p.stdout.fileno(), p.stderr.fileno()]
    while time.time() < deadline and step_now() != step and p.poll() is None:
        drain(fds, out, 0.1)
    reached = step_now() == step
    if how.startswith("pipes-close"):
        p.stdout.close()
        p.stderr.close()
        if "+repeat:" in how:
            sig = getattr(signal, how.split(":", 1)[1])
            while p.poll() is None and time.time() < deadline + 60:
                p.send_signal(sig)
                time.sleep(0.1)
    else:
        p.send_signal(getattr(signal, how.split(":", 1)[1]))
    job = p.pid

# Collect every child (the leader, and the job reparented to us) until the
# job is among them.
codes = {}
if how not in ("pty-close", "ssh-drop", "leader-kill") and p.returncode is not None:
    codes[job] = p.returncode  # reaped by p.poll() already
end = time.time() + 180
while time.time() < end and job not in codes:
    try:
        pid, status = os.waitpid(-1, 0)
    except ChildProcessError:
        break
    codes[pid] = os.waitstatus_to_exitcode(status)
    code = codes[pid]
    if job is not None and pid == job:
        break
if job is None:
    # The job is the one that is not the leader.
    others = [c for p, c in codes.items() if p != leader]
    code = others[0] if others else None
else:
    code = codes.get(job)
if code is not None and code < 0:
    code = 128 - code
print(json.dumps({"exit": code, "reached": reached, "before": b"".join(out).decode(errors="replace")}))
