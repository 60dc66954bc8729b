#!/usr/bin/env python3
"""Adversarial tests: a name can't forge or drive what fusebox's messages
show a person.

Every name below carries an ESC sequence, a CR and a LF followed by a
forged "fusebox: ..." line, a right-to-left override (U+202E), a C1 CSI
(U+009B) and a C1 NEL (U+0085): a name that reaches an error message or a
warning raw starts a line of its own there, colours or clears the terminal,
or turns the rest of the line around.  Each reaches a message of
`fusebox mount` (a mount point that does not exist, a policy file, an
access log whose directory is missing: the last one through the daemon),
of `fusebox run` (a working directory that does not exist), of `fusebox serve` (a token file; with G_MESSAGES_DEBUG=fusebox, members of
a client's params and of its sandbox, which the server says it ignores) and
of the launch helper (a process/start whose cwd does not exist, shown to
the client as the process's stderr).  Each message must hold none of those
characters raw, no line of it may start with the forged text, and the name
must be there, escaped as the log escapes it.

Exit status: 0 all passed, 1 a check failed, 77 a prerequisite is missing
(unless FUSEBOX_TESTS_MUST_RUN=1).
"""
import base64
import json
import os
import subprocess
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import security_util as su  # noqa: E402

serve = su.serve

BIN = serve.BIN

FORGED = "fusebox: mounted"
HOSTILE = "x\x1b[31m\r\n" + FORGED + "\u202e\u009b\u0085y"
# as fb_text_printf shows it (FB_TEXT_INLINE)
ESCAPED = "x\\x1b[31m\\r\\n" + FORGED + "\\u202e\\u009b\\u0085y"

UNSAFE = set(range(0x20)) - {0x0a}
UNSAFE |= {0x7f} | set(range(0x80, 0xa0)) | set(range(0x200b, 0x2010)) | set(range(0x202a, 0x202f))
UNSAFE |= set(range(0x2066, 0x206a)) | {0x2028, 0x2029, 0xfeff, 0x061c}


def assert_safe(what, data):
    """DATA (bytes) is UTF-8 without a character a terminal acts on or
    hides (but the line ends), and no line starts with the forged text."""
    text = data.decode("utf-8")  # raises on invalid UTF-8
    for i, ch in enumerate(text):
        assert ord(ch) not in UNSAFE, "%s: raw U+%04X at %d:\n%r" % (what, ord(ch), i, text)
    for line in text.split("\n"):
        assert not line.startswith(FORGED), "%s: a forged line:\n%s" % (what, text)
    assert ESCAPED in text, "%s: the name is not shown escaped (%r):\n%s" % (what, ESCAPED, text)


def fusebox(tmp, *args, env=None):
    e = dict(os.environ, XDG_STATE_HOME=os.path.join(tmp, "state"))
    e.update(env or {})
    argv = [BIN] + [a if isinstance(a, bytes) else a.encode() for a in args]
    p = subprocess.run(argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=e, timeout=120)
    return p.returncode, p.stdout, p.stderr


def hostile_dir(tmp):
    """A directory under TMP named HOSTILE (made), and a path below it that
    does not exist."""
    d = os.path.join(tmp, HOSTILE)
    os.makedirs(d, exist_ok=True)
    return d, os.path.join(d, "missing")


# --- fusebox mount --------------------------------------------------------------------


async def t_mount_point(tmp):
    _, missing = hostile_dir(tmp)
    status, out, errb = fusebox(tmp, "mount", missing)
    assert status == 1, (status, out, errb)
    assert_safe("mount MISSING (stderr)", errb)
    assert b"does not exist" in errb, errb


async def t_mount_policy(tmp):
    _, missing = hostile_dir(tmp)
    mnt = os.path.join(tmp, "mnt")
    os.makedirs(mnt, exist_ok=True)
    status, out, errb = fusebox(tmp, "mount", "--policy", missing + ".json", mnt)
    assert status == 1, (status, out, errb)
    assert_safe("mount --policy MISSING (stderr)", errb)


async def t_mount_log(tmp):
    """The daemon fails to open the log and tells the waiting parent,
    which prints it."""
    _, missing = hostile_dir(tmp)
    mnt = os.path.join(tmp, "mnt")
    os.makedirs(mnt, exist_ok=True)
    status, out, errb = fusebox(tmp, "mount", "--log", os.path.join(missing, "access.jsonl"), mnt)
    assert status == 1, (status, out, errb)
    assert_safe("mount --log MISSING/access.jsonl (stderr)", errb)
    assert b"access log" in errb, errb


async def t_run_cwd(tmp):
    if os.geteuid() != 0 or not os.access("/dev/fuse", os.R_OK | os.W_OK):
        return "skip"
    _, missing = hostile_dir(tmp)
    status, out, errb = fusebox(tmp, "run", "--cwd", missing, "--", "/bin/true")
    assert status != 0, (status, out, errb)
    assert_safe("run --cwd MISSING (stderr)", errb)


# --- fusebox serve --------------------------------------------------------------------


async def t_serve_token_file(tmp):
    _, missing = hostile_dir(tmp)
    status, out, errb = fusebox(tmp, "serve", "--token-file", missing)
    assert status == 1, (status, out, errb)
    assert_safe("serve --token-file MISSING (stderr)", errb)


async def t_serve_client_names(tmp):
    """A client's member names reach the server's debug messages."""
    with serve.Server(tmp, env={"G_MESSAGES_DEBUG": "fusebox"}) as srv:
        c = await serve.Client.connect(srv.url)
        r = await c.call("initialize", {"clientName": "messages", HOSTILE: 1})
        serve.ok(r)
        await c.ws.send(json.dumps({"method": "initialized", "params": {}}))
        path = os.path.join(srv.ws, "f.txt")
        with open(path, "w") as f:
            f.write("f\n")
        sandbox = {"permissions": {"type": "managed", "file_system": {"type": "restricted", "entries": [
            {"path": {"type": "special", "value": {"kind": "root"}}, "access": "read"}]}, "network": "restricted"},
            "cwd": "file://" + srv.ws, "windowsSandboxLevel": "disabled", HOSTILE: True}
        r = await c.call("fs/readFile", {"path": path, "sandbox": sandbox})
        serve.ok(r)
        await c.close()
    with open(srv.err_path, "rb") as f:
        errb = f.read()
    assert_safe("serve with G_MESSAGES_DEBUG=fusebox (stderr)", errb)
    assert b"ignoring the member" in errb, errb


async def t_launch_failure(tmp):
    """The launch helper's failure, shown to the client as the process's
    stderr, quotes the client's cwd."""
    if os.geteuid() != 0 or not os.access("/dev/fuse", os.R_OK | os.W_OK):
        return "skip"
    async with serve.served(tmp, "messages") as (srv, c):
        cwd = os.path.join(srv.ws, HOSTILE)
        r = await c.call("process/start", {"processId": "p", "argv": ["/bin/true"], "cwd": cwd,
                                           "env": {"PATH": "/usr/bin:/bin"}, "tty": False, "pipeStdin": False,
                                           "arg0": None})
        shown = b""
        if "result" in r:
            while True:
                m = await c.recv()
                if m.get("method") == "process/output":
                    shown += base64.b64decode(m["params"]["chunk"])
                if m.get("method") == "process/closed":
                    break
        else:
            shown = r["error"]["message"].encode()
    assert shown.startswith(b"fusebox: "), shown
    assert_safe("process/start with a missing cwd (the process's stderr)", shown)


if __name__ == "__main__":
    su.run([("mount_point", t_mount_point), ("mount_policy", t_mount_policy), ("mount_log", t_mount_log),
            ("run_cwd", t_run_cwd), ("serve_token_file", t_serve_token_file),
            ("serve_client_names", t_serve_client_names), ("launch_failure", t_launch_failure)],
           "fusebox-security-messages-")
