#!/usr/bin/env python3
"""Conformance of `fusebox serve` with Codex's `codex exec-server`, by value.

1. Capture: the real Codex CLI (the version tools/codex.sh pins) runs a short
   agent session (a command, a patch, a read back) against `fusebox serve`
   through a logging WebSocket proxy, with the scripted model of
   codex_util.py.  What the agent sent is kept: its `initialize`, the
   `sandbox` context of its fs and process calls, its process/start params
   (env, envPolicy, metadata), its fs calls.
2. Replay: `codex exec-server` and `fusebox serve --policy builtin:host` are
   started side by side, each with a directory of its own, and each gets the
   same requests: the captured ones (paths moved to its directory), then a
   corpus of edge cases, sandboxed calls carrying the captured context
   exactly as the agent sends it.
3. Compare: every answer's values, not only their types: error codes and
   messages, file contents and metadata, process output, exit codes,
   sandboxDenied, nextSeq.  Values that differ by nature (session ids, times,
   version strings, the executor's own paths) are left out; every other
   difference must be one docs/api.md ("Differences from Codex") explains,
   and each such difference is checked to be exactly that one.

Exit status: 0 every answer is Codex's or an explained difference, 1
otherwise, 77 node, the pinned Codex or python3-websockets is missing
(unless FUSEBOX_TESTS_MUST_RUN=1: then 1).
"""
import asyncio
import base64
import copy
import json
import os
import shutil
import sys
import tempfile

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import codex_util as cu  # noqa: E402

try:
    import websockets
except ImportError:
    cu.skip("python3-websockets is missing (apt-get install python3-websockets)")

# Differences docs/api.md explains.  Each maps a case to a check of the pair
# of outcomes (codex, fusebox): the difference must be exactly this one.
EXPECTED = {
    "start-nosandbox": ("process/start without sandbox: fusebox confines every process (linuxSeccomp), "
                        "Codex answers none",
                        lambda a, b: a["result"]["sandboxType"] == "none" and
                        b["result"]["sandboxType"] == "linuxSeccomp"),
    "write-outside": ("a refused write: fusebox's -32050 with the rule in data, the same message as Codex's -32603",
                      lambda a, b: a["error"]["code"] == -32603 and b["error"]["code"] == -32050 and
                      a["error"]["message"] == b["error"]["message"] == "Read-only file system (os error 30)" and
                      b["error"]["data"]["decision"] == "readonly"),
    "read-denied": ("a denied read: fusebox's -32050 with the rule in data, the same message as Codex's -32600",
                    lambda a, b: a["error"]["code"] == -32600 and b["error"]["code"] == -32050 and
                    a["error"]["message"] == b["error"]["message"] == "Permission denied (os error 13)" and
                    b["error"]["data"]["decision"] == "deny"),
    "start-missing-program": ("a missing program, with the agent's sandbox: Codex's Linux sandbox helper "
                              "panics (exit 101, sandboxDenied true); fusebox exits 127 with a message, as a "
                              "shell would",
                              lambda a, b: a["exit"] == 101 and "panicked" in a["stderr"] and
                              b["exit"] == 127 and "not found" in b["stderr"] and b["denied"] is False),
    "start-missing-program-nosandbox": ("a missing program, without a sandbox: Codex fails process/start "
                                        "(spawnNotFound); fusebox confines it anyway and exits 127",
                                        lambda a, b: a["start"]["error"]["code"] == -32603 and
                                        spawn_not_found(a["start"]) and
                                        b["exit"] == 127 and "not found" in b["stderr"]),
    "start-missing-cwd": ("a missing cwd: Codex fails process/start (spawnNotFound), fusebox starts the sandbox "
                          "and the command exits 125 with a message",
                          lambda a, b: a["start"]["error"]["code"] == -32603 and
                          spawn_not_found(a["start"]) and
                          b["exit"] == 125 and "working directory" in b["stderr"]),
    "write-bad-b64": ("invalid base64: the same code and prefix; the detail is the decoder's own",
                      lambda a, b: a["error"]["code"] == b["error"]["code"] == -32600 and
                      a["error"]["message"].startswith("fs/writeFile requires valid base64 dataBase64: ") and
                      b["error"]["message"].startswith("fs/writeFile requires valid base64 dataBase64: ")),
    "readblock-big": ("fs/readBlock's bound: Codex's is 1 MiB, fusebox's 4 MiB",
                      lambda a, b: a["error"]["code"] == -32600 and
                      a["error"]["message"] == "file read block length must be between 1 and 1048576" and
                      "result" in b),
    "readblock-zero": ("fs/readBlock of 0 bytes: refused by both, each naming its bound",
                       lambda a, b: a["error"]["code"] == b["error"]["code"] == -32600 and
                       b["error"]["message"] == "file read block length must be between 1 and 4194304"),
    "no-such-method": ("an unknown method: the same code, Codex calls itself a stub",
                       lambda a, b: a["error"]["code"] == b["error"]["code"] == -32601),
    "null-confined": ("a call with `sandbox: null`: Codex does it unconfined, fusebox under the server's policy "
                      "(builtin:host hides .git)",
                      lambda a, b: base64.b64decode(a["result"]["dataBase64"]) == b"ref: refs/heads/main\n" and
                      b["error"]["code"] == -32004),
    "notification": ("an unknown notification: Codex closes the connection, fusebox answers -32600 and keeps it",
                     lambda a, b: a == "closed" and b["error"]["code"] == -32600),
    "response": ("a client response: Codex closes the connection, fusebox answers -32600 and keeps it",
                 lambda a, b: a == "closed" and b["error"]["code"] == -32600),
}

def spawn_not_found(answer):
    """Codex's failed process/start for a missing program or cwd: -32603,
    with data.kind spawnNotFound since 0.171 (0.169 sends no data)."""
    e = answer["error"]
    return e["code"] == -32603 and e.get("data", {"kind": "spawnNotFound"}).get("kind") == "spawnNotFound"


# Members whose values differ by nature: ids, times, who the executor is.
VOLATILE = {"id", "sessionId", "createdAtMs", "modifiedAtMs", "executorVersion", "providerId", "prependPathDirs",
            "processId"}


def scrub(v, d):
    """V with the server's directory D written as <D> and volatile members
    dropped."""
    if isinstance(v, dict):
        return {k: scrub(x, d) for k, x in v.items() if k not in VOLATILE}
    if isinstance(v, list):
        return [scrub(x, d) for x in v]
    if isinstance(v, str):
        return v.replace(d, "<D>")
    return v


def capture(codex, fusebox, tmp):
    """An agent session against fusebox through the proxy; returns the
    messages the agent sent."""
    ws = os.path.join(tmp, "capture-ws")
    os.makedirs(ws)
    with open(os.path.join(ws, "existing.txt"), "w") as f:
        f.write("one\ntwo\n")
    env = dict(os.environ, XDG_STATE_HOME=os.path.join(tmp, "capture-state"))
    server, url = cu.start_server([fusebox, "serve", "--listen", "ws://127.0.0.1:0", "--policy", "builtin:agent",
                                   "--workspace", ws], env, os.path.join(tmp, "capture-serve.log"))
    proxy = cu.LoggingProxy(url)
    model = cu.ScriptedModel([
        [cu.shell("c1", "echo captured")],
        [cu.apply_patch("p1", "*** Begin Patch\n*** Update File: existing.txt\n@@\n one\n-two\n+three\n"
                              "*** End Patch\n")],
        [cu.shell("c2", "cat existing.txt")],
        [cu.message("done")],
    ])
    try:
        home = cu.codex_home(tmp, model.url)
        rc, _, stderr = cu.run_codex_exec(codex, ws, cu.codex_env(tmp, home, proxy.url), "Capture.")
        outs = model.outputs()
        if rc != 0 or "three" not in (outs.get("c2") or ""):
            raise AssertionError("the capture session failed (codex exit %d): %s\n%s" % (rc, outs, stderr[-3000:]))
        return ws, proxy.requests()
    finally:
        model.stop()
        proxy.stop()
        cu.stop_server(server)


def rewrite(v, old, new):
    return json.loads(json.dumps(v).replace(old, new))


class Conn:
    def __init__(self, ws):
        self.ws = ws
        self.next_id = 1000
        self.inbox = []

    async def call(self, method, params):
        self.next_id += 1
        rid = self.next_id
        await self.ws.send(json.dumps({"id": rid, "method": method, "params": params}))
        return await self.take(lambda m: m.get("id") == rid and "method" not in m)

    async def take(self, pred, timeout=60):
        for i, m in enumerate(self.inbox):
            if pred(m):
                return self.inbox.pop(i)
        while True:
            m = json.loads(await asyncio.wait_for(self.ws.recv(), timeout))
            if pred(m):
                return m
            self.inbox.append(m)


async def run_process(c, params):
    """process/start, then every notification to process/closed, then a
    process/read; the values a client sees."""
    start = await c.call("process/start", params)
    if "error" in start:
        return {"start": start}
    pid = params["processId"]
    out = {"stdout": b"", "stderr": b""}
    exited = None
    while True:
        m = await c.take(lambda m: m.get("params", {}).get("processId") == pid and "method" in m)
        if m["method"] == "process/output":
            out[m["params"]["stream"]] += base64.b64decode(m["params"]["chunk"])
        elif m["method"] == "process/exited":
            exited = m["params"]
        elif m["method"] == "process/closed":
            closed_seq = m["params"]["seq"]
            break
    read = await c.call("process/read", {"processId": pid, "afterSeq": 0})
    r = read.get("result", {})
    replay_out = {"stdout": b"", "stderr": b""}
    for ch in r.get("chunks", []):
        replay_out[ch["stream"]] += base64.b64decode(ch["chunk"])
    # How output is cut into chunks is the OS's business: compared are the
    # bytes, and that nextSeq follows the last notification (closed).
    return {"start": start, "stdout": out["stdout"].decode(errors="replace"),
            "stderr": out["stderr"].decode(errors="replace"), "exit": exited["exitCode"],
            "denied": exited["sandboxDenied"],
            "read": {k: r.get(k) for k in ("exited", "exitCode", "closed", "sandboxDenied")},
            "read_next_seq_after_closed": r.get("nextSeq") == closed_seq + 1,
            "read_replays_output": replay_out == out}


async def replay(url, d, outside, captured, captured_ws):
    """Every case against one server whose directory is D; returns
    {case: outcome}."""
    got = {}
    sent = rewrite(captured, captured_ws, d)
    init = next(m for m in sent if m.get("method") == "initialize")
    starts = [m for m in sent if m.get("method") == "process/start"]
    sandboxed = [m["params"]["sandbox"] for m in sent
                 if m.get("method") in ("fs/writeFile", "process/start") and m["params"].get("sandbox")]
    ctx = sandboxed[0]
    deny_ctx = copy.deepcopy(ctx)
    deny_ctx["permissions"]["file_system"]["entries"].append(
        {"path": {"type": "path", "path": "file://%s/secret.txt" % d}, "access": "deny"})
    start_template = dict(starts[0]["params"])
    f = "file://" + d
    # a repository below the directory, not in it: the agent's own probes of
    # <D>/.git must find nothing on either side
    os.makedirs(d + "/sub/.git")
    with open(d + "/sub/.git/HEAD", "w") as fh:
        fh.write("ref: refs/heads/main\n")

    def start(pid, argv, **over):
        p = dict(start_template, processId=pid, argv=argv, cwd=f)
        p.update(over)
        return p

    async with websockets.connect(url, max_size=None) as ws:
        c = Conn(ws)
        got["initialize"] = await c.call("initialize", init["params"])
        await ws.send(json.dumps({"method": "initialized", "params": {}}))
        # The agent's own fs calls, in its order.
        for i, m in enumerate(m for m in sent if m.get("method", "").startswith("fs/")):
            got["captured %02d %s" % (i, m["method"])] = await c.call(m["method"], m["params"])
        # The agent's process/start as it sends it, with other commands.
        for i, m in enumerate(starts):
            o = await run_process(c, dict(m["params"], processId="cap-%d" % i))
            # bash -l reads the host's profile, whose complaints on stderr
            # (and their seq numbers) depend on each sandbox: not compared.
            got["captured-start %02d" % i] = {k: o.get(k) for k in ("start", "stdout", "exit", "denied")}
        got["environment/info"] = await c.call("environment/info", {})
        # Edge cases, sandboxed ones with the agent's context.
        calls = [
            ("write", "fs/writeFile", {"path": f + "/a.txt", "dataBase64": "aGVsbG8=", "sandbox": ctx}),
            ("read", "fs/readFile", {"path": f + "/a.txt", "sandbox": ctx}),
            ("read-null", "fs/readFile", {"path": f + "/a.txt", "sandbox": None}),
            ("read-new-member", "fs/readFile", {"path": f + "/a.txt", "aMemberOfANewerClient": [1]}),
            ("null-confined", "fs/readFile", {"path": f + "/sub/.git/HEAD", "sandbox": None}),
            ("read-missing", "fs/readFile", {"path": f + "/missing", "sandbox": ctx}),
            ("read-dir", "fs/readFile", {"path": f, "sandbox": ctx}),
            ("open-dir", "fs/open", {"handleId": "dir", "path": f}),
            ("read-mistyped", "fs/readFile", {"path": 42}),
            ("read-no-path", "fs/readFile", {}),
            ("read-bad-uri", "fs/readFile", {"path": "http://example.com/x"}),
            ("write-bad-b64", "fs/writeFile", {"path": f + "/b.txt", "dataBase64": "not base64!"}),
            ("write-outside", "fs/writeFile", {"path": "file://%s/x.txt" % outside, "dataBase64": "eA==",
                                               "sandbox": ctx}),
            ("secret", "fs/writeFile", {"path": f + "/secret.txt", "dataBase64": "czNjcmV0"}),
            ("read-denied", "fs/readFile", {"path": f + "/secret.txt", "sandbox": deny_ctx}),
            ("mkdir", "fs/createDirectory", {"path": f + "/d/e", "sandbox": ctx}),
            ("mkdir-nonrecursive", "fs/createDirectory", {"path": f + "/x/y", "recursive": False}),
            ("getmetadata", "fs/getMetadata", {"path": f + "/a.txt"}),
            ("getmetadata-sandboxed", "fs/getMetadata", {"path": f + "/a.txt", "sandbox": ctx}),
            ("getmetadata-missing", "fs/getMetadata", {"path": f + "/missing"}),
            ("canonicalize", "fs/canonicalize", {"path": f + "/d/../a.txt"}),
            ("readdir", "fs/readDirectory", {"path": f + "/d"}),
            ("readdir-file", "fs/readDirectory", {"path": f + "/a.txt"}),
            ("walk", "fs/walk", {"path": f + "/d", "options": {"maxDepth": 4, "maxDirectories": 10,
                                                               "maxEntries": 100, "followDirectorySymlinks": False}}),
            ("walk-over", "fs/walk", {"path": f, "options": {"maxDepth": 100, "maxDirectories": 10,
                                                              "maxEntries": 100, "followDirectorySymlinks": False}}),
            ("copy", "fs/copy", {"sourcePath": f + "/a.txt", "destinationPath": f + "/c.txt", "recursive": False}),
            ("copy-dir", "fs/copy", {"sourcePath": f + "/d", "destinationPath": f + "/d2", "recursive": False}),
            ("remove", "fs/remove", {"path": f + "/c.txt"}),
            ("remove-missing", "fs/remove", {"path": f + "/nothing", "force": False}),
            ("remove-nonempty", "fs/remove", {"path": f + "/d", "recursive": False}),
            ("open", "fs/open", {"handleId": "h1", "path": f + "/a.txt"}),
            ("readblock", "fs/readBlock", {"handleId": "h1", "offset": 0, "len": 3}),
            ("open-again", "fs/open", {"handleId": "h1", "path": f + "/a.txt"}),
            ("readblock-big", "fs/readBlock", {"handleId": "h1", "offset": 0, "len": 2 * 1024 * 1024}),
            ("readblock-zero", "fs/readBlock", {"handleId": "h1", "offset": 0, "len": 0}),
            ("close", "fs/close", {"handleId": "h1"}),
            ("readblock-closed", "fs/readBlock", {"handleId": "h1", "offset": 0, "len": 3}),
            ("open-long-id", "fs/open", {"handleId": "x" * 40, "path": f + "/a.txt"}),
            ("read-unknown", "process/read", {"processId": "nobody", "afterSeq": 0}),
            ("write-unknown", "process/write", {"processId": "nobody", "chunk": "eA==", "writeId": "w1"}),
            ("signal-unknown", "process/signal", {"processId": "nobody", "signal": "interrupt"}),
            ("terminate-unknown", "process/terminate", {"processId": "nobody"}),
            ("no-such-method", "no/such/method", {}),
        ]
        for name, method, params in calls:
            got[name] = await c.call(method, params)
        got["start-echo"] = await run_process(c, start("echo", ["/bin/sh", "-c", "echo out; echo err >&2; exit 3"]))
        got["start-nosandbox"] = await c.call("process/start", start("nosb", ["/bin/true"], sandbox=None))
        got["start-empty-argv"] = await c.call("process/start", start("empty", []))
        got["start-missing-program"] = await run_process(c, start("noprog", ["/no/such/program"]))
        got["start-missing-cwd"] = await run_process(c, start("nocwd", ["/bin/true"], cwd=f + "/no/such/dir"))
        got["start-missing-program-nosandbox"] = await run_process(c, start("noprog2", ["/no/such/program"],
                                                                           sandbox=None))
        # sandboxDenied: true for a command that failed after a refused
        # write, false for one that succeeded anyway.
        got["process-write-refused"] = await run_process(
            c, start("refused", ["/bin/sh", "-c", "echo changed > %s/outside.txt" % outside]))
        got["process-write-refused-ok"] = await run_process(
            c, start("refused-ok", ["/bin/sh", "-c", "echo changed > %s/outside.txt; exit 0" % outside]))
        # stdin of a process without tty or pipeStdin
        await c.call("process/start", start("sleeper", ["/bin/sh", "-c", "sleep 30"]))
        got["write-nostdin"] = await c.call("process/write", {"processId": "sleeper", "chunk": "eA==",
                                                              "writeId": "w1"})
        got["terminate-running"] = await c.call("process/terminate", {"processId": "sleeper"})
        # A batch is refused on id -1.
        await ws.send(json.dumps([{"id": 900, "method": "fs/getMetadata", "params": {"path": f}}]))
        got["batch"] = await c.take(lambda m: m.get("id") in (-1, 900))
        assert got["batch"].get("id") == -1, got["batch"]
    # What a client may not send: each on a connection of its own.
    for name, msg in (("notification", {"method": "no/such/notification", "params": {}}),
                      ("response", {"id": 5, "result": {}})):
        async with websockets.connect(url, max_size=None) as ws:
            c = Conn(ws)
            await c.call("initialize", {"clientName": "conformance"})
            await ws.send(json.dumps({"method": "initialized", "params": {}}))
            await ws.send(json.dumps(msg))
            try:
                got[name] = await c.take(lambda m: "error" in m, timeout=5)
            except (websockets.exceptions.ConnectionClosed, asyncio.TimeoutError):
                got[name] = "closed"
    return got


def compare(name, a, b):
    """None when the outcomes agree where a client depends on them, else
    what differs."""
    if isinstance(a, dict) and isinstance(b, dict) and "error" in a and "error" in b:
        ea, eb = a["error"], b["error"]
        if ea["code"] != eb["code"]:
            return "error code %s vs %s" % (ea["code"], eb["code"])
        # -32602: serde's wording and ours differ; the code is what counts.
        # A batch: Codex's message names the peer's address.
        if ea["code"] != -32602 and name != "batch" and ea["message"] != eb["message"]:
            return "error message %r vs %r" % (ea["message"], eb["message"])
        return None
    if name in ("initialize", "environment/info"):
        ia = a["result"].get("environmentInfo", a["result"])
        ib = b["result"].get("environmentInfo", b["result"])
        problems = ["missing %s" % k for k in ia if k not in ib]
        for k in ("cwd", "userHomeDir", "tempDir"):
            if not str(ib.get(k, "")).startswith(("file:///", "file://<D>")):
                problems.append("%s is not a file:// URI: %r" % (k, ib.get(k)))
        for k in ("temporaryDirectories", "prependPathDirs"):
            if not all(str(x).startswith("file:///") for x in ib.get(k, [])):
                problems.append("%s holds something else than file:// URIs" % k)
        for k in ("shell", "platformOs", "tempDir", "userHomeDir", "temporaryDirectories"):
            if ia.get(k) != ib.get(k):
                problems.append("%s %r vs %r" % (k, ia.get(k), ib.get(k)))
        # Every capability Codex announces is one fusebox answers (false) too;
        # fusebox lists 0.171's, a superset of older releases'.
        missing = sorted(set(ia.get("capabilities", {})) - set(ib.get("capabilities", {})))
        if missing:
            problems.append("capabilities fusebox does not answer: %s" % missing)
        return "; ".join(problems) or None
    if a != b:
        return "%s\n    vs %s" % (json.dumps(a, sort_keys=True)[:700], json.dumps(b, sort_keys=True)[:700])
    return None


def main():
    codex, version = cu.find_codex()
    fusebox = os.environ.get("FUSEBOX_BIN", "fusebox")
    if os.geteuid() != 0 and not os.access("/dev/fuse", os.R_OK | os.W_OK):
        cu.skip("/dev/fuse is not usable by this user: fusebox serve can't start sandboxes")
    tmp = tempfile.mkdtemp(prefix="fusebox-conformance-")
    outside = tempfile.mkdtemp(prefix="fusebox-conformance-outside-", dir="/var/tmp")
    servers = []
    try:
        with open(os.path.join(outside, "outside.txt"), "w") as f:
            f.write("original\n")
        captured_ws, captured = capture(codex, fusebox, tmp)
        methods = sorted({m.get("method") for m in captured if isinstance(m, dict)})
        print("captured from Codex %s: %d messages (%s)" % (version, len(captured), ", ".join(map(str, methods))))
        dirs = {k: os.path.join(tmp, k) for k in ("codex", "fusebox")}
        for d in dirs.values():
            os.makedirs(d)
        env = dict(os.environ, XDG_STATE_HOME=os.path.join(tmp, "state"))
        cp, curl = cu.start_server([codex, "exec-server", "--listen", "ws://127.0.0.1:0"], env,
                                   os.path.join(tmp, "codex-exec-server.log"))
        servers.append(cp)
        fp, furl = cu.start_server([fusebox, "serve", "--listen", "ws://127.0.0.1:0", "--policy", "builtin:host",
                                    "--workspace", dirs["fusebox"]], env, os.path.join(tmp, "fusebox-serve.log"))
        servers.append(fp)
        a = asyncio.run(replay(curl, dirs["codex"], outside, captured, captured_ws))
        b = asyncio.run(replay(furl, dirs["fusebox"], outside, captured, captured_ws))
        with open(os.path.join(outside, "outside.txt")) as f:
            if f.read() != "original\n":
                print("FAIL: a refused write changed %s/outside.txt" % outside)
                return 1
        unexpected = expected = 0
        for name in a:
            sa, sb = scrub(a[name], dirs["codex"]), scrub(b.get(name), dirs["fusebox"])
            why = EXPECTED.get(name)
            if why is not None:
                try:
                    holds = why[1](sa, sb)
                except (KeyError, TypeError, IndexError) as e:
                    holds = False
                    print("  (%s: %r)" % (name, e))
                if holds:
                    expected += 1
                    print("EXPECTED %s: %s" % (name, why[0]))
                else:
                    unexpected += 1
                    print("DIFFERS  %s: not the difference docs/api.md explains (%s)\n  codex:   %s\n  fusebox: %s"
                          % (name, why[0], json.dumps(sa)[:700], json.dumps(sb)[:700]))
                continue
            d = compare(name, sa, sb)
            if d is not None:
                unexpected += 1
                print("DIFFERS  %s: %s" % (name, d))
        print("Codex %s: %d answers compared, %d explained differences, %d unexpected" %
              (version, len(a), expected, unexpected))
        return 1 if unexpected else 0
    finally:
        for p in servers:
            cu.stop_server(p)
        shutil.rmtree(tmp, ignore_errors=True)
        shutil.rmtree(outside, ignore_errors=True)


if __name__ == "__main__":
    sys.exit(main())
