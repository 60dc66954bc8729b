#!/usr/bin/env python3
"""Adversarial tests: who may reach a `fusebox run --session` daemon.

The daemon that keeps a session's view listens on a socket in fusebox's
state directory.  Only the user's own processes outside every sandbox may
talk to it:

- a command inside the session can't reach the socket, which is on the
  host (the test sees it): hidden from the view whatever the policy says,
  under builtin:host and with a rule of the user's that reads it;
- a process of the same user in another pid namespace (as every process
  inside a sandbox is) is refused at once, where the same request from
  the host is answered;
- another user is refused, even when the directory and the socket are
  opened to it.
- a process in a chroot (another root in the daemon's mount namespace: a
  command joins the view's namespaces and would leave the chroot) and
  one in another mount namespace are refused, saying why, and nothing of
  theirs runs.
- a client speaking the protocol itself can't have the daemon make a log
  where its own run directory is not (a confused deputy for a caller
  under Landlock or in a chroot, or a way into another command's log).

And whom `run --session` trusts as its daemon: no one but the user.

- a fusebox/ or sessions/ directory of another user, or one others may
  write, is refused before anything is connected to (125, naming it);
- a socket answered by another user's process is refused (125, naming
  its uid) and that process is sent nothing;
- the daemon's mount namespace can't choose where the maps of the
  command's user namespace are written: with a /proc of its own there (an
  empty tmpfs), they are still written through the caller's /proc.
- a daemon whose socket's directory entry is gone (its state directory
  removed), which no client can reach any more, ends by itself.

What a command does stays its own, whoever in it does it:

- a thread that is not its process's first (FUSE names the caller by
  thread id): its file made and its refused write are in the command's
  log and run.json's denials, not in the session's log.
- records of no command (made by a process of no command's pid
  namespace: here the test's own, from inside the view's mount namespace)
  go to the session's log, which has a budget (--log-max-size) like a
  command's: a flood of them stops the session and its commands, and the
  log stays near its budget.
- a hidden name asked again: each command that asks for it (and each
  time) gets a record in its own log; the kernel does not answer a later
  attempt from a negative entry the first left behind.

Exit status: 0 all passed, 1 a check failed, 77 a prerequisite is missing
(unless FUSEBOX_TESTS_MUST_RUN=1).
"""
import ctypes
import hashlib
import json
import importlib.util
import os
import shutil
import signal
import socket
import stat
import struct
import subprocess
import tempfile
import threading
import time

_spec = importlib.util.spec_from_file_location(
    "run_session", os.path.join(os.path.dirname(os.path.abspath(__file__)), "test-run-session.py"))
rs = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(rs)

NOBODY = 65534


def sessions_root(h):
    return os.path.join(h.env["XDG_STATE_HOME"], "fusebox", "sessions")


# A session's control message (launcher-session-wire.h's Msg): type HELLO,
# answered with INFO by a daemon that takes the peer.
HELLO_PROBE = """
import ctypes, socket, sys
class Msg(ctypes.Structure):
    _fields_ = [("type", ctypes.c_uint32), ("uid", ctypes.c_uint32), ("gid", ctypes.c_uint32),
                ("level", ctypes.c_uint32), ("journal", ctypes.c_uint32), ("running", ctypes.c_uint32),
                ("log_full", ctypes.c_uint32), ("ready", ctypes.c_uint32), ("quick", ctypes.c_uint32),
                ("status", ctypes.c_int32), ("n1", ctypes.c_uint64),
                ("n2", ctypes.c_uint64), ("n3", ctypes.c_uint64), ("digest", ctypes.c_char * 65),
                ("run_id", ctypes.c_char * 64), ("text", ctypes.c_char * 4096), ("more", ctypes.c_char * 4096)]
s = socket.socket(socket.AF_UNIX, socket.SOCK_SEQPACKET)
s.settimeout(20)
try:
    s.connect(sys.argv[1])
    s.send(bytes(Msg(type=1)))
    answer = s.recv(ctypes.sizeof(Msg))
except OSError as e:
    print("refused")
    sys.exit(0)
print("answered" if len(answer) >= 4 and int.from_bytes(answer[:4], "little") == 2 else "closed")
"""

# JOIN (type 3) under the session's policy (its digest: the SHA-256 of its
# policy.json) and log level (1, opens), naming a log outside any run
# directory: the answer's type (9 is REFUSED) and text
JOIN_PROBE = """
s = socket.socket(socket.AF_UNIX, socket.SOCK_SEQPACKET)
s.settimeout(20)
s.connect(sys.argv[1])
s.send(bytes(Msg(type=1)))
s.recv(ctypes.sizeof(Msg))
m = Msg(type=3, level=1, digest=b"%(digest)s", run_id=b"20990101-000000-forged", text=b"%(log)s")
s.send(bytes(m))
a = Msg.from_buffer_copy(s.recv(ctypes.sizeof(Msg)))
print(("refused-msg " if a.type == 9 else "answered %%d " %% a.type) + a.text.decode())
"""


def listed(h, prefix=(), **kw):
    """What `fusebox session list` prints, run after PREFIX; "ran" after it."""
    p = subprocess.run(list(prefix) + ["/bin/sh", "-c", '"$0" session list; echo ran', rs.BIN], env=h.env,
                       capture_output=True, text=True, timeout=60, **kw)
    assert p.stdout.endswith("ran\n"), (p.stdout, p.stderr)
    return p.stdout[:-len("ran\n")]


def t_command_cannot_reach_control(h):
    code, out, err = h.run("c", "true")
    assert code == 0, (code, out, err)
    sock = os.path.join(sessions_root(h), "c.sock")
    assert stat.S_ISSOCK(os.stat(sock).st_mode), sock
    probe = ("import socket, sys\n"
             "s = socket.socket(socket.AF_UNIX, socket.SOCK_SEQPACKET)\n"
             "try:\n"
             "    s.connect(sys.argv[1])\n"
             "    print('connected')\n"
             "except OSError as e:\n"
             "    print(e.errno)\n")
    # the default policy, the host's whole tree writable, and a rule that
    # reads the socket itself: never the socket
    for opts in ((), ("--policy", "builtin:host"), ("--policy", "builtin:host", "--read", sock)):
        session = "c" if not opts else "c%d" % len(opts)
        code, out, err = h.run(session, "/usr/bin/python3 -c \"%s\" %s; ls -a %s; echo end" %
                               (probe.replace('"', '\\"'), sock, sessions_root(h)), *opts)
        assert "connected" not in out and out.startswith("2\n") and out.endswith("end\n"), (opts, code, out, err)
        assert "c.sock" not in out, (opts, out)


def t_other_pid_namespace_refused(h):
    code, out, err = h.run("n", "true")
    assert code == 0, (code, out, err)
    assert "n\t" in listed(h), listed(h)
    if shutil.which("unshare") is None:
        return
    assert listed(h, ("unshare", "--pid", "--fork")) == "", "a process in another pid namespace was answered"


def t_other_user_refused(h):
    code, out, err = h.run("u", "true")
    assert code == 0, (code, out, err)
    root = sessions_root(h)
    sock = os.path.join(root, "u.sock")
    opened = [(p, os.stat(p).st_mode) for p in (os.path.dirname(h.dir), h.dir, h.env["XDG_STATE_HOME"],
                                               os.path.dirname(root), root, sock)]
    try:
        for p, mode in opened:
            os.chmod(p, stat.S_IMODE(mode) | (0o666 if p == sock else 0o755))
        # nobody lists the directory, and connects, but is not answered
        assert os.path.basename(sock) in subprocess.run(["ls", root], capture_output=True, text=True,
                                                        user=NOBODY, group=NOBODY).stdout
        nobody = listed(h, user=NOBODY, group=NOBODY)
        assert "u\t" not in nobody, nobody
        assert "u\t" in listed(h), "the owner is not answered"
        # fusebox's own client refuses a directory that is not its caller's
        # before it connects: the daemon's check is shown by a client of our
        # own, which says HELLO as `session list` does (answered for the
        # owner first, so that the probe itself is shown to work)
        hello = ["/usr/bin/python3", "-c", HELLO_PROBE, sock]
        owner = subprocess.run(hello, capture_output=True, text=True, timeout=60)
        assert owner.stdout == "answered\n", (owner.stdout, owner.stderr)
        other = subprocess.run(hello, capture_output=True, text=True, timeout=60, user=NOBODY, group=NOBODY)
        assert other.stdout in ("closed\n", "refused\n"), (other.stdout, other.stderr)
    finally:
        for p, mode in reversed(opened):
            os.chmod(p, stat.S_IMODE(mode))


def session_run(h):
    """The run id of the session's own run (its daemon's log)."""
    found = [rid for rid, info in h.runs().items() if info.get("kind") == "session"]
    assert len(found) == 1, found
    return found[0]


def t_thread_attributed(h):
    # the refused path exists nowhere: the refusal is the read-only /etc
    assert not os.path.exists("/etc/thread-refused")
    code, out, err = h.run("t", "true")
    assert code == 0, (code, out, err)
    code, out, err = h.run("t", "/usr/bin/python3 -c \"%s\" # marker-thread" % rs.THREAD_PROBE.replace('"', '\\"'))
    assert code == 1 and out.startswith("refused "), (code, out, err)
    assert os.path.exists(os.path.join(h.ws, "thread-made.txt"))
    rid = h.run_of("marker-thread")
    mine = h.log(rid)
    paths = {(x.get("path"), x["decision"] != "allow") for x in mine}
    assert (h.ws + "/thread-made.txt", False) in paths, sorted(map(str, paths))
    assert ("/etc/thread-refused", True) in paths, sorted(map(str, paths))
    assert h.runs()[rid]["denials"] >= 1, h.runs()[rid]
    theirs = [x for x in h.log(session_run(h)) if "thread-" in (x.get("path") or "")]
    assert not theirs, theirs


def t_hidden_each_time(h):
    secret = os.path.join(h.ws, "secret.txt")
    with open(secret, "w") as f:
        f.write("secret\n")
    opts = ("--hide", secret)
    for marker in ("first", "second"):
        code, out, err = h.run("h", "cat secret.txt; cat secret.txt; echo end # marker-%s" % marker, *opts)
        assert code == 0 and out == "end\n", (code, out, err)
    for marker in ("first", "second"):
        rid = h.run_of("marker-" + marker)
        hidden = [x for x in h.log(rid) if x.get("path") == secret and x["decision"] == "hide"]
        assert len(hidden) >= 2, (marker, hidden)
        assert h.runs()[rid]["denials"] >= 2, h.runs()[rid]


def fake_daemon(sock, user=None, wrap=(), mounts=None, proof=False):
    """A process that listens at SOCK and prints what it is sent, run by
    WRAP (its namespaces); MOUNTS: a shell line it runs once it listens.
    PROOF: its INFO names a memfd of its own, as a daemon's, and it hangs
    up on a QUICK without an answer."""
    code = ("import os, socket, struct, sys\n"
            "FMT = '<9Ii3Q65s64s4096s4096s7x'\n"
            "SIZE = struct.calcsize(FMT)\n"
            "PROOF = os.memfd_create('proof') if os.environ.get('FAKE_PROOF') else 0\n"
            "def msg(t, text=b'', n1=0):\n"
            "    return struct.pack(FMT, t, 0, 0, 0, 0, 0, 0, 0, 0, 0, n1, 0, 0, b'', b'fake', text, b'')\n"
            "ns = [os.open('/proc/self/ns/user', os.O_RDONLY), os.open('/proc/self/ns/mnt', os.O_RDONLY)]\n"
            "s = socket.socket(socket.AF_UNIX, socket.SOCK_SEQPACKET)\n"
            "s.bind(sys.argv[1]); os.chmod(sys.argv[1], 0o777); s.listen(8)\n"
            "if os.environ.get('FAKE_MOUNTS'):\n"
            "    assert os.system(os.environ['FAKE_MOUNTS']) == 0\n"
            "print('listening', flush=True)\n"
            "while True:\n"
            "    c, _ = s.accept()\n"
            "    while True:\n"
            "        data, fds, _, _ = socket.recv_fds(c, SIZE, 6)\n"
            "        for fd in fds:\n"
            "            os.close(fd)\n"
            "        if not data:\n"
            "            break\n"
            "        t = struct.unpack(FMT, data)[0]\n"
            "        print('got', t, flush=True)\n"
            "        if t == 1:\n"
            "            c.send(msg(2, b'/nonexistent', PROOF))\n"
            "        elif t == 16:\n"
            "            break\n"
            "        elif t == 3:\n"
            "            socket.send_fds(c, [msg(4)], ns)\n"
            "        elif t == 5:\n"
            "            c.send(msg(6))\n"
            "        elif t == 7:\n"
            "            c.send(msg(8))\n"
            "    c.close()\n")
    env = dict(os.environ, FAKE_MOUNTS=mounts or "", FAKE_PROOF="1" if proof else "")
    p = subprocess.Popen(list(wrap) + ["/usr/bin/python3", "-c", code, sock], stdout=subprocess.PIPE,
                         stderr=subprocess.PIPE, text=True, user=user, group=user, env=env)
    line = p.stdout.readline()
    assert line == "listening\n", (line, p.stderr.read() if p.poll() is not None else "")
    return p


def stop_fake(p):
    p.kill()
    out, err = p.communicate(timeout=60)
    return out


def t_foreign_directory_refused(h):
    root = sessions_root(h)
    code, out, err = h.run("d", "true")
    assert code == 0, (code, out, err)
    # with its daemon answering there, the directory is refused before it
    # is connected to; with none, before one is started there
    cases = ((root, NOBODY, 0o700), (root, 0, 0o777), (os.path.dirname(root), 0, 0o777),
             (os.path.dirname(root), NOBODY, 0o755))
    for path, owner, mode in cases + ((None, None, None),) + cases:
        if path is None:
            h.stop("d")
            continue
        st = os.stat(path)
        try:
            os.chown(path, owner, owner)
            os.chmod(path, mode)
            code, out, err = h.run("d", "echo ran")
            assert code == 125 and "ran" not in out, (path, owner, mode, code, out, err)
            assert path in err and "XDG_STATE_HOME" in err, (path, err)
        finally:
            os.chown(path, st.st_uid, st.st_gid)
            os.chmod(path, stat.S_IMODE(st.st_mode))
    code, out, err = h.run("d", "echo ran")
    assert code == 0 and out == "ran\n", (code, out, err)


def t_foreign_daemon_refused(h):
    code, out, err = h.run("g", "true")
    assert code == 0, (code, out, err)
    theirs = tempfile.mkdtemp(prefix="fusebox-foreign-")
    fake = None
    try:
        os.chown(theirs, NOBODY, NOBODY)
        os.chmod(theirs, 0o755)
        fake = fake_daemon(os.path.join(theirs, "s.sock"), user=NOBODY)
        # in our own directory, and answered by another user
        os.symlink(os.path.join(theirs, "s.sock"), os.path.join(sessions_root(h), "evil.sock"))
        code, out, err = h.run("evil", "echo ran")
        assert code == 125 and "ran" not in out, (code, out, err)
        assert "uid %d" % NOBODY in err and "evil.sock" in err, err
    finally:
        got = stop_fake(fake) if fake is not None else ""
        shutil.rmtree(theirs, ignore_errors=True)
        h.sessions.discard("evil")
    assert "got" not in got, "the other user's process was sent: %r" % got


def t_quick_unanswered(h):
    # a daemon of ours that takes the quick client's command and hangs up:
    # the command may have run, so it is not run again through the full
    # client (which would say HELLO and JOIN to it), and that is said
    code, out, err = h.run("q0", "true")
    assert code == 0, (code, out, err)
    fake = fake_daemon(os.path.join(sessions_root(h), "qs.sock"), proof=True)
    try:
        code, out, err = h.run("qs", "echo ran")
    finally:
        got = stop_fake(fake)
        h.sessions.discard("qs")
    assert code == 125 and out == "" and "took the command and did not answer" in err, (code, out, err)
    assert got.split("\n")[:2] == ["got 1", "got 16"] and "got 3" not in got, got


# A session's control message (launcher/launcher-session-wire.h), packed.
WIRE = "<9Ii3Q65s64s4096s4096s7x"


def wire(t, n1=0):
    return struct.pack(WIRE, t, 0, 0, 0, 0, 0, 0, 0, 0, 0, n1, 0, 0, b"", b"", b"", b"")


def unwire(data):
    f = struct.unpack(WIRE, data)
    return {"type": f[0], "status": f[9], "n1": f[10], "run_id": f[14].rstrip(b"\0").decode(),
            "text": f[15].rstrip(b"\0").decode(), "more": f[16].rstrip(b"\0").decode()}


def quick_hello(h, session):
    """HELLO to SESSION's daemon, as a client of its own: the socket, and
    the daemon's proof opened through its /proc/PID/fd."""
    sock = socket.socket(socket.AF_UNIX, socket.SOCK_SEQPACKET)
    sock.settimeout(60)
    sock.connect(os.path.join(sessions_root(h), session + ".sock"))
    sock.send(wire(1))
    info = unwire(sock.recv(struct.calcsize(WIRE)))
    pid = struct.unpack("3i", sock.getsockopt(socket.SOL_SOCKET, socket.SO_PEERCRED, struct.calcsize("3i")))[0]
    return sock, os.open("/proc/%d/fd/%d" % (pid, info["n1"]), os.O_RDONLY | os.O_NONBLOCK)


def quick_send(sock, h, argv, env, proof):
    """QUICK: ARGV, ENV and the workspace as its directory, our umask, in a
    sealed memfd; /dev/null as its streams; PROOF."""
    import fcntl
    strings = b"".join(x.encode() + b"\0" for x in list(argv) + ["%s=%s" % kv for kv in env.items()] + [h.ws])
    mask = os.umask(0)
    os.umask(mask)
    spec = os.memfd_create("spec", os.MFD_CLOEXEC | os.MFD_ALLOW_SEALING)
    os.write(spec, struct.pack("<4IQ4I", 0x66626c32, 0, len(argv), len(env), len(strings), 0xffffffff,
                               0xffffffff, mask, 0) + strings)
    fcntl.fcntl(spec, fcntl.F_ADD_SEALS, fcntl.F_SEAL_SEAL | fcntl.F_SEAL_SHRINK | fcntl.F_SEAL_GROW |
                fcntl.F_SEAL_WRITE)
    null = os.open("/dev/null", os.O_RDWR)
    try:
        socket.send_fds(sock, [wire(16)], [spec, null, null, null, proof])
    finally:
        for fd in (spec, null, proof):
            os.close(fd)


def quick_by_hand(h, session, argv, env):
    """The quick client's start, said by this test: the socket and
    STARTED's answer, or None when the daemon said NOT_QUICK."""
    sock, proof = quick_hello(h, session)
    quick_send(sock, h, argv, env, proof)
    answer = unwire(sock.recv(struct.calcsize(WIRE)))
    if answer["type"] == 17:
        sock.close()
        return None, answer
    assert answer["type"] == 13, answer
    return sock, answer


def t_quick_status_kept(h):
    # a quick command that exited by itself keeps its status in run.json
    # whatever its client does next: hangs up without ENDED, or sees the
    # session stopped before it sends it
    rs.ready_run(h, "qk", "true")
    for i in range(100):
        time.sleep(0.05)
        sock, answer = quick_by_hand(h, "qk", ["/bin/sh", "-c", "exit 7"], h.env)
        if sock is not None:
            break
    else:
        raise AssertionError("never taken by the daemon: %r" % (answer,))
    ended = unwire(sock.recv(struct.calcsize(WIRE)))
    assert ended["type"] == 15 and ended["n1"] == 7, ended
    rid = answer["run_id"]
    sock.close()
    rs.wait_for(lambda: "ended" in h.runs()[rid], "the run's end")
    info = h.runs()[rid]
    assert info["exit_status"] == 7 and "error" not in info and info["quick"], info
    for i in range(100):
        time.sleep(0.05)
        sock, answer = quick_by_hand(h, "qk", ["/bin/sh", "-c", "exit 9"], h.env)
        if sock is not None:
            break
    ended = unwire(sock.recv(struct.calcsize(WIRE)))
    assert ended["type"] == 15 and ended["n1"] == 9, ended
    h.stop("qk")
    sock.send(wire(7))
    closed = unwire(sock.recv(struct.calcsize(WIRE)))
    if closed["type"] == 12:  # STOPPING, sent before the ENDED came
        closed = unwire(sock.recv(struct.calcsize(WIRE)))
    sock.close()
    assert closed["type"] == 8 and closed["status"] == 9 and closed["more"] == "", closed
    info = h.runs()[answer["run_id"]]
    assert info["exit_status"] == 9 and "error" not in info, info
    # a QUICK with an environment no full client had is not taken, and
    # nothing is made for it
    rs.ready_run(h, "qk2", "true")
    before = set(h.runs())
    sock, answer = quick_by_hand(h, "qk2", ["/bin/sh", "-c", "exit 3"], dict(h.env, FB_UNLEARNED="1"))
    assert sock is None and "no command with this environment" in answer["text"], answer
    assert set(h.runs()) == before, set(h.runs()) - before


def t_closed_streams_not_control(h):
    # a standard stream the caller closed is not the session's control
    # connection in the command (the full client, which runs such a
    # command, opened that connection on the first free number), on the
    # ready sandbox's path: it is /dev/null
    rs.ready_run(h, "cs", "true")
    # the shell's own descriptors ($$: /proc/self would be a subshell's)
    probe = ('for n in 0 1 2; do [ -S /proc/$$/fd/$n ] && s="$s $n-socket"; '
             's="$s $n=$(readlink /proc/$$/fd/$n)"; done; echo "$s" > %s')
    for fd in (0, 1, 2):
        for i in range(100):
            out = os.path.join(h.ws, "streams-%d-%d" % (fd, i))
            marker = "# closed-%d-%d" % (fd, i)
            p = subprocess.run(h.argv("cs", probe % out + " " + marker), cwd=h.ws, env=h.env,
                               stdin=subprocess.DEVNULL, capture_output=True, timeout=120,
                               preexec_fn=lambda fd=fd: os.close(fd))
            info = h.runs()[h.run_of(marker)]
            if info.get("ready_sandbox"):
                break
            time.sleep(0.05)
        else:
            raise AssertionError("never in the ready sandbox")
        assert p.returncode == 0, (p.returncode, p.stderr)
        with open(out) as f:
            seen = f.read().split()
        assert "%d=/dev/null" % fd in seen and not [x for x in seen if "socket" in x], seen
    code, out, err = h.run("cs", "echo alive")
    assert code == 0 and out == "alive\n", (code, out, err)


def t_quick_after_hangup(h):
    # a QUICK whose client hung up before the daemon read it (the client
    # gave up waiting: the daemon stalled, here stopped) is not run: the
    # client may have run it some other way
    rs.ready_run(h, "qh", "true")
    daemon = h.runs()[h.runs()[h.last_run()]["session_run"]]["supervisor"]["pid"]
    flag = os.path.join(h.ws, "ran-after-hangup")
    for i in range(100):
        time.sleep(0.05)
        sock, proof = quick_hello(h, "qh")
        before = set(h.runs())
        os.kill(daemon, signal.SIGSTOP)
        try:
            quick_send(sock, h, ["/bin/sh", "-c", "touch " + flag], h.env, proof)
            sock.close()
        finally:
            os.kill(daemon, signal.SIGCONT)
        time.sleep(0.3)  # the daemon reads QUICK, then the hang-up: a margin
        made = set(h.runs()) - before
        if made:
            break
    else:
        raise AssertionError("the daemon never took a QUICK to make a run")
    assert not os.path.exists(flag), "the command of a client that hung up ran"
    info = h.runs()[made.pop()]
    assert info["exit_status"] == 125 and "went away before the command was sent" in info["error"], info


def t_daemon_proc_not_trusted(h):
    if shutil.which("unshare") is None:
        assert not rs.MUST_RUN, "unshare (util-linux) is missing"
        print("skip daemon_proc_not_trusted: unshare is missing")
        return
    code, out, err = h.run("p", "true")
    assert code == 0, (code, out, err)
    h.stop("p")
    # our uid's "daemon", in a mount namespace whose /proc is an empty
    # tmpfs and whose /tmp/root is the host's tree (where a view would be)
    fake = fake_daemon(os.path.join(sessions_root(h), "p.sock"), wrap=("unshare", "-Urm"),
                       mounts="mount -t tmpfs none /tmp && mkdir /tmp/root && mount --rbind / /tmp/root && "
                       "mount -t tmpfs none /proc")
    try:
        code, out, err = h.run("p", "echo ran")
    finally:
        stop_fake(fake)
        h.sessions.discard("p")
    # the maps are written through our /proc (the command then fails
    # further on, in a namespace without a /proc, or runs)
    assert not any(step in err for step in ("uid-map", "gid-map", "setgroups", "uid_map", "gid_map")), (code, err)


def daemon_pid(h, session):
    """SESSION's daemon: the peer of its socket."""
    s = socket.socket(socket.AF_UNIX, socket.SOCK_SEQPACKET)
    s.connect(os.path.join(sessions_root(h), session + ".sock"))
    pid = struct.unpack("3i", s.getsockopt(socket.SOL_SOCKET, socket.SO_PEERCRED, struct.calcsize("3i")))[0]
    s.close()
    return pid


def t_socket_gone_ends(h):
    code, out, err = h.run("z", "true")
    assert code == 0, (code, out, err)
    pid = daemon_pid(h, "z")
    # its state directory removed: no client can reach it, not even
    # `session stop`; it ends by itself, long before its idle timeout
    shutil.rmtree(sessions_root(h))
    try:
        rs.wait_for(lambda: not os.path.exists("/proc/%d" % pid) or
                    open("/proc/%d/stat" % pid).read().split(") ")[1].startswith("Z"), "the daemon to end")
    finally:
        if os.path.exists("/proc/%d" % pid):
            os.kill(pid, signal.SIGTERM)  # the session's own stop, as on a failure


def view_namespaces(h, session):
    """/proc/PID/fd/N of the user and mount namespaces that hold SESSION's
    view, as its daemon keeps them."""
    held = rs.held_namespaces(daemon_pid(h, session))
    found = {kind: [k for k, v in held.items() if v == kind] for kind in ("user", "mnt")}
    assert len(found["user"]) == 1 and len(found["mnt"]) == 1, held
    return found["user"][0], found["mnt"][0]


def t_unattributed_budget(h):
    if shutil.which("nsenter") is None:
        assert not rs.MUST_RUN, "nsenter (util-linux) is missing"
        print("skip unattributed_budget: nsenter (util-linux) is missing")
        return
    held = h.start("f", "echo up; sleep 600", "--log-max-size", "1M")
    assert held.stdout.readline() == "up\n"
    # the view as the daemon's keeper mounted it; a process there is in
    # no command's pid namespace
    user, mnt = view_namespaces(h, "f")
    flood = subprocess.run(["nsenter", "--user=" + user, "--mount=" + mnt, "/usr/bin/python3", "-c", rs.FLOOD,
                            "/tmp/root" + h.ws, "6000"], capture_output=True, text=True, timeout=600)
    assert flood.returncode == 0, (flood.stdout, flood.stderr)
    rid = session_run(h)
    rundir = os.path.join(h.env["XDG_STATE_HOME"], "fusebox", "runs", rid)
    size = sum(os.path.getsize(os.path.join(rundir, n)) for n in os.listdir(rundir) if n.startswith("access"))
    # the budget, and the margin a stopping sandbox may still write (1 MiB)
    assert size <= 2 * 1024 * 1024 + 65536, "the session's log grew to %d bytes past --log-max-size 1M" % size
    out, err = held.communicate(timeout=120)
    assert held.returncode == 125 and "was stopped: the access log" in err and "budget" in err, (held.returncode, err)
    assert "f\t" not in listed(h), listed(h)


def t_chroot_refused(h):
    """From a chroot (another root in the daemon's own mount namespace) and
    from another mount namespace: refused, saying why, and nothing runs;
    the session's own caller is answered."""
    if shutil.which("unshare") is None or shutil.which("chroot") is None:
        assert not rs.MUST_RUN, "unshare or chroot (util-linux, coreutils) is missing"
        print("skip chroot_refused: unshare or chroot is missing")
        return
    root = tempfile.mkdtemp(prefix="chroot-", dir=h.dir)
    marker = os.path.join(h.ws, "ran-outside")
    script = ('"$0" run --session cr -- true || exit 9; '
              'mount --rbind / "$1" || exit 9; '
              'chroot "$1" "$0" run --session cr -- touch "$2"; echo "chroot $?"; '
              '"$0" run --session cr -- true; echo "owner $?"; '
              '"$0" session stop cr')
    p = subprocess.run(["unshare", "-m", "--propagation", "private", "sh", "-c", script, rs.BIN, root, marker],
                       cwd=h.ws, env=h.env, capture_output=True, text=True, timeout=120)
    assert "chroot 125\n" in p.stdout and "owner 0\n" in p.stdout, (p.stdout, p.stderr)
    assert "in a chroot" in p.stderr and not os.path.exists(marker), p.stderr
    code, out, err = h.run("cm", "true")
    assert code == 0, (code, out, err)
    p = subprocess.run(["unshare", "-m"] + h.argv("cm", "touch " + marker), cwd=h.ws, env=h.env,
                       capture_output=True, text=True, timeout=120)
    assert p.returncode == 125 and "another mount namespace" in p.stderr, (p.returncode, p.stderr)
    assert not os.path.exists(marker)
    # nor is it stopped from there, and the one who asked is told so
    p = subprocess.run(["unshare", "-m", rs.BIN, "session", "stop", "cm"], cwd=h.ws, env=h.env,
                       capture_output=True, text=True, timeout=120)
    assert p.returncode == 1 and "another mount namespace" in p.stderr and "it goes on" in p.stderr, \
        (p.returncode, p.stderr)
    code, out, err = h.run("cm", "echo still")
    assert code == 0 and out == "still\n", (code, out, err)


def t_join_names_only_its_own_run(h):
    """A client speaking the protocol itself can't have the daemon open a
    log where its own run is not: a path outside any run directory of
    its, or another live command's log."""
    code, out, err = h.run("j", "true # marker-j")
    assert code == 0, (code, out, err)
    session_run = h.runs()[h.run_of("marker-j")]["session_run"]
    with open(os.path.join(h.env["XDG_STATE_HOME"], "fusebox", "runs", session_run, "policy.json"), "rb") as f:
        digest = hashlib.sha256(f.read()).hexdigest()
    sock = os.path.join(sessions_root(h), "j.sock")
    target = os.path.join(h.dir, "forged.jsonl")
    probe = JOIN_PROBE % {"log": target, "digest": digest}
    p = subprocess.run(["/usr/bin/python3", "-c", HELLO_PROBE.split("s = socket.socket")[0] + probe, sock],
                       capture_output=True, text=True, timeout=60)
    assert p.stdout.startswith("refused-msg") and "is not in a run directory of the caller's" in p.stdout, (
        p.stdout, p.stderr)
    assert not os.path.exists(target), "the daemon made the log a JOIN named"


# ptrace(2), for stopping the daemon between two of its system calls
PTRACE_SYSCALL, PTRACE_DETACH = 24, 17
PTRACE_SEIZE, PTRACE_INTERRUPT, PTRACE_GET_SYSCALL_INFO = 0x4206, 0x4207, 0x420e
PTRACE_O_TRACESYSGOOD, PTRACE_EVENT_STOP = 1, 128
WALL = 0x40000000  # waitpid: __WALL
STAT_CALLS = (262, 332)  # x86_64 newfstatat, statx: the name is the second argument


def read_string(pid, at, most=4096):
    """The NUL-terminated string at AT in PID's memory (read up to each page's end)."""
    got = b""
    with open("/proc/%d/mem" % pid, "rb") as mem:
        while b"\0" not in got and len(got) < most:
            mem.seek(at + len(got))
            got += mem.read(4096 - (at + len(got)) % 4096)
    return got.split(b"\0", 1)[0]


def after_stat_of(pid, name, then, deadline=60):
    """Trace the thread PID (ptrace: this thread becomes its tracer) until
    it has stat'ed a path ending in NAME, then, before its next system
    call, run THEN() and let it go.  False if it did not within DEADLINE
    seconds (it is let go all the same)."""
    libc = ctypes.CDLL(None, use_errno=True)
    libc.ptrace.restype = ctypes.c_long
    libc.ptrace.argtypes = [ctypes.c_long, ctypes.c_long, ctypes.c_void_p, ctypes.c_void_p]
    if libc.ptrace(PTRACE_SEIZE, pid, None, PTRACE_O_TRACESYSGOOD) != 0:
        raise OSError(ctypes.get_errno(), "ptrace(PTRACE_SEIZE) of the session daemon")
    libc.ptrace(PTRACE_INTERRUPT, pid, None, None)
    os.waitpid(pid, WALL)
    info = ctypes.create_string_buffer(88)  # struct ptrace_syscall_info
    end = time.monotonic() + deadline
    looked = False
    sig = 0
    try:
        while time.monotonic() < end:
            libc.ptrace(PTRACE_SYSCALL, pid, None, sig)
            _, status = os.waitpid(pid, WALL)
            if not os.WIFSTOPPED(status):
                return False
            sig = 0
            if os.WSTOPSIG(status) != signal.SIGTRAP | 0x80:
                if status >> 16 != PTRACE_EVENT_STOP:
                    sig = os.WSTOPSIG(status)  # the daemon's own signal
                continue
            libc.ptrace(PTRACE_GET_SYSCALL_INFO, pid, ctypes.c_void_p(88), info)
            op = info.raw[0]
            if op == 1:  # an entry
                nr, = struct.unpack_from("<Q", info.raw, 24)
                path_at, = struct.unpack_from("<Q", info.raw, 40)  # args[1]
                looked = nr in STAT_CALLS and read_string(pid, path_at).endswith(name.encode())
            elif op == 2 and looked:  # the exit of that stat
                then()
                return True
        return False
    finally:
        libc.ptrace(PTRACE_DETACH, pid, None, 0)


def t_join_dir_swapped(h):
    """The log a JOIN names is made in the directory the daemon checked,
    never through a link swapped in for it after the check: a caller that
    exchanges its run directory with a link to a directory it may not
    write (RENAME_EXCHANGE) right after the daemon's last look at it (the
    daemon stopped there under ptrace) gets nothing made or opened there,
    and its log is in the directory the daemon checked."""
    if os.uname().machine != "x86_64":
        print("join_dir_swapped: the daemon is stopped at x86_64's system call numbers; this is %s" %
              os.uname().machine)
        return "skip"
    code, out, err = h.run("sw", "true # marker-sw")
    assert code == 0, (code, out, err)
    session_run = h.runs()[h.run_of("marker-sw")]["session_run"]
    with open(os.path.join(h.env["XDG_STATE_HOME"], "fusebox", "runs", session_run, "policy.json"), "rb") as f:
        digest = hashlib.sha256(f.read()).hexdigest().encode()
    forbidden = os.path.join(h.dir, "forbidden")
    # the daemon takes a command's log only in a directory of the runs root
    jail = os.path.join(h.env["XDG_STATE_HOME"], "fusebox", "runs")
    d, link = os.path.join(jail, "d"), os.path.join(jail, "l")
    os.mkdir(forbidden, 0o755)
    os.symlink(forbidden, link)
    os.mkdir(d, 0o700)
    with open("/proc/self/stat") as f:
        start_time = int(f.read().rsplit(")", 1)[1].split()[19])
    rid = "20990101-000000-swap00"
    with open(os.path.join(d, "run.json"), "w") as f:
        json.dump({"run": rid, "supervisor": {"pid": os.getpid(), "start_time": start_time}}, f)
    libc = ctypes.CDLL(None, use_errno=True)
    swapped = []

    def swap():  # renameat2(AT_FDCWD, d, AT_FDCWD, l, RENAME_EXCHANGE)
        swapped.append(libc.syscall(316, -100, d.encode(), -100, link.encode(), 2) == 0)

    # the daemon's main thread answers JOIN: traced from a thread of ours,
    # while this one sends it
    pid = daemon_pid(h, "sw")
    seen = []
    tracer = threading.Thread(target=lambda: seen.append(after_stat_of(pid, "pwn", swap)))
    sock = socket.socket(socket.AF_UNIX, socket.SOCK_SEQPACKET)
    sock.settimeout(120)
    sock.connect(os.path.join(sessions_root(h), "sw.sock"))
    sock.send(wire(1))
    sock.recv(struct.calcsize(WIRE))
    tracer.start()
    time.sleep(0.5)  # seized before JOIN is sent
    sock.send(struct.pack(WIRE, 3, 0, 0, 1, 0, 0, 0, 0, 0, 0, 0, 0, 0, digest, rid.encode(),
                          os.path.join(d, "pwn").encode(), b""))
    answer, fds, _, _ = socket.recv_fds(sock, struct.calcsize(WIRE), 6)
    for fd in fds:
        os.close(fd)
    tracer.join(120)
    sock.close()
    made = os.listdir(forbidden)
    real = os.listdir(link) if not os.path.islink(link) else os.listdir(d)
    for path in (d, link):
        if os.path.islink(path):
            os.unlink(path)
        else:
            shutil.rmtree(path, ignore_errors=True)
    assert seen == [True] and swapped == [True], ("the daemon never stat'ed the log's name, or the swap failed",
                                                  seen, swapped)
    assert made == [], ("the daemon made the log through the link swapped in after its check", made)
    # the check passed, and the log was made where it was done
    assert unwire(answer)["type"] == 4, unwire(answer)
    assert "pwn" in real, real


def join_run_dir(h, session, run_dir, rid):
    """A JOIN of a client of its own naming a log in RUN_DIR (made 0700,
    with a run.json naming RID and this process as its supervisor, as a
    full client writes it): the answer."""
    runs_root = os.path.join(h.env["XDG_STATE_HOME"], "fusebox", "runs")
    session_run = [r for r, info in h.runs().items()
                   if info.get("kind") == "session" and info.get("session") == session][0]
    with open(os.path.join(runs_root, session_run, "policy.json"), "rb") as f:
        digest = hashlib.sha256(f.read()).hexdigest().encode()
    with open("/proc/self/stat") as f:
        start_time = int(f.read().rsplit(")", 1)[1].split()[19])
    os.mkdir(run_dir, 0o700)
    with open(os.path.join(run_dir, "run.json"), "w") as f:
        json.dump({"run": rid, "supervisor": {"pid": os.getpid(), "start_time": start_time}}, f)
    sock = socket.socket(socket.AF_UNIX, socket.SOCK_SEQPACKET)
    sock.settimeout(60)
    sock.connect(os.path.join(sessions_root(h), session + ".sock"))
    sock.send(wire(1))
    sock.recv(struct.calcsize(WIRE))
    sock.send(struct.pack(WIRE, 3, 0, 0, 1, 0, 0, 0, 0, 0, 0, 0, 0, 0, digest, rid.encode(),
                          os.path.join(run_dir, "access.jsonl").encode(), b""))
    answer, fds, _, _ = socket.recv_fds(sock, struct.calcsize(WIRE), 6)
    for fd in fds:
        os.close(fd)
    sock.close()
    return unwire(answer)


def t_run_dir_out_of_the_view(h):
    """A command's run directory is where the session's view hides it: in
    the runs root.  The view was made before the command's run, and knows
    fusebox's state by the identities it had then: a --run-dir in the
    workspace would be in it, and any command of the session could read
    and rewrite that command's log (and move its directory away for a
    link, for its supervisor to write run.json through).  So such a
    --run-dir is refused before anything is made, by the client and, for
    a client of its own, by the daemon; one in the runs root works, and
    the command finds nothing of it."""
    code, out, err = h.run("rd", "true # marker-rd")
    assert code == 0, (code, out, err)
    elsewhere = os.path.join(h.ws, "rd-elsewhere")
    code, out, err = h.run("rd", "echo ran", "--run-dir", elsewhere)
    assert code == 125 and "ran" not in out, (code, out, err)
    assert "--run-dir %s is not in fusebox's runs directory" % elsewhere in err, err
    assert not os.path.lexists(elsewhere), os.listdir(h.ws)
    # in the runs root: the command runs, its log is there, and it can't
    # see, read or append to it
    runs_root = os.path.join(h.env["XDG_STATE_HOME"], "fusebox", "runs")
    named = os.path.join(runs_root, "named-rd")
    log = os.path.join(named, "access.jsonl")
    probe = ("cat %s >/dev/null 2>&1 && echo read || echo noread; "
             "(echo forged >> %s) 2>/dev/null && echo appended || echo noappend; "
             "ls %s >/dev/null 2>&1 && echo listed || echo unlisted" % (log, log, named))
    code, out, err = h.run("rd", probe, "--run-dir", named)
    assert code == 0, (code, out, err)
    with open(log) as f:  # there, readable on the host
        text = f.read()
    assert text.strip() and "forged" not in text, text
    assert out.split() == ["noread", "noappend", "unlisted"], out
    # a client of its own, with a run directory in the workspace made as a
    # full client makes one: refused, nothing made there
    answer = join_run_dir(h, "rd", os.path.join(h.ws, "own-rd"), "20990101-000000-ownrd1")
    assert answer["type"] == 9 and "is not in fusebox's runs directory" in answer["text"], answer
    assert sorted(os.listdir(os.path.join(h.ws, "own-rd"))) == ["run.json"]
    # the same in the runs root: taken
    answer = join_run_dir(h, "rd", os.path.join(runs_root, "own-rd"), "20990101-000000-ownrd2")
    assert answer["type"] == 4, answer


def t_relative_programs_refused(h):
    """fusebox's own programs named by a relative path in its environment
    ($FUSEBOX_MAIN, $FUSEBOX_SERVE, $FUSEBOX_LAUNCH) are refused, not
    looked for in the working directory (a workspace, say)."""
    marker = os.path.join(h.dir, "relative-ran")
    for name in ("fusebox-main", "fusebox-serve", "fusebox-launch"):
        with open(os.path.join(h.ws, name), "w") as f:
            f.write("#!/bin/sh\ntouch %s\n" % marker)
        os.chmod(os.path.join(h.ws, name), 0o755)
    for var, argv in (("FUSEBOX_MAIN", ["--version"]), ("FUSEBOX_SERVE", ["serve", "--help"])):
        prog = var.lower().replace("_", "-")
        p = subprocess.run([rs.BIN] + argv, cwd=h.ws, env=dict(h.env, **{var: prog}), capture_output=True,
                           text=True, timeout=60)
        assert p.returncode == 1 and "give %s's absolute path" % prog in p.stderr, (var, p.returncode, p.stderr)
        assert not os.path.exists(marker), var
    # serve says so at its start, and serves without a helper
    p = subprocess.Popen([rs.BIN, "serve", "--listen", "ws://127.0.0.1:0"], cwd=h.ws,
                         env=dict(h.env, FUSEBOX_LAUNCH="fusebox-launch"), stdout=subprocess.PIPE,
                         stderr=subprocess.PIPE, text=True)
    try:
        line = p.stderr.readline()
    finally:
        p.kill()
        p.communicate(timeout=60)
    assert "give fusebox-launch's absolute path" in line, line
    assert not os.path.exists(marker)


def landlock_abi():
    """The kernel's Landlock ABI version, 0 without one."""
    libc = ctypes.CDLL(None, use_errno=True)
    libc.syscall.restype = ctypes.c_long
    v = libc.syscall(444, None, ctypes.c_size_t(0), ctypes.c_uint(1))  # landlock_create_ruleset, VERSION
    return v if v > 0 else 0


def stream_run(h, script, fd):
    """SCRIPT in session "st" with FD as its stdin, until a run of it went
    to the ready sandbox: (code, out, err)."""
    h.sessions.add("st")
    for i in range(100):
        marker = "# marker-stream-%d-%d" % (os.getpid(), time.monotonic_ns())
        os.lseek(fd, 0, os.SEEK_SET)
        p = subprocess.run(h.argv("st", script + " " + marker), cwd=h.ws, env=h.env, stdin=fd, capture_output=True,
                           text=True, timeout=120)
        if h.runs()[h.run_of(marker)].get("ready_sandbox"):
            return p.returncode, p.stdout, p.stderr
        time.sleep(0.05)
    raise AssertionError("never ran in the ready sandbox")


def t_streams_kept(h):
    """The caller's stdin is the command's for what it was given, in the
    ready sandbox as in its own: a file (which the sandbox's host id, the
    overflow uid, could write) opens again through /proc/self/fd for
    reading, not for writing; a directory given as stdin (below it a file
    the view does not show) fails the command's start."""
    if landlock_abi() < 2:
        return "skip"
    given = os.path.join(h.dir, "given")
    secret_dir = os.path.join(h.dir, "given-dir")
    with open(given, "w") as f:
        f.write("given\n")
    os.chmod(given, 0o666)
    os.mkdir(secret_dir, 0o755)
    with open(os.path.join(secret_dir, "secret"), "w") as f:
        f.write("secret\n")
    os.chmod(os.path.join(secret_dir, "secret"), 0o644)
    # on the host: anyone may write the one and read the other
    assert os.stat(given).st_mode & 0o777 == 0o666
    with open(os.path.join(secret_dir, "secret")) as f:
        assert f.read() == "secret\n"
    fd = os.open(given, os.O_RDONLY | os.O_CLOEXEC)
    try:
        code, out, err = stream_run(h, "cat /dev/stdin; echo pwned > /proc/self/fd/0 && echo wrote", fd)
    finally:
        os.close(fd)
    assert out == "given\n" and "Permission denied" in err, (code, out, err)
    with open(given) as f:
        assert f.read() == "given\n"
    # a directory as stdin: the command is not started, and is told why
    fd = os.open(secret_dir, os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
    try:
        code, out, err = stream_run(h, "cat /proc/self/fd/0/secret && echo read; : > /proc/self/fd/0/planted && "
                                    "echo planted", fd)
    finally:
        os.close(fd)
    assert code == 125 and out == "" and "the command's stdin is a directory" in err, (code, out, err)
    assert not os.path.exists(os.path.join(secret_dir, "planted"))


if __name__ == "__main__":
    rs.run_tests([("command_cannot_reach_control", t_command_cannot_reach_control),
                  ("other_pid_namespace_refused", t_other_pid_namespace_refused),
                  ("other_user_refused", t_other_user_refused),
                  ("thread_attributed", t_thread_attributed), ("hidden_each_time", t_hidden_each_time),
                  ("unattributed_budget", t_unattributed_budget),
                  ("foreign_directory_refused", t_foreign_directory_refused),
                  ("foreign_daemon_refused", t_foreign_daemon_refused), ("quick_unanswered", t_quick_unanswered),
                  ("quick_status_kept", t_quick_status_kept), ("quick_after_hangup", t_quick_after_hangup), ("closed_streams_not_control", t_closed_streams_not_control),
                  ("daemon_proc_not_trusted", t_daemon_proc_not_trusted),
                  ("socket_gone_ends", t_socket_gone_ends), ("chroot_refused", t_chroot_refused),
                  ("join_names_only_its_own_run", t_join_names_only_its_own_run), ("join_dir_swapped", t_join_dir_swapped),
                  ("run_dir_out_of_the_view", t_run_dir_out_of_the_view),
                  ("relative_programs_refused", t_relative_programs_refused),
                  ("streams_kept", t_streams_kept)], "fusebox-security-session-")
