#!/usr/bin/env python3
"""Adversarial tests: what sharing a view does not share.

The processes of one `fusebox serve` session that run under one effective
policy share a FUSE view, and with it the session's private /tmp and HOME
(test-serve-share.py).  What must stay apart:

- two sessions: session B's processes and fs/... calls don't find what
  session A's left in its /tmp and HOME (A finds it, so it is there), and
  B's log subscription gets none of A's records;
- a narrower sandbox: a process whose `sandbox` denies a file gets a view
  of its own (another device for "/"), and is refused that file, while a
  process of the same session under the server's policy reads it, before
  and at the same time.
- records of no process (made by a process of no process's pid namespace:
  here the test's own, from inside the view's namespaces) count against a
  share of the log's budget of the view's own: a flood of them stops that
  view's processes only; the server and another session's process go on.
- a thread: a process whose refused write comes from a thread that is not
  its first (FUSE names the caller by thread id) is sandboxDenied, and
  every record of that thread names the process.
- a dead keeper's pid: the view's keeper (whose own requests are not
  logged, known by its pid) is killed, and a process of a sandbox is made
  to get its pid next (ns_last_pid); that process's refusal is logged.

Exit status: 0 all passed, 1 a check failed, 77 a prerequisite is missing
(unless FUSEBOX_TESTS_MUST_RUN=1).
"""
import base64
import importlib.util
import os
import shutil
import subprocess
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import security_util as su  # noqa: E402

_spec = importlib.util.spec_from_file_location(
    "serve_share", os.path.join(os.path.dirname(os.path.abspath(__file__)), "test-serve-share.py"))
share = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(share)
_spec = importlib.util.spec_from_file_location(
    "run_session", os.path.join(os.path.dirname(os.path.abspath(__file__)), "test-run-session.py"))
rs = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(rs)

serve = su.serve
ok = serve.ok


async def t_sessions_isolated(tmp):
    if not share.can_run():
        return "skip"
    with serve.Server(tmp) as srv:
        a = await serve.start_client(srv, "a")
        b = await serve.start_client(srv, "b")
        ok(await b.call("log/subscribe", {}))
        out, code = await share.run(a, srv, "a-w", "echo a > /tmp/a-note && echo a > $HOME/a-note && "
                                    "cat /tmp/a-note $HOME/a-note")
        assert code == 0 and out == "a\na\n", (code, out)
        r = ok(await a.call("fs/readFile", {"path": "/tmp/a-note"}))
        assert base64.b64decode(r["dataBase64"]) == b"a\n", r
        out, code = await share.run(b, srv, "b-r", "ls -A /tmp $HOME; cat /tmp/a-note $HOME/a-note; echo end")
        assert "a-note" not in out.replace("/tmp/a-note", "").replace("/a-note:", ""), out
        assert out.count("No such file") == 2 and "end\n" in out, (code, out)
        serve.err(await b.call("fs/readFile", {"path": "/tmp/a-note"}), -32004)
        # B's subscription: B's own records, none of A's
        mine = []
        for m in b.inbox:
            if m.get("method") == "log/event":
                mine.append(m["params"])
        assert mine and all(x.get("session") == b.log_session for x in mine), mine[:3]
        assert not any("a-note" in x.get("path", "") and x.get("decision") == "allow" for x in mine), mine
        await a.close()
        await b.close()


async def t_narrower_does_not_share(tmp):
    if not share.can_run():
        return "skip"
    async with serve.served(tmp, "narrow", files={"secret.txt": "secret\n"}) as (srv, c):
        secret = os.path.join(srv.ws, "secret.txt")
        # the wide one reads it, and keeps it open while the narrow one runs
        p = share.sh(srv, "wide", "stat -c %%d / > /tmp/wide.dev; cat %s; exec 3< %s; read w; cat <&3" %
                     (secret, secret))
        p["pipeStdin"] = True
        ok(await c.call("process/start", p))
        out, _ = await share.output(c, "wide", b"secret\n")
        assert out == "secret\n", out
        out, code = await share.run(c, srv, "narrow", "stat -c %%d /; cat /tmp/wide.dev; cat %s; echo rc=$?" % secret,
                                    share.narrowed(secret))
        lines = out.splitlines()
        assert len(lines) >= 3 and lines[0] != lines[1], "the narrower sandbox ran in the wider view: %r" % out
        assert "secret\n" not in out and "Permission denied" in out and "rc=1" in out, out
        ok(await c.call("process/write", {"processId": "wide", "chunk": base64.b64encode(b"go\n").decode(),
                                          "writeId": "go"}))
        out, code = await share.output(c, "wide")
        assert code == 0 and out == "secret\nsecret\n", (code, out)
        denied = [x for x in serve.log_records(srv, c) if x.get("path") == secret and x["decision"] == "deny"]
        assert denied and all(x.get("process") == "narrow" for x in denied), denied


async def t_thread_attributed(tmp):
    if not share.can_run():
        return "skip"
    assert not os.path.exists("/etc/thread-refused")
    async with serve.served(tmp, "thread") as (srv, c):
        out, code = await share.run(c, srv, "m", "true")
        assert code == 0, (code, out)
        p = serve.start_params(srv, "t", ["/usr/bin/python3", "-c", rs.THREAD_PROBE])
        ok(await c.call("process/start", p))
        out, code = await share.output(c, "t")
        assert code == 1 and out.startswith("refused "), (code, out)
        r = ok(await c.call("process/read", {"processId": "t"}))
        mine = [x for x in serve.log_records(srv, c) if x.get("path") == "/etc/thread-refused"]
        assert r["sandboxDenied"] is True, (r, mine)
        assert mine and all(x.get("process") == "t" for x in mine), mine


async def t_unattributed_share(tmp):
    if not share.can_run():
        return "skip"
    if shutil.which("nsenter") is None:
        assert os.environ.get("FUSEBOX_TESTS_MUST_RUN") != "1", "nsenter (util-linux) is missing"
        return "skip"
    # a budget of 4 MiB: each share 1 MiB
    with serve.Server(tmp, "--log-max-size", "4M") as srv:
        a = await serve.start_client(srv, "flooded")
        before = rs.held_namespaces(srv.proc.pid)
        ok(await a.call("process/start", share.sh(srv, "held", "echo up; sleep 600")))
        out, _ = await share.output(a, "held", b"up")
        assert out == "up\n", out
        view = {k: v for k, v in rs.held_namespaces(srv.proc.pid).items() if k not in before}
        user = [k for k, v in view.items() if v == "user"]
        mnt = [k for k, v in view.items() if v == "mnt"]
        assert len(user) == 1 and len(mnt) == 1, view
        b = await serve.start_client(srv, "bystander")
        ok(await b.call("process/start", share.sh(srv, "other", "echo up; sleep 600")))
        out, _ = await share.output(b, "other", b"up")
        assert out == "up\n", out
        # 3000 writes and unlinks in the view from the test's own pid
        # namespace: records of no process, some 3 MB
        flood = subprocess.run(["nsenter", "--user=" + user[0], "--mount=" + mnt[0], "/usr/bin/python3", "-c",
                                rs.FLOOD, "/tmp/root" + srv.ws, "3000"], capture_output=True, text=True, timeout=600)
        assert flood.returncode == 0, (flood.stdout, flood.stderr)
        out, code = await share.output(a, "held")
        assert code is not None and "records of no process" in out, (code, out)
        assert srv.proc.poll() is None, srv.stderr()
        r = ok(await b.call("process/read", {"processId": "other"}))
        assert not r["exited"], r
        out, code = await share.run(b, srv, "after", "echo still")
        assert code == 0 and out == "still\n", (code, out)
        ok(await b.call("process/terminate", {"processId": "other"}))
        await a.close()
        await b.close()


def keeper_of(server_pid):
    """The pid of the view keeper below SERVER_PID: the process that holds
    the view's mount point (a directory ".../root") and a socket."""
    found = []
    for pid in filter(str.isdigit, os.listdir("/proc")):
        try:
            links = [os.readlink("/proc/%s/fd/%s" % (pid, fd)) for fd in os.listdir("/proc/%s/fd" % pid)]
            chain, p = [], pid
            while p not in ("0", "1"):
                with open("/proc/%s/stat" % p) as f:
                    p = f.read().rsplit(")", 1)[1].split()[1]
                chain.append(p)
        except OSError:
            continue
        if str(server_pid) in chain and any(x.endswith("/root") for x in links) and \
                any(x.startswith("socket:") for x in links):
            found.append(int(pid))
    assert len(found) == 1, found
    return found[0]


def holder(pid):
    """What holds PID now: None when nothing does."""
    try:
        with open("/proc/%d/status" % pid) as f:
            fields = dict(x.split(":", 1) for x in f.read().splitlines() if ":" in x)
        return " ".join("%s=%s" % (k, fields[k].strip()) for k in ("Name", "Tgid", "PPid", "NSpid") if k in fields)
    except OSError:
        return None


async def keeper_pid_taken(tmp):
    """One try at giving a sandbox's process the dead keeper's pid: True
    when that process's refusal is logged, the holder of the pid when
    something that lives on (another test's process, a thread of the
    server) took it first and the try proves nothing.  Raises when the pid
    went free through every step and no refusal of it was logged."""
    async with serve.served(tmp, "keeper") as (srv, c):
        out, code = await share.run(c, srv, "first", "true")
        assert code == 0, (code, out)
        keeper = keeper_of(srv.proc.pid)
        p = share.sh(srv, "taker", "echo ready; while read n; do /usr/bin/touch /usr/refused-by-taker-$n 2>/dev/null; "
                     "echo done$n; done")
        p["pipeStdin"] = True
        ok(await c.call("process/start", p))
        out, _ = await share.output(c, "taker", b"ready")
        assert out == "ready\n", out

        async def touch(n):
            ok(await c.call("process/write", {"processId": "taker", "writeId": "w%d" % n,
                                              "chunk": base64.b64encode(b"%d\n" % n).decode()}))
            out, _ = await share.output(c, "taker", b"done%d\n" % n)
            assert "done%d\n" % n in out, out

        # the server's FUSE workers are made while the keeper lives: a
        # worker made later would take the pid and keep it
        for n in range(100, 108):
            await touch(n)
        os.kill(keeper, 9)
        rs.wait_for(lambda: not os.path.exists("/proc/%d" % keeper), "the keeper to be reaped")
        # the next process made on this host gets the keeper's pid: one of
        # the sandbox's touches, each started with ns_last_pid a step lower,
        # as the server may make threads (which take pids) before it; each
        # is refused a name of its own (a refusal is logged at every level,
        # and the log folds one repeated)
        for n in range(24):
            if holder(keeper) is not None:
                break
            with open("/proc/sys/kernel/ns_last_pid", "w") as f:
                f.write(str(keeper - 1 - n))
            await touch(n)
            records = serve.log_records(srv, c)
            if any(x.get("pid") == keeper and x.get("process") == "taker" and x["decision"] != "allow"
                   for x in records):
                ok(await c.call("process/terminate", {"processId": "taker"}))
                return True
        taken = holder(keeper)
        if taken is not None:
            ok(await c.call("process/terminate", {"processId": "taker"}))
            return taken
        raise AssertionError("no record of pid %d: a process with the dead keeper's pid went unlogged, or never "
                             "got it" % keeper)


async def t_dead_keeper_pid(tmp):
    if not share.can_run():
        return "skip"
    assert not os.path.exists("/usr/refused-by-taker-0")
    held = []
    for _ in range(4):
        r = await keeper_pid_taken(tmp)
        if r is True:
            return
        held.append(r)
    raise AssertionError("the dead keeper's pid was taken before a sandbox's process could get it, four times: %s" %
                         "; ".join(held))


if __name__ == "__main__":
    su.run([("sessions_isolated", t_sessions_isolated), ("narrower_does_not_share", t_narrower_does_not_share),
            ("thread_attributed", t_thread_attributed), ("unattributed_share", t_unattributed_share),
            ("dead_keeper_pid", t_dead_keeper_pid)],
           "fusebox-security-share-")
