#!/usr/bin/env python3
"""A session's processes share a view, and nothing is lost by it.

A real `fusebox serve` ($FUSEBOX_BIN) and real WebSocket clients; every
process under the server's policy.  The processes of one session that run
under one effective policy run in one FUSE view: the same superblock, seen
as the same device number of "/" inside, and the same private /tmp and
HOME, which outlive each process as in a shell.

- attribution: two processes run at once in one view, each reading and
  making files of its own (one is refused a write); every record of a
  file names the process that made it (`process`), by its own pids, which
  the other's records never carry; a subscription filtered on one
  process gets that one's records only; only the refused process is
  sandboxDenied.  A file a process still holds when it is killed is
  closed, after it is gone, in its own name.
- persistence: what one process leaves in /tmp and HOME the next one
  finds, and so do the session's fs/... calls.
- a killed process: SIGKILL to one process's sandbox (process/terminate)
  leaves the view to the other, which goes on reading and writing, and a
  process started afterwards joins the same view.
- warm listings: a directory one process listed is stat'ed by the next
  without a round trip to the view (its keeper refreshed the attribute
  the listing made stale), while one listed and stat'ed at once is asked
  (the control); the keeper's own requests are in no record.
- bounds: a session's views are bounded (one per distinct sandbox); past
  the bound process/start names it, and a view no process runs in makes
  room.
- the ready sandbox: after a process/start the server makes the next
  one's sandbox in that view ahead (a fusebox-launch child whose sandbox,
  in a pid namespace of its own, is locked down before any command); the
  next process/start in the view runs in it (the command descends from
  that helper, which existed before the call) with its own stdin, stdout,
  stderr, exit status and sandboxDenied, and its records carry its
  processId and none of another's.  One made for a view is never used
  for a narrower sandbox; one killed before use is passed over and the
  call still works; closing the view (idle) kills it, and nothing of the
  view (its keeper, a process in its mount namespace) is left.

Exit status: 0 all passed, 1 a check failed, 77 a prerequisite is missing
(unless FUSEBOX_TESTS_MUST_RUN=1).
"""
import asyncio
import base64
import glob
import os
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import security_util as su  # noqa: E402

serve = su.serve
ok = serve.ok


def can_run():
    return os.geteuid() == 0 and os.access("/dev/fuse", os.R_OK | os.W_OK)


def sh(srv, pid, script, sandbox=None):
    p = serve.start_params(srv, pid, ["/bin/sh", "-c", script])
    p["env"]["HOME"] = os.environ.get("HOME", "/root")
    if sandbox is not None:
        p["sandbox"] = sandbox
    return p


def narrowed(deny):
    """A sandbox that takes DENY away from the server's policy."""
    return {"fuseboxPolicy": {"version": 1, "rules": [
        {"path": "/", "access": "write", "why": "all the server allows"},
        {"path": deny, "access": "deny", "why": "narrower for this process"}]}}


async def output(c, pid, needle=None):
    """PID's output once it holds NEEDLE, or once the process closed: (text,
    exit code or None), read back with process/read, so that the
    notifications of the session's other processes and its log/events
    stay in the inbox."""
    data, after = b"", 0
    while True:
        res = ok(await c.call("process/read", {"processId": pid, "afterSeq": after, "waitMs": 10000}))
        for chunk in res["chunks"]:
            data += base64.b64decode(chunk["chunk"])
            after = chunk["seq"]
        if (needle is not None and needle in data) or res["closed"]:
            return data.decode(errors="replace"), res["exitCode"]


async def run(c, srv, pid, script, sandbox=None):
    ok(await c.call("process/start", sh(srv, pid, script, sandbox)))
    return await output(c, pid)


def proc_status(pid):
    """/proc/PID/status as a dict, or {} once it is gone."""
    try:
        with open("/proc/%d/status" % pid) as f:
            return dict(line.rstrip("\n").split(":\t", 1) for line in f if ":\t" in line)
    except OSError:
        return {}


def children(pid):
    try:
        with open("/proc/%d/task/%d/children" % (pid, pid)) as f:
            return [int(x) for x in f.read().split()]
    except OSError:
        return []


def descendants(pid):
    out, todo = [], children(pid)
    while todo:
        c = todo.pop()
        out.append(c)
        todo += children(c)
    return out


def ancestors(pid):
    chain = []
    while pid > 1:
        pid = int(proc_status(pid).get("PPid", "0"))
        chain.append(pid)
    return chain


def cmdline(pid):
    try:
        with open("/proc/%d/cmdline" % pid, "rb") as f:
            return f.read().decode(errors="replace")
    except OSError:
        return ""


def gone(pid):
    return proc_status(pid).get("State", "Z").startswith(("Z", "X"))


def ready_helpers(server_pid):
    """The server's fusebox-launch children with a sandbox made and locked
    down (a descendant in a pid namespace of its own under a seccomp
    filter) and no command: its stdin is /dev/null and no descendant runs
    anything but fusebox-launch."""
    found = []
    for c in children(server_pid):
        try:
            if not os.readlink("/proc/%d/exe" % c).endswith("/fusebox-launch") or \
                    os.readlink("/proc/%d/fd/0" % c) != "/dev/null":
                continue
        except OSError:
            continue
        below = descendants(c)
        locked = [d for d in below if len(proc_status(d).get("NSpid", "").split()) > 1
                  and proc_status(d).get("Seccomp") == "2"]
        if locked and all(cmdline(d).split("\0")[0].endswith("fusebox-launch") for d in below):
            found.append(c)
    return found


def wait_for(pred, what):
    """A bounded wait (it ends a hung test; no time is asserted)."""
    for _ in range(400):
        v = pred()
        if v:
            return v
        time.sleep(0.025)
    raise AssertionError("never came: " + what)


def polls(pid):
    """PID waits in poll(2): the helper's wait for COMMAND, after READY
    (before it, it reads its sandbox's status)."""
    try:
        with open("/proc/%d/syscall" % pid) as f:
            return f.read().split()[0] in ("7", "271")  # poll, ppoll (x86-64)
    except (OSError, IndexError):
        return False


def wait_ready(server_pid):
    r = wait_for(lambda: [h for h in ready_helpers(server_pid) if polls(h)], "a ready sandbox")
    assert len(r) == 1, r
    # its READY is on its way to the server's loop
    time.sleep(0.1)
    return r[0]


def running(server_pid, marker):
    """The host pid of the command whose argv holds MARKER."""
    def find():
        for d in descendants(server_pid):
            if marker in cmdline(d):
                return d
        return None
    return wait_for(find, "a process running " + marker)


async def t_ready_sandbox(tmp):
    if not can_run():
        return "skip"
    async with serve.served(tmp, "ready", "--view-idle-timeout", "1500") as (srv, c):
        server = srv.proc.pid
        out, code = await run(c, srv, "a", "echo no > /etc/refused-by-a; echo a")
        assert code == 0 and "a\n" in out, (code, out)
        ready = wait_ready(server)
        # the next runs in it: its command descends from the helper made
        # before the call, and has its own streams, status and denials
        p = sh(srv, "b", "read x; echo out:$x; echo err:$x >&2; echo no > /etc/refused-by-b; "
               "cat /proc/self/stat > /dev/null; exec sleep 7.25")
        p["pipeStdin"] = True
        ok(await c.call("process/start", p))
        cmd = running(server, "7.25")
        assert ready in ancestors(cmd), ("not in the ready sandbox", ready, ancestors(cmd))
        ok(await c.call("process/write", {"processId": "b", "writeId": "w", "chunk": base64.b64encode(b"hi\n").decode()}))
        out, _ = await output(c, "b", b"err:hi\n")
        assert out.startswith("out:hi\n") and "err:hi\n" in out, out
        r = ok(await c.call("process/terminate", {"processId": "b"}))
        assert r["running"] is True, r
        out, code = await output(c, "b")
        assert code == 128 + 9, (code, out)
        r = ok(await c.call("process/read", {"processId": "b"}))
        assert r["sandboxDenied"] is True, r
        out, code = await run(c, srv, "b2", "echo hi; exit 3")
        assert code == 3 and out == "hi\n", (code, out)
        r = ok(await c.call("process/read", {"processId": "b2"}))
        assert r["sandboxDenied"] is False, r
        records = serve.log_records(srv, c)
        for proc in ("a", "b"):
            mine = [x for x in records if x.get("path") == "/etc/refused-by-" + proc]
            assert mine and all(x.get("process") == proc and x["decision"] != "allow" for x in mine), (proc, mine)
        # the pid namespace is b's alone: none of b's pids is in another's records
        bpids = {x["pid"] for x in records if x.get("process") == "b"}
        assert bpids and not [x for x in records if x.get("pid") in bpids and x.get("process") != "b"], bpids

        # a narrower sandbox (another view) never runs in it, and its run
        # leaves the one made for its own view
        ready = wait_ready(server)
        p = sh(srv, "n", "exec sleep 7.5", narrowed("/nope"))
        ok(await c.call("process/start", p))
        cmd = running(server, "7.5")
        assert ready not in ancestors(cmd), ("a narrower sandbox ran in the ready one", ready, ancestors(cmd))
        ok(await c.call("process/terminate", {"processId": "n"}))
        await output(c, "n")

        # one killed before use is passed over: the call still works
        ready = wait_ready(server)
        os.kill(ready, 9)
        wait_for(lambda: gone(ready), "the ready sandbox's helper to end")
        out, code = await run(c, srv, "n2", "echo after; exit 4", narrowed("/nope"))
        assert code == 4 and out == "after\n", (code, out)

        # the view's end (idle) kills its ready sandbox: nothing of the
        # view is left, neither the sandbox nor anything in its namespaces
        # (each namespace held open meanwhile: a namespace that ended gives
        # its number to the next one made, anyone's)
        ready = wait_ready(server)
        below = descendants(ready)
        held = {}
        for d in below:
            try:
                fd = os.open("/proc/%d/ns/mnt" % d, os.O_RDONLY | os.O_CLOEXEC)
            except OSError:
                continue
            if os.fstat(fd).st_ino in held:
                os.close(fd)
            else:
                held[os.fstat(fd).st_ino] = fd
        try:
            wait_for(lambda: gone(ready) and all(gone(d) for d in below), "the ready sandbox to end with its view")
            assert not ready_helpers(server), ready_helpers(server)
            left = []
            for pid in filter(str.isdigit, os.listdir("/proc")):
                try:
                    if os.stat("/proc/%s/ns/mnt" % pid).st_ino in held:
                        left.append(pid)
                except OSError:
                    pass
            assert not left, ("the view's sandboxes' mount namespaces are still held", left)
        finally:
            for fd in held.values():
                os.close(fd)

    # a session whose client left: its ready sandbox goes at once
    async with serve.served(tmp, "ready-detach") as (srv, c):
        out, code = await run(c, srv, "a", "true")
        assert code == 0, (code, out)
        ready = wait_ready(srv.proc.pid)
        await c.close()
        wait_for(lambda: gone(ready), "the ready sandbox to end with its session's client")


async def t_attribution(tmp):
    if not can_run():
        return "skip"

    def prepare(ws):
        os.mkdir(os.path.join(ws, "ro"))

    files = {name: name + "\n" for name in ("a.txt", "b.txt", "held.txt")}
    async with serve.served(tmp, "share", files=files, prepare=prepare) as (srv, c):
        ok(await c.call("log/subscribe", {"filter": {"process": "p1"}}))
        ws = srv.ws
        # Both wait for each other through the /tmp they share, so that
        # they run at once; each then reads its file and makes its own.
        # p1's child says "held" once it holds held.txt (the group's
        # redirection is opened before the group runs): said by p1 itself
        # after the "&", it could come before the child had even run, and
        # a child killed then never opens the file.
        p1 = ("stat -c %%d / > /tmp/p1.dev; touch /tmp/p1-up; while [ ! -e /tmp/p2-up ]; do sleep 0.02; done; "
              "for i in 1 2 3 4 5; do cat %s/a.txt > /dev/null; done; echo one > %s/made-by-p1; "
              "{ echo held; exec sleep 600; } < %s/held.txt & wait" % (ws, ws, ws))
        p2 = ("stat -c %%d / > /tmp/p2.dev; touch /tmp/p2-up; while [ ! -e /tmp/p1-up ]; do sleep 0.02; done; "
              "for i in 1 2 3 4 5; do cat %s/b.txt > /dev/null; done; echo two > %s/made-by-p2; "
              "echo no > /etc/refused-by-p2; exit 3" % (ws, ws))
        ok(await c.call("process/start", sh(srv, "p1", p1)))
        ok(await c.call("process/start", sh(srv, "p2", p2)))
        out, _ = await output(c, "p1", b"held")
        assert "held" in out, out
        out2, code2 = await output(c, "p2")
        assert code2 == 3, (code2, out2)
        # p1, killed while a file of its own is still open: its close comes
        # after p1's processes are gone, and is still p1's
        ok(await c.call("process/terminate", {"processId": "p1"}))
        _, code1 = await output(c, "p1")
        dev = await run(c, srv, "dev", "cat /tmp/p1.dev /tmp/p2.dev")
        devs = dev[0].split()
        assert len(devs) == 2 and devs[0] == devs[1], "not one view: %r" % (dev,)
        r = ok(await c.call("process/read", {"processId": "p2"}))
        assert r["sandboxDenied"] is True, r
        r = ok(await c.call("process/read", {"processId": "p1"}))
        assert r["sandboxDenied"] is False, r
        for _ in range(600):  # the last close record (bounded wait, no timing assumed)
            records = serve.log_records(srv, c)
            if any(x.get("path") == ws + "/held.txt" and x.get("op") == "close" for x in records):
                break
            await asyncio.sleep(0.05)
        mine = {"p1": (ws + "/a.txt", ws + "/made-by-p1"), "p2": (ws + "/b.txt", ws + "/made-by-p2")}
        pids = {"p1": set(), "p2": set()}
        for proc, paths in mine.items():
            recs = [x for x in records if x.get("path") in paths]
            assert recs, "no record of %s's files" % proc
            for x in recs:
                assert x.get("process") == proc and x.get("session") == c.log_session, (proc, x)
                pids[proc].add(x["pid"])
        assert not pids["p1"] & pids["p2"], pids
        held = [x for x in records if x.get("path") == ws + "/held.txt"]
        assert held and all(x.get("process") == "p1" for x in held), held
        refused = [x for x in records if x.get("path") == "/etc/refused-by-p2"]
        assert refused and all(x.get("process") == "p2" and x["decision"] != "allow" for x in refused), refused
        # the subscription filtered on p1: p1's records only, and some
        seen = []
        while True:
            m = c.inbox.pop(0) if c.inbox else await c.recv()
            if m.get("method") == "log/event":
                seen.append(m["params"])
                if m["params"].get("path") == ws + "/made-by-p1":
                    break
        assert seen and all(x.get("process") == "p1" for x in seen), seen[:3]


async def t_persistence(tmp):
    if not can_run():
        return "skip"
    async with serve.served(tmp, "persist") as (srv, c):
        out, code = await run(c, srv, "w", "echo kept > /tmp/note && echo home > $HOME/note && echo ok")
        assert code == 0 and out == "ok\n", (code, out)
        out, code = await run(c, srv, "r", "cat /tmp/note $HOME/note")
        assert code == 0 and out == "kept\nhome\n", (code, out)
        r = ok(await c.call("fs/readFile", {"path": "/tmp/note"}))
        assert base64.b64decode(r["dataBase64"]) == b"kept\n", r
        ok(await c.call("fs/writeFile", {"path": "/tmp/from-api", "dataBase64": base64.b64encode(b"api\n").decode()}))
        out, code = await run(c, srv, "r2", "cat /tmp/from-api")
        assert code == 0 and out == "api\n", (code, out)
        kept = glob.glob(os.path.join(c.run_dir, "sessions", "*", "*", "note"))
        assert len(kept) == 2, kept  # on the host, in the server's run directory
    # nothing of them is left once the server has ended
    assert not os.path.lexists(os.path.join(c.run_dir, "sessions")), os.listdir(c.run_dir)
    assert os.path.exists(os.path.join(c.run_dir, "access.jsonl"))


async def t_survives_sigkill(tmp):
    if not can_run():
        return "skip"
    async with serve.served(tmp, "kill", files={"in.txt": "in\n"}) as (srv, c):
        ws = srv.ws
        ok(await c.call("process/start", sh(srv, "victim", "stat -c %d / > /tmp/victim.dev; echo up; sleep 600")))
        out, _ = await output(c, "victim", b"up")
        assert "up" in out, out
        # the survivor waits for a word on stdin between two rounds of work
        p = sh(srv, "survivor", "stat -c %%d / > /tmp/survivor.dev; cat %s/in.txt; read w; cat %s/in.txt; "
               "echo after > /tmp/after; cat /tmp/after; ls /tmp > /dev/null; echo done" % (ws, ws))
        p["pipeStdin"] = True
        ok(await c.call("process/start", p))
        out, _ = await output(c, "survivor", b"in\n")
        assert "in" in out, out
        r = ok(await c.call("process/terminate", {"processId": "victim"}))
        assert r["running"] is True, r
        _, code = await output(c, "victim")
        assert code == 128 + 9, code
        ok(await c.call("process/write", {"processId": "survivor", "chunk": base64.b64encode(b"go\n").decode(),
                                          "writeId": "go"}))
        out, code = await output(c, "survivor")
        assert code == 0 and out == "in\nin\nafter\ndone\n", (code, out)
        out, code = await run(c, srv, "later", "stat -c %d /; cat /tmp/victim.dev /tmp/survivor.dev")
        devs = out.split()
        assert code == 0 and len(devs) == 3 and len(set(devs)) == 1, (code, out)


async def t_warm_listing(tmp):
    if not can_run():
        return "skip"
    dirs = ["tree/d%d" % i for i in range(5)]

    def prepare(ws):
        for d in dirs + ["ctl"]:
            os.makedirs(os.path.join(ws, d))
            with open(os.path.join(ws, d, "f"), "w") as f:
                f.write("f\n")

    async with serve.served(tmp, "warm", "--log-level", "all", prepare=prepare) as (srv, c):
        ws = srv.ws
        # the keeper refreshes 50 ms after the last listing, well within the
        # nap (a margin: what is checked is the next process's requests)
        out, code = await run(c, srv, "w1", "cd %s && ls -R tree > /dev/null; sleep 2" % ws)
        assert code == 0, (code, out)
        out, code = await run(c, srv, "w2", "cd %s && ls ctl > /dev/null; stat -c %%X ctl %s > /dev/null" %
                              (ws, " ".join(dirs)))
        assert code == 0, (code, out)
        records = serve.log_records(srv, c)
        listed = [x["path"] for x in records if x.get("process") == "w1" and x["op"] == "readdir"]
        assert all(ws + "/" + d in listed for d in dirs), listed
        asked = [x["path"] for x in records if x.get("process") == "w2" and x["op"] == "getattr"]
        assert ws + "/ctl" in asked, asked  # the control: listed now, then asked
        assert not [d for d in dirs if ws + "/" + d in asked], asked
        stray = [x for x in records if x["op"] == "getattr" and "/tree/" in x.get("path", "")
                 and x.get("process") not in ("w1", "w2")]
        assert not stray, stray


async def t_view_bounds(tmp):
    if not can_run():
        return "skip"
    async with serve.served(tmp, "bounds") as (srv, c):
        n = 8  # FB_RPC_SESSION_VIEWS_MAX
        for i in range(n):
            ok(await c.call("process/start", sh(srv, "v%d" % i, "echo up; sleep 600", narrowed("/nope%d" % i))))
            out, _ = await output(c, "v%d" % i, b"up")
            assert "up" in out, out
        r = await c.call("process/start", sh(srv, "over", "true", narrowed("/nope-over")))
        e = serve.err(r, -32600)
        assert "views" in e["message"] and "limit" in e["message"] and str(n) in e["message"], e
        # an existing one's sandbox still runs, in its view
        out, code = await run(c, srv, "again", "echo fine", narrowed("/nope0"))
        assert code == 0 and out == "fine\n", (code, out)
        # a view no process runs in makes room
        ok(await c.call("process/terminate", {"processId": "v0"}))
        await output(c, "v0")
        out, code = await run(c, srv, "over", "echo room", narrowed("/nope-over"))
        assert code == 0 and out == "room\n", (code, out)
        for i in range(1, n):
            ok(await c.call("process/terminate", {"processId": "v%d" % i}))
            await output(c, "v%d" % i)


if __name__ == "__main__":
    su.run([("attribution", t_attribution), ("persistence", t_persistence),
            ("survives_sigkill", t_survives_sigkill), ("warm_listing", t_warm_listing),
            ("view_bounds", t_view_bounds), ("ready_sandbox", t_ready_sandbox)], "fusebox-serve-share-")
