#!/usr/bin/env python3
"""`fusebox run --session NAME`: commands that share a kept view.

The real `fusebox` ($FUSEBOX_BIN), each command a real `fusebox run`
with its state in a temporary XDG_STATE_HOME.  The commands of one session
run in one view (the same device number of "/" inside), each still a run
of its own (its run directory, log, run.json, exit status).

- persistence: what one command leaves in /tmp and HOME the next finds;
  each exit status is its command's.
- attribution: two commands run at once in the session's view, each
  reading and making its own files (one is refused a write); each run's
  log holds its own records only, stamped with its own run id, and its
  run.json its own denials; a file a command still held when it was
  killed is closed in its own log.
- a late release: a file a command opened is still open when the command
  has ended and the session has taken its end (held by this test, which
  took it from the command with pidfd_getfd), so the kernel's RELEASE
  comes after; the command's run still ends, and its log holds that
  file's close record.
- a killed command: SIGKILL to one command's `fusebox run` takes its
  sandbox with it and leaves the view to another, which goes on reading
  and writing, and a command started afterwards joins the same view.
- warm listings: a directory one command listed is stat'ed by the next
  without a round trip to the view (the keeper refreshed the attribute
  the listing made stale, fs/fs-fuse-warm.c), while one listed and
  stat'ed at once is asked (the control); the keeper's own requests are
  in no log, the session's included.
- the ready sandbox: the session makes the next command's sandbox ahead,
  and a command run in it is what it would be in one of its own: its
  argv, environment, working directory, umask, stdin, stdout, stderr,
  exit status (by a signal too), a missing command's 127, its signals
  forwarded, its records in its own log; a command whose client is
  SIGKILLed is killed with it; run.json says it ran there
  ("ready_sandbox").  A caller that is not in the situation of the
  sandbox's maker (another cgroup, other limits, another nice value, a
  Landlock domain) gets a sandbox of its own, with its own limits, cgroup
  and confinement, and run.json says why ("ready_sandbox_why").
- refusals and bounds: a command under another policy is refused with
  what differs (125), as is one past the sessions a user may run;
  `fusebox session stop` ends a session and the command in it (125).

Exit status: 0 all passed, 1 a check failed, 77 a prerequisite is missing
(unless FUSEBOX_TESTS_MUST_RUN=1).
"""
import ctypes
import json
import os
import shlex
import shutil
import signal
import subprocess
import sys
import tempfile
import time
import traceback

BIN = os.environ.get("FUSEBOX_BIN", "fusebox")
MUST_RUN = os.environ.get("FUSEBOX_TESTS_MUST_RUN") == "1"
SESSIONS_MAX = 16


class Host:
    """A state directory and a workspace; commands run with them."""

    def __init__(self, tmp):
        self.dir = tempfile.mkdtemp(prefix="host-", dir=tmp)
        self.ws = os.path.join(self.dir, "ws")
        os.mkdir(self.ws)
        self.env = dict(os.environ, XDG_STATE_HOME=os.path.join(self.dir, "state"))
        self.env.pop("FUSEBOX_TESTS_MUST_RUN", None)
        self.sessions = set()

    def argv(self, session, script, *opts):
        return [BIN, "run", "--session", session] + list(opts) + ["--", "/bin/sh", "-c", script]

    def run(self, session, script, *opts):
        self.sessions.add(session)
        p = subprocess.run(self.argv(session, script, *opts), cwd=self.ws, env=self.env, capture_output=True,
                           text=True, timeout=120)
        return p.returncode, p.stdout, p.stderr

    def run_kw(self, session, script, *opts, cwd=None, input=None, umask=None, prefix=(), argv=None, env=None):
        """run(), from CWD (the workspace), with INPUT as stdin, UMASK
        (the caller's umask), PREFIX before fusebox (prlimit, nice...),
        ARGV instead of sh -c SCRIPT, ENV instead of the host's."""
        self.sessions.add(session)
        full = list(prefix) + ([BIN, "run", "--session", session] + list(opts) + ["--"] + argv if argv
                               else self.argv(session, script, *opts))
        p = subprocess.run(full, cwd=cwd or self.ws, env=env or self.env, input=input if input is not None else "",
                           capture_output=True, text=True, timeout=120,
                           preexec_fn=(lambda: os.umask(umask)) if umask is not None else None)
        return p.returncode, p.stdout, p.stderr

    def last_run(self):
        """The run that started last."""
        runs = self.runs()
        return max(runs, key=lambda r: runs[r].get("started", r))

    def start(self, session, script, *opts, stdin=None, preexec_fn=None):
        self.sessions.add(session)
        return subprocess.Popen(self.argv(session, script, *opts), cwd=self.ws, env=self.env, stdin=stdin,
                                stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, preexec_fn=preexec_fn)

    def runs(self):
        """{run id: run.json} of every run."""
        root = os.path.join(self.env["XDG_STATE_HOME"], "fusebox", "runs")
        out = {}
        for rid in os.listdir(root):
            try:
                with open(os.path.join(root, rid, "run.json")) as f:
                    out[rid] = json.load(f)
            except FileNotFoundError:
                pass
        return out

    def log(self, rid):
        path = os.path.join(self.env["XDG_STATE_HOME"], "fusebox", "runs", rid, "access.jsonl")
        with open(path) as f:
            return [json.loads(line) for line in f if line.strip()]

    def run_of(self, marker):
        """The run whose command holds MARKER."""
        found = [rid for rid, info in self.runs().items() if marker in " ".join(info.get("command", []))]
        assert len(found) == 1, (marker, found)
        return found[0]

    def stop(self, session):
        subprocess.run([BIN, "session", "stop", session], env=self.env, capture_output=True, timeout=60)

    def close(self):
        for s in self.sessions:
            self.stop(s)


# Files written and unlinked, by a process run inside a view's namespaces
# from outside any command: records of no command (argv: directory, count).
FLOOD = ("import os, sys\n"
         "ws = sys.argv[1]\n"
         "for i in range(int(sys.argv[2])):\n"
         "    p = '%s/flood-%06d-%s' % (ws, i, 'x' * 200)\n"
         "    try:\n"
         "        with open(p, 'w') as f:\n"
         "            f.write('x')\n"
         "        os.unlink(p)\n"
         "    except OSError as e:\n"
         "        print('stopped at', i, e.errno)\n"
         "        break\n")


# A file made and a write refused from a thread that is not its process's
# first (FUSE names the caller by thread id); exit status 1 (serve's
# sandboxDenied needs a failure).
THREAD_PROBE = ("import threading\n"
                "def work():\n"
                "    with open('thread-made.txt', 'w') as f:\n"
                "        f.write('t')\n"
                "    try:\n"
                "        open('/etc/thread-refused', 'w')\n"
                "    except OSError as e:\n"
                "        print('refused', e.errno)\n"
                "t = threading.Thread(target=work)\n"
                "t.start()\n"
                "t.join()\n"
                "raise SystemExit(1)\n")


def held_namespaces(pid):
    """{/proc/PID/fd/N: "user" or "mnt"} of the namespaces process PID holds."""
    fds = "/proc/%d/fd" % pid
    out = {}
    for n in os.listdir(fds):
        try:
            kind = os.readlink(os.path.join(fds, n)).split(":")[0]
        except FileNotFoundError:
            continue
        if kind in ("user", "mnt"):
            out[os.path.join(fds, n)] = kind
    return out


def wait_for(pred, what):
    """A bounded wait (it ends a hung test; no time is asserted)."""
    for _ in range(1200):
        if pred():
            return
        time.sleep(0.05)
    raise AssertionError("never came: " + what)


def t_persistence(h):
    code, out, err = h.run("p", "echo kept > /tmp/note; echo home > $HOME/note; stat -c %d /; exit 7")
    assert code == 7, (code, out, err)
    code, out2, err = h.run("p", "cat /tmp/note $HOME/note; stat -c %d /")
    assert code == 0 and out2.startswith("kept\nhome\n"), (code, out2, err)
    assert out.split()[-1] == out2.split()[-1], "not one view: %r %r" % (out, out2)
    # and another session does not see it
    code, out, err = h.run("q", "cat /tmp/note $HOME/note; echo end")
    assert "kept" not in out and "home" not in out and out.endswith("end\n"), (code, out, err)


def t_attribution(h):
    ws = h.ws
    for name in ("a.txt", "b.txt", "held.txt"):
        with open(os.path.join(ws, name), "w") as f:
            f.write(name + "\n")
    a = h.start("s", "stat -c %%d / > /tmp/a.dev; touch /tmp/a-up; while [ ! -e /tmp/b-up ]; do sleep 0.02; done; "
                "for i in 1 2 3; do cat %s/a.txt > /dev/null; done; echo one > %s/made-by-a; "
                "{ echo held; exec sleep 600; } < %s/held.txt & wait # marker-a" % (ws, ws, ws))
    b = h.start("s", "stat -c %%d / > /tmp/b.dev; touch /tmp/b-up; while [ ! -e /tmp/a-up ]; do sleep 0.02; done; "
                "for i in 1 2 3; do cat %s/b.txt > /dev/null; done; echo two > %s/made-by-b; "
                "echo no > /etc/refused-by-b; exit 3 # marker-b" % (ws, ws))
    out_b, err_b = b.communicate(timeout=120)
    assert b.returncode == 3, (b.returncode, out_b, err_b)
    # said by a's child once it holds held.txt (as in test-serve-share.py)
    assert a.stdout.readline() == "held\n"
    a.send_signal(signal.SIGTERM)  # forwarded: the shell and its sleep go
    a.communicate(timeout=120)
    code, out, err = h.run("s", "cat /tmp/a.dev /tmp/b.dev")
    devs = out.split()
    assert code == 0 and len(devs) == 2 and devs[0] == devs[1], "not one view: %r" % ((code, out, err),)
    ra, rb = h.run_of("marker-a"), h.run_of("marker-b")
    runs = h.runs()
    assert runs[rb]["denials"] >= 1 and runs[ra]["denials"] == 0, (runs[ra], runs[rb])
    # each names its session and the session's own run
    assert runs[ra]["session"] == runs[rb]["session"] == "s", (runs[ra], runs[rb])
    assert runs[ra]["session_run"] == runs[rb]["session_run"] in runs, (runs[ra], runs[rb])
    la, lb = h.log(ra), h.log(rb)
    assert all(x["run"] == ra for x in la) and all(x["run"] == rb for x in lb)
    pa = {x.get("path") for x in la}
    pb = {x.get("path") for x in lb}
    assert ws + "/a.txt" in pa and ws + "/made-by-a" in pa and ws + "/held.txt" in pa, sorted(pa)
    assert ws + "/b.txt" in pb and ws + "/made-by-b" in pb and "/etc/refused-by-b" in pb, sorted(pb)
    for mine, theirs in ((pa, pb), (pb, pa)):
        assert not {p for p in theirs if p and ("/a.txt" in p or "/b.txt" in p or "made-by" in p)} & mine, (pa, pb)
    assert not {x["pid"] for x in la} & {x["pid"] for x in lb}
    # the held file's close came after a's end, and is a's
    assert [x for x in la if x.get("path") == ws + "/held.txt" and x["op"] == "close"], la[-3:]


SYS_PIDFD_GETFD = 438


def take_fd(pid, fd):
    """A descriptor of our own for process PID's FD: the same open file
    (pidfd_getfd), or None when this kernel or its ptrace rules refuse."""
    libc = ctypes.CDLL(None, use_errno=True)
    pidfd = os.pidfd_open(pid)
    try:
        got = libc.syscall(SYS_PIDFD_GETFD, pidfd, fd, 0)
        return got if got >= 0 else None
    finally:
        os.close(pidfd)


def holder_of(path):
    """The pid of the process whose descriptor 3 is the file PATH (a path
    of this test's own: another test may hold a file of the same name)."""
    for pid in os.listdir("/proc"):
        if pid.isdigit():
            try:
                if os.readlink("/proc/%s/fd/3" % pid) == path:
                    return int(pid)
            except OSError:
                pass
    return None


def t_late_release(h):
    with open(os.path.join(h.ws, "late.txt"), "w") as f:
        f.write("late\n")
    go_r, go_w = os.pipe()
    p = h.start("late", "exec 3< %s/late.txt; echo up; read go; exit 0 # marker-late" % h.ws, stdin=go_r)
    os.close(go_r)
    assert p.stdout.readline() == "up\n"
    pid = holder_of(h.ws + "/late.txt")
    assert pid is not None, "no process holds late.txt"
    held = take_fd(pid, 3)
    if held is None:
        os.close(go_w)
        p.communicate(timeout=120)
        if MUST_RUN:
            raise AssertionError("pidfd_getfd refused: %s" % os.strerror(ctypes.get_errno()))
        print("skip late_release: pidfd_getfd refused (Linux 5.6 and ptrace access needed)")
        return
    try:
        os.close(go_w)  # the command reads EOF and ends; the file stays open here
        # the session has taken the command's end: it counts it no more
        wait_for(lambda: "late\t0 running" in subprocess.run([BIN, "session", "list"], env=h.env,
                                                              capture_output=True, text=True).stdout,
                 "the session to take the command's end")
    finally:
        os.close(held)  # the file's last reference: the kernel sends RELEASE now
    out, err = p.communicate(timeout=120)
    assert p.returncode == 0, (p.returncode, out, err)
    rid = h.run_of("marker-late")
    closes = [x for x in h.log(rid) if x.get("path") == h.ws + "/late.txt" and x["op"] == "close"]
    assert len(closes) == 1 and closes[0]["run"] == rid, h.log(rid)[-3:]


def t_survives_sigkill(h):
    with open(os.path.join(h.ws, "in.txt"), "w") as f:
        f.write("in\n")
    # a sleep of its own length: another test (or a mutation run) may have a
    # sleep of its own running at the same time, which pgrep would find too
    nap = "sleep 601.%d" % os.getpid()
    victim = h.start("k", "stat -c %d / > /tmp/victim.dev; echo up; " + nap)
    assert victim.stdout.readline() == "up\n"
    survivor = h.start("k", "stat -c %%d / > /tmp/survivor.dev; cat %s/in.txt; while [ ! -e /tmp/go ]; do "
                       "sleep 0.02; done; cat %s/in.txt; echo after > /tmp/after; cat /tmp/after" % (h.ws, h.ws))
    assert survivor.stdout.readline() == "in\n"
    victim.send_signal(signal.SIGKILL)
    victim.wait(timeout=60)
    # its sandbox went with it, whatever joined the view for it
    wait_for(lambda: subprocess.run(["pgrep", "-x", "-f", nap], capture_output=True).returncode != 0,
             "the killed command's sandbox to end")
    code, out, err = h.run("k", "touch /tmp/go; stat -c %d /")
    assert code == 0, (code, out, err)
    out2, err2 = survivor.communicate(timeout=120)
    assert survivor.returncode == 0 and out2 == "in\nafter\n", (survivor.returncode, out2, err2)
    code, out3, err = h.run("k", "cat /tmp/victim.dev /tmp/survivor.dev")
    devs = out3.split() + out.split()
    assert code == 0 and len(devs) == 3 and len(set(devs)) == 1, (out3, out)


def t_warm_listing(h):
    dirs = ["tree/d%d" % i for i in range(5)]
    for d in dirs + ["ctl"]:
        os.makedirs(os.path.join(h.ws, d))
        with open(os.path.join(h.ws, d, "f"), "w") as f:
            f.write("f\n")
    # the first lists the tree; the keeper refreshes 50 ms after the last
    # listing, well within the command's nap (a margin, not a timing: the
    # next command's requests are what is checked)
    code, out, err = h.run("w", "ls -R tree > /dev/null; sleep 2 # marker-w1", "--log-level", "all")
    assert code == 0, (code, out, err)
    code, out, err = h.run("w", "ls ctl > /dev/null; stat -c %%X ctl %s > /dev/null # marker-w2" % " ".join(dirs),
                           "--log-level", "all")
    assert code == 0, (code, out, err)
    w1, w2 = h.run_of("marker-w1"), h.run_of("marker-w2")
    listed = [x["path"] for x in h.log(w1) if x["op"] == "readdir"]
    assert all(h.ws + "/" + d in listed for d in dirs), listed
    asked = [x["path"] for x in h.log(w2) if x["op"] == "getattr"]
    # the control: listed now, its attribute is stale, and the stat asks
    assert h.ws + "/ctl" in asked, h.log(w2)
    assert not [d for d in dirs if h.ws + "/" + d in asked], asked
    # no log holds the keeper's requests: not the session's own (where the
    # records of no command go), not another run's
    for rid in h.runs():
        if rid not in (w1, w2):
            stray = [x for x in h.log(rid) if x["op"] == "getattr" and "/tree/" in x.get("path", "")]
            assert not stray, stray


def t_refusals_and_bounds(h):
    code, out, err = h.run("r", "true")
    assert code == 0, (code, out, err)
    code, out, err = h.run("r", "true", "--policy", "builtin:host")
    assert code == 125 and "another policy" in err and "another session name" in err, (code, err)
    code, out, err = h.run("r", "true", "--log-level", "all")
    assert code == 125 and "logs at level opens" in err, (code, err)
    for i in range(SESSIONS_MAX - 1):
        code, out, err = h.run("b%d" % i, "true")
        assert code == 0, (i, code, err)
    code, out, err = h.run("over", "true")
    assert code == 125 and "%d sessions run already" % SESSIONS_MAX in err and "session stop" in err, (code, err)
    # stop ends the session, and the command in it
    p = h.start("r", "echo up; sleep 600")
    assert p.stdout.readline() == "up\n"
    h.stop("r")
    out, err = p.communicate(timeout=120)
    assert p.returncode == 125 and "was stopped" in err, (p.returncode, err)
    listed = subprocess.run([BIN, "session", "list"], env=h.env, capture_output=True, text=True).stdout
    assert "\nr\t" not in "\n" + listed and "b0\t" in listed, listed


# exec argv[2:] in a Landlock domain that may write files only beneath the
# directories of argv[1] (':'-separated); exit 3 where the kernel has no
# Landlock (ABI 1: the ruleset's attribute is handled_access_fs alone)
LANDLOCKED = ("import ctypes, os, struct, sys\n"
              "libc = ctypes.CDLL(None, use_errno=True)\n"
              "if libc.syscall(444, None, 0, 1) < 1:\n"
              "    sys.exit(3)\n"
              "handled = (1 << 1) | (1 << 8)\n"
              "attr = ctypes.create_string_buffer(struct.pack('Q', handled))\n"
              "rs = libc.syscall(444, attr, 8, 0)\n"
              "for d in sys.argv[1].split(':'):\n"
              "    fd = os.open(d, os.O_PATH)\n"
              "    rule = ctypes.create_string_buffer(struct.pack('=Qi', handled, fd))\n"
              "    assert libc.syscall(445, rs, 1, rule, 0) == 0, ctypes.get_errno()\n"
              "assert libc.syscall(446, rs, 0) == 0, ctypes.get_errno()\n"
              "os.execvp(sys.argv[2], sys.argv[2:])\n")


def run_until(h, session, script, member, *opts, **kw):
    """Run SCRIPT in SESSION until the run.json of a run of it has MEMBER
    true; (code, out, err, run.json)."""
    for i in range(100):
        marker = "# marker-%s-%d-%d" % (member, os.getpid(), time.monotonic_ns())
        code, out, err = h.run_kw(session, script + " " + marker, *opts, **kw)
        info = h.runs()[h.run_of(marker)]
        if info.get(member):
            return code, out, err, info
        time.sleep(0.05)
    raise AssertionError("never %s: %r" % (member, info))


def ready_run(h, session, script, *opts, **kw):
    """SCRIPT in SESSION until a run of it went to the ready sandbox (the
    first of a session makes the session and its sandbox; the next may
    come before the sandbox is made)."""
    return run_until(h, session, script, "ready_sandbox", *opts, **kw)


def launch_children(pid):
    """The fusebox-launch processes that are PID's children."""
    out = set()
    for task in os.listdir("/proc/%d/task" % pid):
        try:
            with open("/proc/%d/task/%s/children" % (pid, task)) as f:
                children = f.read().split()
        except FileNotFoundError:
            continue
        for child in children:
            try:
                with open("/proc/%s/comm" % child) as f:
                    if f.read().strip() == "fusebox-launch":
                        out.add(int(child))
            except FileNotFoundError:
                pass
    return out


def ancestors(pid):
    """The comm of PID's ancestors, nearest first."""
    return [c for _, c in ancestor_pids(pid)]


def ancestor_pids(pid):
    """[(pid, comm)] of PID's ancestors, nearest first."""
    out = []
    while pid > 1:
        try:
            with open("/proc/%d/stat" % pid) as f:
                stat = f.read()
            pid = int(stat[stat.rindex(")") + 2:].split()[1])
            with open("/proc/%d/comm" % pid) as f:
                out.append((pid, f.read().strip()))
        except FileNotFoundError:
            break
    return out


def t_ready_sandbox(h):
    sub = os.path.join(h.ws, "sub dir")
    os.mkdir(sub)
    with open(os.path.join(sub, "in.txt"), "w") as f:
        f.write("in\n")
    # argv, environment, cwd, umask, stdin, stdout, stderr, exit status
    code, out, err, info = ready_run(
        h, "rd", 'printf "%s|" "$0" "$1" "$FB_T" "$PWD" "$(umask)"; cat; cat in.txt; echo oops >&2; exit 7',
        "--setenv", "FB_T", "a b", "--workspace", h.ws, cwd=sub, input="from stdin\n", umask=0o027)
    assert code == 7, (code, out, err)
    assert out == "/bin/sh||a b|%s|0027|from stdin\nin\n" % sub, repr(out)
    assert err == "oops\n", repr(err)
    assert info["exit_status"] == 7 and info["ready_sandbox"] is True, info
    # a signal's death, a missing command
    code, out, err, info = ready_run(h, "rd", "kill -TERM $$")
    assert code == 143, (code, out, err)
    for i in range(100):
        code, out, err = h.run_kw("rd", None, argv=["no-such-command-%d" % os.getpid()])
        info = h.runs()[h.last_run()]
        if info.get("ready_sandbox"):
            break
        time.sleep(0.05)
    assert info.get("ready_sandbox") and code == 127 and "no-such-command" in err, (code, err, info)
    # its records are its own: its run, its pid namespace's pids
    code, out, err, info = ready_run(h, "rd", "cat %s/in.txt > /dev/null" % shlex.quote(sub))
    rid = info["run"]
    log = h.log(rid)
    assert [x for x in log if x.get("path") == sub + "/in.txt"], log[-3:]
    assert all(x["run"] == rid for x in log), log[-3:]
    # a forwarded signal; the client's SIGKILL kills the command
    nap = "sleep 602.%d" % os.getpid()
    for i in range(100):
        p = h.start("rd", "echo up; exec " + nap)
        assert p.stdout.readline() == "up\n"
        pid = int(subprocess.run(["pgrep", "-x", "-f", nap], capture_output=True, text=True).stdout.split()[0])
        if "fusebox-launch" in ancestors(pid):
            break
        p.kill()
        p.communicate(timeout=120)
        wait_for(lambda: subprocess.run(["pgrep", "-x", "-f", nap], capture_output=True).returncode != 0,
                 "the command to end")
    else:
        raise AssertionError("never ran in the ready sandbox")
    p.send_signal(signal.SIGTERM)
    out, err = p.communicate(timeout=120)
    assert p.returncode == 143, (p.returncode, out, err)
    p = h.start("rd", "echo up; exec " + nap)
    assert p.stdout.readline() == "up\n"
    p.kill()
    p.wait(timeout=60)
    wait_for(lambda: subprocess.run(["pgrep", "-x", "-f", nap], capture_output=True).returncode != 0,
             "the killed client's command to end")


def t_ready_sandbox_not_for_others(h):
    code, out, err, info = ready_run(h, "ro", "true")
    assert code == 0, (code, out, err)
    # other limits: the command keeps its own
    code, out, err = h.run_kw("ro", "ulimit -n", prefix=["prlimit", "--nofile=512:512"])
    assert code == 0 and out == "512\n", (code, out, err)
    info = h.runs()[h.last_run()]
    assert info["ready_sandbox"] is False and "resource limits" in info["ready_sandbox_why"], info
    # another nice value
    code, out, err = h.run_kw("ro", "cut -d' ' -f19 /proc/self/stat", prefix=["nice", "-n", "7"])
    assert code == 0 and out == "%d\n" % min(os.nice(0) + 7, 19), (code, out, err)
    info = h.runs()[h.last_run()]
    assert info["ready_sandbox"] is False and "scheduling" in info["ready_sandbox_why"], info
    # the daemon's limits lowered after its sandbox was made: a caller with
    # the daemon's new limits does not get the sandbox made with the old
    nap = "sleep 604.%d" % os.getpid()
    for i in range(100):
        p = h.start("ro", "echo up; exec " + nap)
        assert p.stdout.readline() == "up\n"
        pid = int(subprocess.run(["pgrep", "-x", "-f", nap], capture_output=True, text=True).stdout.split()[0])
        chain = ancestor_pids(pid)
        comms = [c for _, c in chain]
        if "fusebox-launch" in comms:
            # the sandbox's chain (pid 1, the relay, the outer child) and
            # its maker run fusebox-launch; the first fusebox-main above
            # them is the daemon, which makes the next sandbox when this
            # command ends
            daemon = [q for q, c in chain[comms.index("fusebox-launch"):] if c == "fusebox-main"][0]
            # this sandbox's own maker; the next one's may start before
            # this command ends (READY_AFTER_MS after it took the sandbox)
            own = {q for q, _ in chain}
        os.kill(pid, signal.SIGTERM)
        p.communicate(timeout=60)
        if "fusebox-launch" in comms:
            break
    # the next sandbox's maker started (with the daemon's limits as they are
    # now), and only then the daemon's limits lowered
    wait_for(lambda: launch_children(daemon) - own, "the next sandbox's maker")
    subprocess.run(["prlimit", "--pid", str(daemon), "--nofile=300:300"], check=True)
    code, out, err = h.run_kw("ro", "ulimit -n", prefix=["prlimit", "--nofile=300:300"])
    assert code == 0 and out == "300\n", (code, out, err)
    info = h.runs()[h.last_run()]
    assert info["ready_sandbox"] is False and "resource limits" in info["ready_sandbox_why"], info
    # the maker changed after its sandbox was made, by any process of the
    # user (renice, prlimit --pid): a caller with the maker's new nice
    # value and limits does not get the sandbox made with the old
    wait_for(lambda: launch_children(daemon), "the next sandbox's maker")
    time.sleep(0.3)  # the sandbox made (pid 1 forked): a margin
    for maker in launch_children(daemon):
        subprocess.run(["renice", "-n", "19", "-p", str(maker)], check=True, capture_output=True)
        subprocess.run(["prlimit", "--pid", str(maker), "--nofile=200:200"], check=True)
    code, out, err = h.run_kw("ro", "echo $(ulimit -n) $(cut -d' ' -f19 /proc/self/stat)",
                              prefix=["prlimit", "--nofile=200:200", "nice", "-n", "19"])
    assert code == 0 and out == "200 19\n", (code, out, err)
    info = h.runs()[h.last_run()]
    assert info["ready_sandbox"] is False and "resource limits" in info["ready_sandbox_why"], info
    # a Landlock domain (which no /proc file shows): the command does not
    # shed it through the daemon's sandbox; a sandbox of its own can't be
    # made in it here (its maps are files it may not write), and that is
    # the caller's confinement at work
    escaped = os.path.join(h.ws, "escaped-landlock")
    code, out, err = h.run_kw("ro", "echo out > %s" % escaped,
                              prefix=[sys.executable, "-c", LANDLOCKED,
                                      h.env["XDG_STATE_HOME"] + ":/dev"])
    if code == 3 and not MUST_RUN:
        print("skip the Landlock case: this kernel has no Landlock")
    else:
        assert code != 3, "this kernel has no Landlock"
        assert not os.path.exists(escaped), "a Landlocked caller wrote through the daemon's sandbox"
        info = h.runs()[h.last_run()]
        assert info["ready_sandbox"] is False and "Landlock" in info["ready_sandbox_why"], info
        # and the caller is told what stood in the way
        assert code == 125 and "could not be written at all: a Landlock domain fusebox runs in" in err, (code, err)
    # another cgroup: the command is in the caller's (cgroup v2, or v1's
    # pids hierarchy)
    root = "/sys/fs/cgroup" if os.path.exists("/sys/fs/cgroup/cgroup.controllers") else "/sys/fs/cgroup/pids"
    cg = os.path.join(root, "fusebox-test-%d" % os.getpid())
    try:
        os.mkdir(cg)
        if not os.path.exists(os.path.join(cg, "cgroup.procs")):
            raise OSError("not a cgroup file system")
    except OSError as e:
        if os.path.isdir(cg):
            os.rmdir(cg)
        if MUST_RUN:
            raise
        print("skip the cgroup case: %s: %s" % (cg, e))
        return
    try:
        nap = "sleep 603.%d" % os.getpid()

        def enter():
            with open(os.path.join(cg, "cgroup.procs"), "w") as f:
                f.write("0")

        p = h.start("ro", "echo up; exec " + nap, preexec_fn=enter)
        assert p.stdout.readline() == "up\n"
        pid = int(subprocess.run(["pgrep", "-x", "-f", nap], capture_output=True, text=True).stdout.split()[0])
        with open("/proc/%d/cgroup" % pid) as f:
            lines = f.read().split()
        assert [x for x in lines if x.endswith(":/" + os.path.basename(cg))], ("the command left the caller's "
                                                                             "cgroup", lines)
        assert "fusebox-launch" not in ancestors(pid), ancestors(pid)
        os.kill(pid, signal.SIGTERM)
        p.communicate(timeout=60)
        assert p.returncode == 143, p.returncode
        info = h.runs()[h.run_of("up; exec " + nap)]
        assert "cgroup" in info.get("ready_sandbox_why", ""), info
    finally:
        wait_for(lambda: not open(os.path.join(cg, "cgroup.procs")).read().strip(), "the cgroup to empty")
        os.rmdir(cg)


def quick_run(h, session, script, **kw):
    """SCRIPT in SESSION (no option: the quick client's command line) until
    a run of it was the quick client's: the session must have run a full
    client's command with the same environment and directory in its ready
    sandbox, and made the next."""
    return run_until(h, session, script, "quick", **kw)


def t_quick_client(h):
    with open(os.path.join(h.ws, "q.txt"), "w") as f:
        f.write("q\n")
    script = 'env | LC_ALL=C sort; pwd; umask; cat; cat q.txt; echo err >&2; exit 3'
    # the full client (an option that changes nothing keeps it from the
    # quick client's command line), then the quick client: the same
    # command sees the same environment, directory, umask and streams
    code, full, err, info = ready_run(h, "qk", script, "--session-idle-timeout", "600", input="in\n",
                                      umask=0o027)
    assert code == 3 and err == "err\n" and not info.get("quick"), (code, err, info)
    code, out, err, q = quick_run(h, "qk", script, input="in\n", umask=0o027)
    assert (code, out, err) == (3, full, "err\n"), (code, out, err, full)
    assert "in\nq\n" in out and "HOME=" in out, out
    # its run.json describes it as the full client's would, with its own
    # run, command, log and supervisor (the quick client, not the daemon)
    for k in ("kind", "cwd", "network", "uid", "gid", "session", "session_run", "workspace", "policy",
              "ready_sandbox"):
        assert q[k] == info[k], (k, q, info)
    assert q["exit_status"] == 3 and q["command"][:2] == ["/bin/sh", "-c"] and "ended" in q, q
    assert q["log"] == os.path.join(h.env["XDG_STATE_HOME"], "fusebox", "runs", q["run"], "access.jsonl"), q
    daemon = h.runs()[q["session_run"]]["supervisor"]["pid"]
    assert q["supervisor"]["pid"] not in (daemon, info["supervisor"]["pid"]), (q, daemon)
    with open(os.path.join(h.env["XDG_STATE_HOME"], "fusebox", "runs", q["run"], "policy.json")) as f:
        qpolicy = f.read()
    with open(os.path.join(h.env["XDG_STATE_HOME"], "fusebox", "runs", info["run"], "policy.json")) as f:
        assert f.read() == qpolicy
    # its records are its own
    log = h.log(q["run"])
    assert [x for x in log if x.get("path") == os.path.join(h.ws, "q.txt")], log[-3:]
    assert all(x["run"] == q["run"] for x in log), log[-3:]
    # another environment is not the one the session learned: the full
    # client runs it, and then the quick client has it too
    # (each after a pause in which the session makes its next sandbox, so
    # that the quick client would have had one: a margin, not a measure)
    for i in range(4):
        time.sleep(0.3)
        other = dict(h.env, FB_QUICK_OTHER=str(i))
        p = subprocess.run(h.argv("qk", "echo $FB_QUICK_OTHER # other-env-%d" % i), cwd=h.ws, env=other,
                           capture_output=True, text=True, timeout=120)
        assert p.returncode == 0 and p.stdout == "%d\n" % i, (p.returncode, p.stdout, p.stderr)
        info = h.runs()[h.run_of("other-env-%d" % i)]
        assert not info.get("quick"), info
    code, out, err, q = quick_run(h, "qk", "echo $FB_QUICK_OTHER", env=other)
    assert code == 0 and out == "3\n", (code, out, err)
    # a terminal is the full client's (it keeps the terminal's modes)
    master, slave = os.openpty()
    try:
        p = subprocess.run(h.argv("qk", "test -t 0 && echo tty # on-a-tty"), cwd=h.ws, env=h.env, stdin=slave,
                           capture_output=True, text=True, timeout=120)
    finally:
        os.close(slave)
        os.close(master)
    assert p.returncode == 0 and p.stdout == "tty\n", (p.returncode, p.stdout, p.stderr)
    assert not h.runs()[h.run_of("on-a-tty")].get("quick")
    # a signal is forwarded, and the status is the command's
    nap = "sleep 605.%d" % os.getpid()

    def started_quick(script):
        for i in range(100):
            attempt = "%s # try-%d-%d" % (script, os.getpid(), time.monotonic_ns())
            p = h.start("qk", attempt)
            assert p.stdout.readline() == "up\n"
            info = h.runs()[h.run_of(attempt)]
            if info.get("quick"):
                return p, info["run"]
            p.kill()
            p.communicate(timeout=120)
            wait_for(lambda: subprocess.run(["pgrep", "-x", "-f", nap], capture_output=True).returncode != 0,
                     "the command to end")
            time.sleep(0.05)
        raise AssertionError("never ran by the quick client")

    p, rid = started_quick("echo up; exec " + nap)
    p.send_signal(signal.SIGTERM)
    out, err = p.communicate(timeout=120)
    assert p.returncode == 143, (p.returncode, out, err)
    assert h.runs()[rid]["exit_status"] == 143, h.runs()[rid]
    # a quick client killed: its command with it, and its run says so
    p, rid = started_quick("echo up; exec " + nap)
    p.kill()
    p.wait(timeout=60)
    wait_for(lambda: subprocess.run(["pgrep", "-x", "-f", nap], capture_output=True).returncode != 0,
             "the killed client's command to end")
    wait_for(lambda: "ended" in h.runs()[rid], "the killed client's run to end")
    assert h.runs()[rid]["exit_status"] == 125 and "client went away" in h.runs()[rid]["error"], h.runs()[rid]
    # the session stopped under it: 125, said, and in its run
    p, rid = started_quick("echo up; exec " + nap)
    h.stop("qk")
    out, err = p.communicate(timeout=120)
    assert p.returncode == 125 and "the session qk was stopped" in err, (p.returncode, out, err)
    assert h.runs()[rid]["exit_status"] == 125 and "was stopped" in h.runs()[rid]["error"], h.runs()[rid]


def t_quick_not_past_policy(h):
    # a session under another policy than a plain command line computes:
    # the plain command is refused by the full client, every time, never
    # run by the quick client under the session's policy
    code, out, err, info = ready_run(h, "qh", "true", "--policy", "builtin:host")
    assert code == 0, (code, out, err)
    code, out, err, info = ready_run(h, "qh", "true", "--policy", "builtin:host")
    for i in range(3):
        time.sleep(0.3)  # the next sandbox made: the quick client would have had it
        code, out, err = h.run("qh", "echo ran")
        assert code == 125 and out == "" and "another policy" in err, (code, out, err)


def t_back_to_back(h):
    # commands run one after the other, at once: each finds the sandbox
    # the last one's end started making (it waits for it rather than
    # making its own), by the quick client
    code, out, err, info = ready_run(h, "bb", "true")
    code, out, err, info = quick_run(h, "bb", "true")
    markers = ["# back-to-back-%d-%d" % (os.getpid(), i) for i in range(10)]
    for m in markers:
        code, out, err = h.run("bb", "true " + m)
        assert code == 0, (code, out, err)
    runs = [h.runs()[h.run_of(m)] for m in markers]
    quick = [r for r in runs if r.get("quick")]
    # (without the wait, every other one made its own: about 5 of 10)
    assert len(quick) >= 8, [(r.get("quick"), r.get("ready_sandbox_why")) for r in runs]


def run_tests(tests, prefix):
    """Run TESTS ((name, function of a Host) pairs), those named on the
    command line if any, each with a Host of its own whose sessions are
    stopped after it; exit 0, 1, or 77 when a prerequisite is missing."""
    if os.geteuid() != 0 or not os.access("/dev/fuse", os.R_OK | os.W_OK):
        print("needs root and /dev/fuse", file=sys.stderr)
        sys.exit(1 if MUST_RUN else 77)
    only = sys.argv[1:]
    failed = 0
    tmp = tempfile.mkdtemp(prefix=prefix)
    try:
        for name, t in tests:
            if only and name not in only:
                continue
            h = Host(tmp)
            try:
                t(h)
                print("ok", name)
            except Exception:  # noqa: BLE001 - report and go on
                failed += 1
                print("FAIL %s: %s\n  by hand: cd %s && XDG_STATE_HOME=%s %s run --session NAME -- ..." %
                      (name, traceback.format_exc(), h.ws, h.env["XDG_STATE_HOME"], BIN))
            finally:
                h.close()
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    sys.exit(1 if failed else 0)


if __name__ == "__main__":
    run_tests([("persistence", t_persistence), ("attribution", t_attribution),
               ("late_release", t_late_release), ("survives_sigkill", t_survives_sigkill),
               ("warm_listing", t_warm_listing), ("ready_sandbox", t_ready_sandbox),
               ("ready_sandbox_not_for_others", t_ready_sandbox_not_for_others),
               ("refusals_and_bounds", t_refusals_and_bounds), ("quick_client", t_quick_client),
               ("quick_not_past_policy", t_quick_not_past_policy), ("back_to_back", t_back_to_back)],
              "fusebox-run-session-")
