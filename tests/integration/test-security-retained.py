#!/usr/bin/env python3
"""Adversarial tests: what one client of `fusebox serve` can do to the
output the server keeps for the others (process/read).

The server keeps each process's output for process/read, within a budget
for all of them (`--output-max`, here 8 MiB) of which the clients of one
address hold a quarter (2 MiB).  Client A (127.0.0.1) runs processes that
print 1,000,000 bytes each, five of them, more than its address's share.
Client B (127.0.0.2) and client C (127.0.0.1 too: every local client has
that address, but C has a session of its own) each ran one process that
printed 300,000 bytes, before A's.  Then:

- A's oldest output is forgotten, and process/read of it says so and why
  (not "unknown process id"); A's newest is whole;
- B's output is whole (another address), and so is C's: inside an
  address, the session that holds the most loses first, so A can't push
  out a neighbour on the same address that holds less.

Exit status: 0 all passed, 1 a check failed, 77 a prerequisite is missing
(unless FUSEBOX_TESTS_MUST_RUN=1).
"""
import asyncio
import base64
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import security_util as su  # noqa: E402

serve = su.serve

BIG = 1000000
SMALL = 300000


async def run_to_end(c, srv, pid, size):
    """Start PID printing SIZE bytes and wait until it has closed; its
    output notifications are dropped (the server keeps it)."""
    serve.ok(await c.call("process/start", {"processId": pid, "argv": ["/usr/bin/head", "-c", str(size), "/dev/zero"],
                                            "cwd": srv.ws, "env": {"PATH": "/usr/bin:/bin"}, "tty": False,
                                            "pipeStdin": False, "arg0": None}))
    inbox, c.inbox = c.inbox, []
    for m in inbox:
        if m.get("method") == "process/closed" and m["params"]["processId"] == pid:
            return
    while True:
        m = await c.recv()
        if m.get("method") == "process/closed" and m["params"]["processId"] == pid:
            return


async def read_all(c, pid):
    """PID's whole retained output, or the error process/read answered."""
    data, after = b"", 0
    while True:
        r = await c.call("process/read", {"processId": pid, "afterSeq": after, "maxBytes": 1 << 20, "waitMs": 0})
        if "error" in r:
            return r["error"]
        res = r["result"]
        for chunk in res["chunks"]:
            data += base64.b64decode(chunk["chunk"])
        if res["nextSeq"] <= after or not res["chunks"]:
            return data
        after = res["nextSeq"] - 1


async def t_retained_share(tmp):
    if os.geteuid() != 0 or not os.access("/dev/fuse", os.R_OK | os.W_OK):
        return "skip"
    with serve.Server(tmp, "--output-max", "8M") as srv:
        b = await serve.start_client(srv, "b", source="127.0.0.2")
        c = await serve.start_client(srv, "c")
        a = await serve.start_client(srv, "a")
        await run_to_end(b, srv, "b1", SMALL)
        await run_to_end(c, srv, "c1", SMALL)
        for i in range(1, 6):
            await run_to_end(a, srv, "a%d" % i, BIG)
        # The budget is enforced from the server's loop once a5 has ended:
        # wait for it (bounded: this stops a hung test, it asserts no time).
        forgotten = None
        for _ in range(200):
            got = await read_all(a, "a1")
            if isinstance(got, dict):
                forgotten = got
                break
            await asyncio.sleep(0.05)
        assert forgotten is not None, "a1's output (%d bytes) is still kept past the share" % len(got)
        assert forgotten["code"] == -32600 and "no longer kept" in forgotten["message"], forgotten
        assert "127.0.0.1" in forgotten["message"], forgotten
        newest = await read_all(a, "a5")
        assert newest == b"\0" * BIG, "a5: %r" % (newest if isinstance(newest, dict) else len(newest))
        # The others' output is whole: another address's, and a neighbour's
        # on the same address that holds less than A.
        for client, pid in [(b, "b1"), (c, "c1")]:
            got = await read_all(client, pid)
            assert got == b"\0" * SMALL, "%s: %r" % (pid, got if isinstance(got, dict) else len(got))
        # An id used again is a process again.
        await run_to_end(a, srv, "a1", 10)
        assert await read_all(a, "a1") == b"\0" * 10
        for client in (a, b, c):
            await client.close()


if __name__ == "__main__":
    su.run([("retained_share", t_retained_share)], "fusebox-security-retained-")
