#!/usr/bin/env python3
"""Adversarial tests: one client of `fusebox serve` and the access log's
budget, which every client's records share.

- A client chooses what goes into records: a processId is in every record
  of its process, so it is bounded (256 bytes); a longer one is -32602
  naming the bound, and the process does not start.
- So is a `why` in a call's `sandbox` (1024 bytes): it is in every record
  its rule decides.
- Every record a session causes counts against the session's share of the
  budget: its processes' (each within a share of its own, inside the
  session's) and its fs/... calls'.  A session that floods is stopped at
  its share: its processes are killed (125, saying why), its calls that log
  are refused (-32603 naming the share); the server, another client's
  session, its process and its calls go on, and the server ends normally,
  not at its budget.  Before, five processes of one session (each within
  "its quarter") or one session's fs/readFile loop spent the whole budget
  and the server stopped, killing everyone's processes.

- The cache of sandboxes (64, keyed by their text, up to 16 MiB each) holds
  at most 16 MiB of their texts: 64 sandboxes of 1 MiB raise the server's
  memory by less than 40 MiB (by 64 and more before).

The budget is small (--log-max-size 8M: shares of 2 MiB) to be quick.

Exit status: 0 all passed, 1 a check failed, 77 a prerequisite is missing
(unless FUSEBOX_TESTS_MUST_RUN=1).
"""
import base64
import json
import os
import signal
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import security_util as su  # noqa: E402

serve = su.serve
ok, err = serve.ok, serve.err

BUDGET = "8M"
SHARE_WORDS = "the session used up its share of the access log"


def can_run():
    return os.access("/dev/fuse", os.R_OK | os.W_OK)


async def ended(c, pid):
    """PID's end, by process/read: (its output, exit code, failure)."""
    while True:
        r = ok(await c.call("process/read", {"processId": pid, "waitMs": 30000}))
        if r["exited"]:
            out = b"".join(base64.b64decode(ch["chunk"]) for ch in r["chunks"])
            return out.decode(errors="replace"), r["exitCode"], r["failure"] or ""


async def bystander(srv):
    """Another client (from 127.0.0.2) with a process that answers."""
    b = await serve.start_client(srv, "b", source="127.0.0.2")
    ok(await b.call("process/start", serve.start_params(srv, "steady", ["/bin/sh", "-c", "read l; echo got $l"],
                                                        pipe_stdin=True)))
    return b


async def bystander_served(srv, b):
    """B's process still runs and answers, B's calls are served, and the
    server stops as asked: not at its budget."""
    assert srv.proc.poll() is None, "the server stopped: %s" % srv.stderr()[-2000:]
    r = ok(await b.call("process/read", {"processId": "steady"}))
    assert r["exited"] is False, r
    ok(await b.call("process/write", {"processId": "steady", "chunk": "c3RpbGwK", "writeId": "w1"}))
    out, code = await serve.output_of(b, "steady")
    assert code == 0 and out == "got still\n", (code, out)
    ok(await b.call("fs/readFile", {"path": os.path.join(srv.ws, "hello.txt")}))
    await b.close()
    srv.proc.send_signal(signal.SIGTERM)
    assert srv.proc.wait(60) == 0, "the server ended with %s: %s" % (srv.proc.returncode, srv.stderr()[-2000:])


async def t_process_id_bounded(tmp):
    async with serve.served(tmp, "a") as (srv, a):
        e = err(await a.call("process/start", serve.start_params(srv, "P" * 257, ["/bin/true"])), -32602)
        assert "`processId` is 257 bytes long; at most 256" in e["message"], e
        e = err(await a.call("process/read", {"processId": "P" * 257}), -32600)
        if can_run():
            ok(await a.call("process/start", serve.start_params(srv, "P" * 256, ["/bin/true"])))
            _, code = await serve.output_of(a, "P" * 256)
            assert code == 0, code


async def t_why_bounded(tmp):
    def sandbox(why):
        return {"fuseboxPolicy": {"version": 1, "rules": [{"path": "/", "access": "read", "why": "the host"},
                                                          {"path": srv.ws, "access": "deny", "why": why}]}}

    async with serve.served(tmp, "a", files={"hello.txt": "hello\n"}) as (srv, a):
        path = os.path.join(srv.ws, "hello.txt")
        e = err(await a.call("fs/readFile", {"path": path, "sandbox": sandbox("w" * 1025)}), -32602)
        assert "`why` is 1025 bytes long; at most 1024" in e["message"], e
        e = err(await a.call("fs/readFile", {"path": path, "sandbox": sandbox("w" * 1024)}), -32050)
        assert e["data"]["why"] == "w" * 1024, e


async def t_processes_share(tmp):
    if not can_run():
        assert os.environ.get("FUSEBOX_TESTS_MUST_RUN") != "1", "/dev/fuse is missing"
        return "skip"
    with serve.Server(tmp, "--log-max-size", BUDGET, files={"hello.txt": "hello\n"}) as srv:
        b = await bystander(srv)
        a = await serve.start_client(srv, "a")
        loop = "while :; do cat hello.txt >/dev/null; done"
        for i in range(5):
            ok(await a.call("process/start", serve.start_params(srv, "loop%d" % i, ["/bin/sh", "-c", loop])))
        for i in range(5):
            out, code, failure = await ended(a, "loop%d" % i)
            assert code == 125 and "share of the access log" in out and "share of the access log" in failure, \
                (i, code, out, failure)
        e = err(await a.call("process/start", serve.start_params(srv, "again", ["/bin/true"])), -32603)
        assert SHARE_WORDS in e["message"], e
        await a.close()
        await bystander_served(srv, b)


async def t_calls_share(tmp):
    if not can_run():
        assert os.environ.get("FUSEBOX_TESTS_MUST_RUN") != "1", "/dev/fuse is missing"
        return "skip"
    # a long path: some 2 KiB a record
    deep = "/".join(["d" * 200] * 10)
    def prepare(ws):
        os.makedirs(os.path.join(ws, deep))
        with open(os.path.join(ws, deep, "f"), "w") as f:
            f.write("x")

    with serve.Server(tmp, "--log-max-size", BUDGET, files={"hello.txt": "hello\n"}, prepare=prepare) as srv:
        b = await bystander(srv)
        a = await serve.start_client(srv, "a")
        ok(await a.call("process/start", serve.start_params(srv, "a-sleep", ["/bin/sleep", "600"])))
        path = os.path.join(srv.ws, deep, "f")
        # 8 MiB of records at most: a client's calls must be refused first
        for i in range(8 * 1024 * 1024 // 2048):
            r = await a.call("fs/readFile", {"path": path})
            if "error" in r:
                break
        e = err(r, -32603)
        assert SHARE_WORDS in e["message"], e
        out, code, failure = await ended(a, "a-sleep")
        assert code == 125 and SHARE_WORDS in out and SHARE_WORDS in failure, (code, out, failure)
        await a.close()
        await bystander_served(srv, b)


def rss_mib(pid):
    with open("/proc/%d/status" % pid) as f:
        return int(next(l for l in f if l.startswith("VmRSS:")).split()[1]) // 1024


async def t_sandbox_cache_bytes(tmp):
    async with serve.served(tmp, "a") as (srv, a):
        assert os.readlink("/proc/%d/exe" % srv.proc.pid).endswith("fusebox-serve")
        ok(await a.call("fs/getMetadata", {"path": srv.ws}))
        before = rss_mib(srv.proc.pid)
        # 64 distinct sandboxes (the cache's count), each a text of 1 MiB
        # (blanks the JSON allows): the cache keys them by their text
        for i in range(64):
            text = '{"fuseboxPolicy": {"version": 1, %s"rules": [{"path": "/", "access": "read", "why": "%d"}]}}' % (
                " " * (1 << 20), i)
            msg = '{"id": %d, "method": "fs/getMetadata", "params": {"path": %s, "sandbox": %s}}' % (
                1000 + i, json.dumps(srv.ws), text)
            await a.ws.send(msg)
            r = await a.recv()
            assert r.get("id") == 1000 + i and "result" in r, r
        grown = rss_mib(srv.proc.pid) - before
        # 16 MiB of texts kept at most, and what they compile to; 64 MiB
        # and more without the bound
        assert grown < 40, "the server grew by %d MiB for 64 sandboxes of 1 MiB" % grown


async def t_folds_before_exited(tmp):
    """Refusals a process repeats until its end are folded into one record
    with a count; that record is in the log, and delivered as a log/event,
    before the process's process/exited, which a consumer takes for "all
    its records are in" (it came about a second after before)."""
    if not can_run():
        return "skip"
    target = "/etc/passwd"
    # on the host: there, and writable by root
    assert os.path.isfile(target) and os.access(target, os.W_OK)
    async with serve.served(tmp, "fold") as (srv, c):
        ok(await c.call("log/subscribe", {}))
        script = "(while :; do true 2>/dev/null >> %s; done) & sleep 0.5; exit 1" % target
        ok(await c.call("process/start", serve.start_params(srv, "folder", ["/bin/sh", "-c", script])))
        while not any(m.get("method") == "process/exited" and m["params"].get("processId") == "folder"
                      for m in c.inbox):
            c.inbox.append(await c.recv())
        exited = next(i for i, m in enumerate(c.inbox)
                      if m.get("method") == "process/exited" and m["params"].get("processId") == "folder")
        assert c.inbox[exited]["params"]["exitCode"] == 1, c.inbox[exited]
        folds = [x for x in serve.log_records(srv, c) if x.get("process") == "folder" and "repeat" in x]
        assert folds and folds[-1]["repeat"]["count"] > 1, ("no fold of the repeated refusals in the log at its end",
                                                           [x for x in serve.log_records(srv, c)
                                                            if x.get("process") == "folder"][-3:])
        events = [i for i, m in enumerate(c.inbox) if m.get("method") == "log/event" and
                  m["params"].get("process") == "folder" and "repeat" in m["params"]]
        assert events and events[-1] < exited, ("the fold's log/event after process/exited", events, exited)


if __name__ == "__main__":
    su.run([("process_id_bounded", t_process_id_bounded), ("processes_share", t_processes_share),
            ("why_bounded", t_why_bounded), ("calls_share", t_calls_share),
            ("sandbox_cache_bytes", t_sandbox_cache_bytes), ("folds_before_exited", t_folds_before_exited)],
           "fusebox-security-servelog-")
