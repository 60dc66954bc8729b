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

What a command does stays its own, whoever in it does it:

- a thread that is not its process's first (FUSE names the caller by
  thread id): its file made and its refused write are in the command's
  log and run.json's denials, not in the session's log.
- a hidden name asked again: each command that asks for it (and each
  time) gets a record in its own log; the kernel does not answer a later
  attempt from a negative entry the first left behind.

Exit status: 0 all passed, 1 a check failed, 77 a prerequisite is missing
(unless FUSEBOX_TESTS_MUST_RUN=1).
"""
import importlib.util
import os
import shutil
import stat
import subprocess

_spec = importlib.util.spec_from_file_location(
    "run_session", os.path.join(os.path.dirname(os.path.abspath(__file__)), "test-run-session.py"))
rs = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(rs)

NOBODY = 65534


def sessions_root(h):
    return os.path.join(h.env["XDG_STATE_HOME"], "fusebox", "sessions")


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
    finally:
        for p, mode in reversed(opened):
            os.chmod(p, stat.S_IMODE(mode))


THREAD_PROBE = ("import threading, sys\n"
                "def work():\n"
                "    with open('thread-made.txt', 'w') as f:\n"
                "        f.write('t')\n"
                "    try:\n"
                "        open('/etc/thread-refused', 'w')\n"
                "    except OSError as e:\n"
                "        print('refused', e.errno)\n"
                "t = threading.Thread(target=work)\n"
                "t.start()\n"
                "t.join()\n")


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
    code, out, err = h.run("t", "/usr/bin/python3 -c \"%s\" # marker-thread" % THREAD_PROBE.replace('"', '\\"'))
    assert code == 0 and out.startswith("refused "), (code, out, err)
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


if __name__ == "__main__":
    rs.run_tests([("command_cannot_reach_control", t_command_cannot_reach_control),
                  ("other_pid_namespace_refused", t_other_pid_namespace_refused),
                  ("other_user_refused", t_other_user_refused),
                  ("thread_attributed", t_thread_attributed), ("hidden_each_time", t_hidden_each_time)], "fusebox-security-session-")
