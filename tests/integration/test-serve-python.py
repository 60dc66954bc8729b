#!/usr/bin/env python3
"""A second client for `fusebox serve`: Debian's python3-websockets.

Starts the real server ($FUSEBOX_BIN) and drives it the way a Python agent
harness would: the handshake, every fs method, every error code, the denial
shape (against a file that exists on the host), log/subscribe,
policy/explain, a call's sandbox narrowing every method that reads, refused
lookups with their records, a process with its notifications, 100 clients
at once, clients that vanish at every stage of a connection (the server
must keep no socket of theirs and go idle), clients that close their input
right after their requests (each must be answered), and a server killed
right after an answer (the call's record must be in the log).

Exit status: 0 all passed, 1 a check failed, 77 a prerequisite is missing
(unless FUSEBOX_TESTS_MUST_RUN=1).  A failure prints the command that starts
the same server by hand.
"""
import asyncio
import base64
import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
import urllib.parse

import client_util
import runner_util

try:
    import websockets
except ImportError:
    print("python3-websockets is missing (apt-get install python3-websockets)", file=sys.stderr)
    sys.exit(1 if os.environ.get("FUSEBOX_TESTS_MUST_RUN") == "1" else 77)


def b64(data: bytes) -> str:
    return base64.b64encode(data).decode()


class Client(client_util.Client):
    @classmethod
    async def connect(cls, url):
        return cls(await websockets.connect(url, max_size=None))

    async def handshake(self, resume=None):
        params = {"clientName": "python"}
        if resume:
            params["resumeSessionId"] = resume
        r = await self.call("initialize", params)
        assert "result" in r, r
        self.session_id = r["result"]["sessionId"]  # ID.SECRET: what a resume takes
        self.log_session = self.session_id.split(".")[0]  # ID: the session in the log
        await self.ws.send(json.dumps({"method": "initialized", "params": {}}))
        return r["result"]


ok = client_util.ok
err = client_util.err


class Env:
    def __init__(self):
        self.dir = tempfile.mkdtemp(prefix="fusebox-serve-py-")
        self.ws = os.path.join(self.dir, "ws")
        os.mkdir(self.ws)
        with open(os.path.join(self.ws, "secret.txt"), "w") as f:
            f.write("secret\n")
        policy = {
            "version": 1,
            "network": "none",
            "rules": [
                {"path": "/", "access": "read", "why": "system files"},
                {"path": "/tmp", "access": "write", "source": "private", "why": "a private /tmp"},
                {"path": "${WORKSPACE}", "access": "write", "why": "the workspace"},
                {"path": "${WORKSPACE}/secret.txt", "access": "deny", "why": "not for agents"},
            ],
        }
        self.policy = os.path.join(self.dir, "policy.json")
        with open(self.policy, "w") as f:
            json.dump(policy, f)
        env = dict(os.environ, XDG_STATE_HOME=os.path.join(self.dir, "state"))
        self.argv = [os.environ.get("FUSEBOX_BIN", "fusebox"), "serve", "--listen", "ws://127.0.0.1:0",
                     "--workspace", self.ws, "--policy", self.policy, "--detach-timeout", "1000"]
        self.command = "XDG_STATE_HOME=%s %s" % (env["XDG_STATE_HOME"], " ".join(self.argv))
        self.proc = subprocess.Popen(self.argv, stdout=subprocess.PIPE, env=env)
        self.url = self.proc.stdout.readline().decode().strip()
        assert self.url.startswith("ws://"), "no URL from the server"
        # ws://127.0.0.1:PORT/?token=TOKEN: what a raw client needs of it
        u = urllib.parse.urlsplit(self.url)
        self.port = u.port
        self.query = "?" + u.query if u.query else ""

    def stop(self):
        self.proc.send_signal(signal.SIGTERM)
        status = self.proc.wait(60)
        shutil.rmtree(self.dir, ignore_errors=True)
        return status


async def t_handshake(env):
    c = await Client.connect(env.url)
    err(await c.call("fs/readFile", {"path": "/etc/hostname"}), -32600)
    info = await c.handshake()
    assert info["environmentInfo"]["shell"]["path"].startswith("/"), info
    assert info["environmentInfo"]["cwd"].startswith("file:///"), info
    err(await c.call("initialize", {"clientName": "again"}), -32600)
    await c.close()


async def t_fs(env, c):
    p = os.path.join(env.ws, "py.txt")
    ok(await c.call("fs/writeFile", {"path": "file://" + p, "dataBase64": b64(b"\x00\x01binary\xff")}))
    with open(p, "rb") as f:
        assert f.read() == b"\x00\x01binary\xff"
    r = ok(await c.call("fs/readFile", {"path": p}))
    assert base64.b64decode(r["dataBase64"]) == b"\x00\x01binary\xff"
    m = ok(await c.call("fs/getMetadata", {"path": p}))
    assert m["isFile"] and not m["isDirectory"] and m["size"] == 9, m
    ok(await c.call("fs/createDirectory", {"path": env.ws + "/a/b/c"}))
    assert os.path.isdir(env.ws + "/a/b/c")
    names = {e["fileName"]: e for e in ok(await c.call("fs/readDirectory", {"path": env.ws}))["entries"]}
    assert names["a"]["isDirectory"] and names["py.txt"]["isFile"], names
    assert "secret.txt" in names  # denied, not hidden: the name is visible
    assert ok(await c.call("fs/canonicalize", {"path": env.ws + "/a/b/../../py.txt"}))["path"] == "file://" + p
    w = ok(await c.call("fs/walk", {"path": env.ws, "options": {"maxDepth": 10, "maxDirectories": 10,
                                                                 "maxEntries": 100, "followDirectorySymlinks": True}}))
    kinds = {e["path"]: e["kind"] for e in w["entries"]}
    assert kinds["file://%s/a/b/c" % env.ws] == "directory" and kinds["file://" + p] == "file", kinds
    assert w["truncated"] is False
    ok(await c.call("fs/copy", {"sourcePath": env.ws + "/a", "destinationPath": env.ws + "/a2", "recursive": True}))
    assert os.path.isdir(env.ws + "/a2/b/c")
    ok(await c.call("fs/remove", {"path": env.ws + "/a2"}))
    assert not os.path.exists(env.ws + "/a2")
    h = ok(await c.call("fs/open", {"handleId": "py", "path": p}))
    assert h["handleId"] == "py"
    blk = ok(await c.call("fs/readBlock", {"handleId": "py", "offset": 2, "len": 6}))
    assert base64.b64decode(blk["chunk"]) == b"binary" and blk["eof"] is False, blk
    ok(await c.call("fs/close", {"handleId": "py"}))


async def t_errors(env, c):
    err(await c.call("fs/nope"), -32601)
    err(await c.call("fs/readFile", {"path": ["x"]}), -32602)
    err(await c.call("fs/readFile", {"path": "ftp://host/x"}), -32602)
    err(await c.call("fs/writeFile", {"path": env.ws + "/b64.txt", "dataBase64": "@@@@"}), -32600)
    e = err(await c.call("fs/readFile", {"path": env.ws + "/missing"}), -32004)
    assert e["message"] == "No such file or directory (os error 2)", e
    err(await c.call("fs/remove", {"path": env.ws + "/a", "recursive": False}), -32603)
    await c.ws.send("{not json")
    m = await c.take(lambda m: m.get("id") == -1)
    assert m["error"]["code"] == -32600, m
    await c.ws.send(b'{"id": 77, "method": "fs/getMetadata", "params": {"path": "/"}}')  # binary frame
    assert (await c.take(lambda m: m.get("id") == 77))["result"]["isDirectory"] is True
    await c.ws.send(" " * (16 * 1024 * 1024 + 1))  # past 16 MiB, within the framing's slack
    m = await c.take(lambda m: m.get("id") == -1)
    assert m["error"]["code"] == -32600 and "limit" in m["error"]["message"], m
    ok(await c.call("fs/getMetadata", {"path": env.ws}))  # still usable


def t_utf8_sync(env):
    # The server skips its own UTF-8 check of text frames because libsoup
    # closes the connection on one that is not UTF-8 (1007, RFC 6455 8.1):
    # prove that it still does.  Binary frames are checked by the server.
    s = socket.create_connection(("127.0.0.1", env.port))
    key = base64.b64encode(os.urandom(16)).decode()
    s.sendall(("GET /%s HTTP/1.1\r\nHost: 127.0.0.1\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n"
               "Sec-WebSocket-Key: %s\r\nSec-WebSocket-Version: 13\r\n\r\n" % (env.query, key)).encode())
    s.settimeout(30)
    buf = client_util.recv_until(s, b"\r\n\r\n", "the handshake's answer")
    assert buf.startswith(b"HTTP/1.1 101"), buf

    def frame(opcode, data):
        mask = os.urandom(4)
        return bytes([0x80 | opcode, 0x80 | len(data)]) + mask + bytes(b ^ mask[i % 4] for i, b in enumerate(data))

    def next_frame():
        nonlocal buf
        while len(buf) < 2 or len(buf) < 2 + (buf[1] & 0x7f):
            more = s.recv(4096)
            assert more, "connection closed without a frame"
            buf += more
        n = 2 + (buf[1] & 0x7f)
        f, buf = buf[:n], buf[n:]
        return f[0] & 0x0f, f[2:]

    buf = buf[buf.index(b"\r\n\r\n") + 4:]
    s.sendall(frame(2, b'{"id":5,"method":"caf\xe9"}'))  # binary: the server's own check
    op, payload = next_frame()
    m = json.loads(payload)
    assert op == 1 and m["id"] == -1 and m["error"]["code"] == -32600 and "UTF-8" in m["error"]["message"], m
    s.sendall(frame(1, b'{"id":6,"method":"caf\xe9"}'))  # text: libsoup's
    op, payload = next_frame()
    assert op == 8 and payload[:2] == b"\x03\xef", (op, payload)  # close, 1007
    s.close()


async def t_utf8(env):
    return await asyncio.get_running_loop().run_in_executor(None, t_utf8_sync, env)


def server_sockets(pid, port, state):
    """The server's TCP connections on PORT in STATE (hex, as /proc/net/tcp),
    counted by their inodes among the server's descriptors."""
    inodes = set()
    for fd in os.listdir("/proc/%d/fd" % pid):
        try:
            link = os.readlink("/proc/%d/fd/%s" % (pid, fd))
        except OSError:
            continue
        if link.startswith("socket:["):
            inodes.add(link[8:-1])
    n = 0
    with open("/proc/%d/net/tcp" % pid) as f:
        for line in f.readlines()[1:]:
            fields = line.split()
            if int(fields[1].split(":")[1], 16) == port and fields[3] == state and fields[9] in inodes:
                n += 1
    return n


def cpu_ticks(pid):
    with open("/proc/%d/stat" % pid) as f:
        fields = f.read().rsplit(")", 1)[1].split()
    return int(fields[11]) + int(fields[12])


def t_abrupt_sync(env):
    # Clients that vanish at every stage of a connection: mid-request, with
    # answers in flight, mid-frame, mid-handshake, after a keep-alive HTTP
    # answer with half a second request.  Each way of leaving is tried with
    # a FIN, a half-close and a reset.  Afterwards the server must hold none
    # of their sockets (a socket left in CLOSE-WAIT is a connection it
    # stopped reading), must be idle (a busy loop takes ~100 ticks a
    # second), and must still answer.
    port = env.port
    pid = env.proc.pid
    key = base64.b64encode(os.urandom(16)).decode()
    upgrade = ("GET /%s HTTP/1.1\r\nHost: 127.0.0.1\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n"
               "Sec-WebSocket-Key: %s\r\nSec-WebSocket-Version: 13\r\n\r\n" % (env.query, key)).encode()
    readyz = ("GET /readyz%s HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n" % env.query).encode()

    def frame(data):
        mask = os.urandom(4)
        n = len(data)
        head = bytes([0x81, 0x80 | n]) if n < 126 else bytes([0x81, 0x80 | 126]) + n.to_bytes(2, "big")
        return head + mask + bytes(b ^ mask[i % 4] for i, b in enumerate(data))

    def upgraded():
        s = socket.create_connection(("127.0.0.1", port))
        s.sendall(upgrade)
        s.settimeout(30)
        buf = client_util.recv_until(s, b"\r\n\r\n", "the end of the handshake")
        assert buf.startswith(b"HTTP/1.1 101"), buf
        s.sendall(frame(b'{"id":1,"method":"initialize","params":{"clientName":"abrupt"}}'))
        s.sendall(frame(b'{"method":"initialized","params":{}}'))
        return s

    call = frame(json.dumps({"id": 2, "method": "fs/readFile", "params": {"path": "/etc/os-release"}}).encode())

    def plain(data):
        s = socket.create_connection(("127.0.0.1", port))
        s.sendall(data)
        return s

    ways = {
        "answers in flight": lambda: upgraded_with(call * 200),
        "mid-frame": lambda: upgraded_with(call[:len(call) // 2]),
        "mid-handshake": lambda: plain(upgrade[:40]),
        "keep-alive, half a second request": lambda: plain(readyz + readyz[:30]),
        "junk after the upgrade request": lambda: plain(upgrade + os.urandom(72)),
    }

    def upgraded_with(data):
        s = upgraded()
        s.sendall(data)
        return s

    held = []
    for way in ways.values():
        for leave in ("close", "half-close", "reset"):
            for _ in range(5):
                s = way()
                if leave == "half-close":
                    s.shutdown(socket.SHUT_WR)
                    held.append(s)  # the server must close its side all the same
                    continue
                if leave == "reset":
                    s.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, b"\x01\0\0\0\0\0\0\0")
                s.close()
    deadline = time.monotonic() + 10
    while True:
        waiting = server_sockets(pid, port, "08")  # CLOSE_WAIT
        if waiting == 0 or time.monotonic() > deadline:
            break
        time.sleep(0.1)
    assert waiting == 0, "%d connections left in CLOSE-WAIT after their clients left" % waiting
    for s in held:
        s.settimeout(10)
        try:
            while s.recv(65536):
                pass  # drain until the server's close
        except ConnectionResetError:
            pass
        except socket.timeout:
            raise AssertionError("the server kept a half-closed client's connection open for 10 s")
        s.close()
    time.sleep(0.5)
    t0 = cpu_ticks(pid)
    time.sleep(1)
    busy = cpu_ticks(pid) - t0
    assert busy <= 30, "the server used %d ticks of CPU in a second with no client" % busy
    s = upgraded()  # and it still answers
    s.sendall(call)
    client_util.recv_until(s, b"dataBase64", "an answer after the abrupt clients")
    s.close()


async def t_abrupt(env):
    return await asyncio.get_running_loop().run_in_executor(None, t_abrupt_sync, env)


async def t_denial(env, c):
    secret = os.path.join(env.ws, "secret.txt")
    assert os.path.isfile(secret)  # it exists on the host
    e = err(await c.call("fs/readFile", {"path": secret}), -32050)
    assert e["message"] == "Permission denied (os error 13)", e
    d = e["data"]
    assert d["path"] == secret and d["decision"] == "deny" and d["access"] == "read", d
    assert d["why"] == "not for agents" and d["rule"] != "", d
    x = ok(await c.call("policy/explain", {"path": secret}))
    assert x["access"] == "deny" and x["why"] == "not for agents", x
    e = err(await c.call("fs/writeFile", {"path": "/etc/fusebox-py-test", "dataBase64": b64(b"x")}), -32050)
    assert e["message"] == "Read-only file system (os error 30)", e
    assert e["data"]["decision"] == "readonly", e
    assert not os.path.exists("/etc/fusebox-py-test")
    # A call's sandbox narrows the server's policy: a Codex read-only
    # context makes the (writable) workspace read-only for that call only.
    ro = {"permissions": {"type": "managed", "file_system": {"type": "restricted", "entries": [
        {"path": {"type": "special", "value": {"kind": "root"}}, "access": "read"}]}, "network": "restricted"},
        "cwd": "file://" + env.ws, "windowsSandboxLevel": "disabled"}
    target = os.path.join(env.ws, "narrowed.txt")
    e = err(await c.call("fs/writeFile", {"path": target, "dataBase64": b64(b"x"), "sandbox": ro}), -32050)
    assert e["message"] == "Read-only file system (os error 30)" and e["data"]["decision"] == "readonly", e
    assert not os.path.exists(target)
    ok(await c.call("fs/writeFile", {"path": target, "dataBase64": b64(b"x")}))
    # ... and can't widen it: a sandbox granting /etc write is still refused.
    wide = {"fuseboxPolicy": {"version": 1, "rules": [{"path": "/", "access": "write", "why": "everything"}]}}
    err(await c.call("fs/writeFile", {"path": "/etc/fusebox-py-test", "dataBase64": b64(b"x"), "sandbox": wide}),
        -32050)
    assert not os.path.exists("/etc/fusebox-py-test")
    err(await c.call("fs/readFile", {"path": target, "sandbox": {"permissions": 3}}), -32602)


def codex_context(env):
    """The sandbox Codex 0.171 sends with each command and patch of a
    workspace-write session (fixtures/codex/agent-0.171.json, captured on the
    wire), pointed at this workspace."""
    root = os.environ.get("FUSEBOX_SOURCE_ROOT", os.path.join(os.path.dirname(__file__), "..", ".."))
    with open(os.path.join(root, "fixtures", "codex", "agent-0.171.json")) as f:
        text = f.read()
    return json.loads(text.replace("file:///srv/project", "file://" + env.ws).replace("file:///home/alice",
                                                                                   "file:///root"))


async def t_codex_context(env, c):
    # Members a newer client adds are ignored: policyContext in the sandbox,
    # metadata in process/start's params.  Known members keep their types.
    sandbox = codex_context(env)
    assert "policyContext" in sandbox
    p = os.path.join(env.ws, "patched.txt")
    ok(await c.call("fs/writeFile", {"path": "file://" + p, "dataBase64": b64(b"patched\n"), "sandbox": sandbox}))
    with open(p, "rb") as f:
        assert f.read() == b"patched\n"
    r = ok(await c.call("fs/readFile", {"path": "file://" + p, "sandbox": sandbox}))
    assert base64.b64decode(r["dataBase64"]) == b"patched\n", r
    ok(await c.call("fs/getMetadata", {"path": "file://" + p, "sandbox": sandbox, "someNewMember": [1, 2]}))
    bad = dict(sandbox, cwd=7)
    e = err(await c.call("fs/readFile", {"path": "file://" + p, "sandbox": bad}), -32602)
    assert "sandbox.cwd" in e["message"], e
    e = err(await c.call("fs/readFile", {"path": 7, "sandbox": sandbox}), -32602)
    if os.geteuid() != 0 or not os.access("/dev/fuse", os.R_OK | os.W_OK):
        return "skip"
    r = ok(await c.call("process/start", {"processId": "cx1", "metadata": {"threadId": "t", "toolCallId": "c1"},
                                          "argv": ["/bin/sh", "-c", "cat patched.txt"], "cwd": "file://" + env.ws,
                                          "env": {"PATH": "/usr/bin:/bin"}, "tty": False, "pipeStdin": False,
                                          "arg0": None, "sandbox": sandbox}))
    assert r == {"processId": "cx1", "sandboxType": "linuxSeccomp"}, r
    out = b""
    while True:
        m = await c.take(lambda m: m.get("params", {}).get("processId") == "cx1")
        if m["method"] == "process/output":
            out += base64.b64decode(m["params"]["chunk"])
        elif m["method"] == "process/closed":
            break
    assert out == b"patched\n", out


async def run_to_end(c, cwd, pid, params):
    """Start a process in CWD, collect it; returns (output, exited params,
    the seq of its closed notification)."""
    ok(await c.call("process/start", dict({"processId": pid, "cwd": "file://" + cwd,
                                           "env": {"PATH": "/usr/bin:/bin"}, "tty": False, "pipeStdin": False,
                                           "arg0": None}, **params)))
    out, exited = b"", None
    while True:
        m = await c.take(lambda m: m.get("params", {}).get("processId") == pid)
        if m["method"] == "process/output":
            out += base64.b64decode(m["params"]["chunk"])
        elif m["method"] == "process/exited":
            exited = m["params"]
        elif m["method"] == "process/closed":
            return out, exited, m["params"]["seq"]


async def t_codex_values(env, c):
    # Values Codex's client depends on, as Codex 0.171's exec-server gives
    # them (docs/api.md, "Differences from Codex", says which stay apart).
    d = env.ws + "/a-directory"
    os.makedirs(d, exist_ok=True)
    e = err(await c.call("fs/readFile", {"path": "file://" + d}), -32600)
    assert e["message"] == "path `%s` is not a file" % d, e
    e = err(await c.call("fs/open", {"handleId": "dir", "path": "file://" + d}), -32600)
    assert e["message"] == "path `%s` is not a file" % d, e
    e = err(await c.call("process/read", {"processId": "nobody", "afterSeq": 0}), -32600)
    assert e["message"] == "unknown process id nobody", e
    assert ok(await c.call("process/signal", {"processId": "nobody", "signal": "interrupt"})) == {}
    if os.geteuid() != 0 or not os.access("/dev/fuse", os.R_OK | os.W_OK):
        return "skip"
    # stdin of a process started without tty or pipeStdin is closed.
    ok(await c.call("process/start", {"processId": "nostdin", "argv": ["/bin/sh", "-c", "sleep 30"],
                                      "cwd": "file://" + env.ws, "env": {"PATH": "/usr/bin:/bin"}, "tty": False,
                                      "pipeStdin": False, "arg0": None}))
    w = ok(await c.call("process/write", {"processId": "nostdin", "chunk": b64(b"x"), "writeId": "w1"}))
    assert w == {"status": "stdinClosed"}, w
    assert ok(await c.call("process/terminate", {"processId": "nostdin"}))["running"] is True
    # nextSeq covers the exited and closed notifications, as Codex's.
    out, exited, closed_seq = await run_to_end(c, env.ws, "seq", {"argv": ["/bin/sh", "-c", "echo one"]})
    r = ok(await c.call("process/read", {"processId": "seq", "afterSeq": 0}))
    assert out == b"one\n" and r["nextSeq"] == closed_seq + 1, (out, r, closed_seq)
    # sandboxDenied: a command that failed after the sandbox refused it
    # something, not one that succeeded anyway (Codex's client reports a
    # flagged command as refused whatever its exit code).
    _, exited, _ = await run_to_end(c, env.ws, "denied-fail", {"argv": ["/bin/sh", "-c", "cat secret.txt"]})
    assert exited["exitCode"] != 0 and exited["sandboxDenied"] is True, exited
    _, exited, _ = await run_to_end(c, env.ws, "denied-ok", {"argv": ["/bin/sh", "-c", "cat secret.txt; exit 0"]})
    assert exited["exitCode"] == 0 and exited["sandboxDenied"] is False, exited
    r = ok(await c.call("process/read", {"processId": "denied-ok", "afterSeq": 0}))
    assert r["sandboxDenied"] is False, r
    r = ok(await c.call("process/read", {"processId": "denied-fail", "afterSeq": 0}))
    assert r["sandboxDenied"] is True, r


def t_debug_sync(env):
    # What is ignored is said at debug level.
    e = dict(os.environ, XDG_STATE_HOME=os.path.join(env.dir, "state"), G_MESSAGES_DEBUG="fusebox")
    p = subprocess.Popen([os.environ.get("FUSEBOX_BIN", "fusebox"), "serve", "--listen", "stdio", "--workspace",
                          env.ws, "--policy", env.policy], stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                         stderr=subprocess.PIPE, env=e)
    msgs = [{"id": 1, "method": "initialize", "params": {"clientName": "debug"}}, {"method": "initialized"},
            {"id": 2, "method": "fs/getMetadata", "params": {"path": env.ws, "sandbox": codex_context(env),
                                                            "someNewMember": True}}]
    out, errs = p.communicate("".join(json.dumps(m) + "\n" for m in msgs).encode(), 60)
    answers = [json.loads(line) for line in out.splitlines()]
    assert "result" in answers[-1], answers
    assert b"policyContext" in errs and b"someNewMember" in errs, errs


async def t_debug(env):
    return await asyncio.get_running_loop().run_in_executor(None, t_debug_sync, env)


async def t_session(env, c):
    b = await Client.connect(env.url)
    err(await b.call("initialize", {"clientName": "b", "resumeSessionId": c.session_id}), -32010)
    await b.close()


async def t_log(env, c):
    s = ok(await c.call("log/subscribe", {"filter": {"decision": "deny"}}))
    secret = os.path.join(env.ws, "secret.txt")
    err(await c.call("fs/readFile", {"path": secret}), -32050)
    ev = await c.take(lambda m: m.get("method") == "log/event")
    p = ev["params"]
    assert p["decision"] == "deny" and p["path"] == secret and p["session"] == c.log_session, p
    ok(await c.call("log/unsubscribe", {"subscriptionId": s["subscriptionId"]}))


class OwnServer:
    """A server of its own on ENV's workspace, with POLICY (a dict) and an
    access log at a known path, for the tests that read their records."""

    def __init__(self, env, name, policy):
        self.log = os.path.join(env.dir, name + ".jsonl")
        path = os.path.join(env.dir, name + ".json")
        with open(path, "w") as f:
            json.dump(policy, f)
        e = dict(os.environ, XDG_STATE_HOME=os.path.join(env.dir, "state"))
        self.argv = [os.environ.get("FUSEBOX_BIN", "fusebox"), "serve", "--listen", "ws://127.0.0.1:0",
                     "--workspace", env.ws, "--policy", path, "--log", self.log]
        self.proc = subprocess.Popen(self.argv, stdout=subprocess.PIPE, env=e)
        self.url = self.proc.stdout.readline().decode().strip()
        assert self.url.startswith("ws://"), "no URL from " + " ".join(self.argv)
        self.seen = 0

    def new_records(self):
        """The records written since the last call (the server writes a
        call's records before its answer leaves)."""
        with open(self.log) as f:
            records = [json.loads(line) for line in f if line.strip()]
        fresh, self.seen = records[self.seen:], len(records)
        return fresh

    def stop(self):
        self.proc.send_signal(signal.SIGTERM)
        assert self.proc.wait(60) == 0, "%s did not stop cleanly" % " ".join(self.argv)


def host_file(path, data=b"host data\n"):
    """A stand-in that exists and is readable on the host: a refusal of
    something absent would prove nothing."""
    os.makedirs(os.path.dirname(path), exist_ok=True)
    with open(path, "wb") as f:
        f.write(data)
    with open(path, "rb") as f:
        assert f.read() == data


def expect_refusal(answer, records, session, code, path, decision, why, errno_, op=None):
    """ANSWER is the error CODE (with DATA naming the rule when it is
    -32050), and RECORDS hold the refusal of PATH by the rule WHY (by the
    operation OP, when given)."""
    e = err(answer, code)
    if code == -32050:
        d = e["data"]
        assert d["path"] == path and d["decision"] == decision and d["why"] == why and d["rule"] != "", e
    else:
        assert e["message"] == "No such file or directory (os error 2)", e
    mine = [r for r in records if r.get("path") == path and r.get("session") == session and op in (None, r["op"])]
    assert any(r["decision"] == decision and r["why"] == why and r["errno"] == errno_ and r.get("rule") is not None
               for r in mine), "no %s record by %r with errno %d for %s in %r" % (decision, why, errno_, path, records)


async def t_narrow(env):
    # A call's sandbox narrows the server's policy for every method that
    # reads, not only for writeFile: a deny, a hide and a read-only
    # directory in a fuseboxPolicy sandbox, each refused with its record,
    # while the same call without the sandbox succeeds.
    n = os.path.join(env.ws, "narrow")
    for name in ("deny.txt", "hide.txt", "plain.txt", "ddir/inner.txt", "hdir/inner.txt", "ro/kept.txt"):
        host_file(os.path.join(n, name))
    sandbox = {"fuseboxPolicy": {"version": 1, "rules": [
        {"path": "/", "access": "write", "why": "what the server allows"},
        {"path": n + "/deny.txt", "access": "deny", "why": "narrowed: deny"},
        {"path": n + "/hide.txt", "access": "hide", "why": "narrowed: hide"},
        {"path": n + "/ddir", "access": "deny", "why": "narrowed: deny dir"},
        {"path": n + "/hdir", "access": "hide", "why": "narrowed: hide dir"},
        {"path": n + "/ro", "access": "read", "why": "narrowed: read-only"}]}}
    srv = OwnServer(env, "narrow", {"version": 1, "rules": [
        {"path": "/", "access": "read", "why": "system files"},
        {"path": "${WORKSPACE}", "access": "write", "why": "the workspace"}]})
    c = await Client.connect(srv.url)
    try:
        await c.handshake()
        deny, hide = -32050, -32004
        cases = [
            # method, params, code, refused path, decision, why, errno
            ("fs/readFile", {"path": n + "/deny.txt"}, deny, n + "/deny.txt", "deny", "narrowed: deny", 13),
            ("fs/readFile", {"path": n + "/hide.txt"}, hide, n + "/hide.txt", "hide", "narrowed: hide", 2),
            ("fs/getMetadata", {"path": n + "/ddir/inner.txt"}, deny, n + "/ddir/inner.txt", "deny",
             "narrowed: deny dir", 13),
            ("fs/getMetadata", {"path": n + "/hide.txt"}, hide, n + "/hide.txt", "hide", "narrowed: hide", 2),
            ("fs/readDirectory", {"path": n + "/ddir"}, deny, n + "/ddir", "deny", "narrowed: deny dir", 13),
            ("fs/readDirectory", {"path": n + "/hdir"}, hide, n + "/hdir", "hide", "narrowed: hide dir", 2),
            ("fs/open", {"handleId": "n1", "path": n + "/deny.txt"}, deny, n + "/deny.txt", "deny",
             "narrowed: deny", 13),
            ("fs/open", {"handleId": "n2", "path": n + "/hdir/inner.txt"}, hide, n + "/hdir", "hide",
             "narrowed: hide dir", 2),
            ("fs/copy", {"sourcePath": n + "/deny.txt", "destinationPath": n + "/copied.txt", "recursive": False},
             deny, n + "/deny.txt", "deny", "narrowed: deny", 13),
            ("fs/copy", {"sourcePath": n + "/hide.txt", "destinationPath": n + "/copied.txt", "recursive": False},
             hide, n + "/hide.txt", "hide", "narrowed: hide", 2),
            ("fs/copy", {"sourcePath": n + "/plain.txt", "destinationPath": n + "/ro/copied.txt",
                         "recursive": False}, deny, n + "/ro/copied.txt", "readonly", "narrowed: read-only", 30),
        ]
        methods = set()
        for method, params, code, path, decision, why, errno_ in cases:
            # without the sandbox the server allows it (and the target exists)
            ok(await c.call(method, params))
            if method == "fs/open":
                ok(await c.call("fs/close", {"handleId": params["handleId"]}))
            if method == "fs/copy":
                os.unlink(params["destinationPath"])
            srv.new_records()
            answer = await c.call(method, dict(params, sandbox=sandbox))
            try:
                expect_refusal(answer, srv.new_records(), c.log_session, code, path, decision, why, errno_)
            except AssertionError as e:
                raise AssertionError("%s %s with the sandbox: %s" % (method, params, e)) from None
            if method == "fs/open":  # no handle was made
                e = err(await c.call("fs/readBlock", {"handleId": params["handleId"], "offset": 0, "len": 4}), -32004)
                assert params["handleId"] in e["message"], e
            if method == "fs/copy":
                assert not os.path.exists(params["destinationPath"]), params
            methods.add(method)
        assert methods == {"fs/readFile", "fs/getMetadata", "fs/readDirectory", "fs/open", "fs/copy"}, methods
        with open(n + "/ro/kept.txt", "rb") as f:
            assert f.read() == b"host data\n"
    finally:
        await c.close()
        srv.stop()


async def t_net_explain(env):
    # policy/explain for a host: the server's allowlist decides, and a
    # call's sandbox narrows it as it narrows paths (both sides must allow):
    # it takes hosts away, never adds them; host leaves the allowlist as it is.
    srv = OwnServer(env, "net", {"version": 1, "rules": [{"path": "/", "access": "read", "why": "system files"}],
                                 "network": {"allow": [
                                     {"host": "*.example.com", "why": "the examples"},
                                     {"host": "api.openai.com", "port": 443, "why": "the model's API"}],
                                     "deny": [{"host": "evil.example.com", "why": "known bad"}]}})
    c = await Client.connect(srv.url)
    try:
        await c.handshake()

        def policy(network):
            return {"fuseboxPolicy": {"version": 1, "network": network,
                                      "rules": [{"path": "/", "access": "write", "why": "what the server allows"}]}}
        only_a = policy({"allow": [{"host": "a.example.com", "why": "the call's own list"},
                                   {"host": "other.test", "why": "the call adds a host"}]})
        cases = [
            # params, sandbox, decision, rule, why
            ({"host": "a.example.com"}, None, "allow", "allow[0]", "the examples"),
            ({"host": "API.OpenAI.com.", "port": 443}, None, "allow", "allow[1]", "the model's API"),
            ({"host": "api.openai.com", "port": 80}, None, "deny", "default", "no network entry allows"),
            ({"host": "evil.example.com"}, None, "deny", "deny[0]", "known bad"),
            ({"host": "a.example.com"}, only_a, "allow", "allow[0]", "the examples"),
            ({"host": "b.example.com"}, only_a, "deny", "default", "no network entry allows"),
            ({"host": "other.test"}, only_a, "deny", "default", "no network entry allows"),
            ({"host": "evil.example.com"}, policy({"allow": [{"host": "*", "why": "everything"}]}), "deny",
             "deny[0]", "known bad"),
            ({"host": "b.example.com"}, policy("host"), "allow", "allow[0]", "the examples"),
            ({"host": "other.test"}, policy("host"), "deny", "default", "no network entry allows"),
            ({"host": "a.example.com"}, policy("none"), "deny", "none", "the policy's network is none"),
        ]
        for params, sandbox, decision, rule, why in cases:
            if sandbox is not None:
                params = dict(params, sandbox=sandbox)
            x = ok(await c.call("policy/explain", params))
            assert x["decision"] == decision and x["rule"] == rule and x["why"].startswith(why), (params, x)
            assert x["host"] == params["host"] and x["port"] == params.get("port", 443), x
        x = ok(await c.call("policy/explain", {"host": "a.example.com"}))
        assert x["network"] == "allowlist" and x["ruleText"] == "*.example.com", x
        assert x["ruleOrigin"].startswith(os.path.join(env.dir, "net.json") + ":1:"), x
        err(await c.call("policy/explain", {"host": 3}), -32602)
        err(await c.call("policy/explain", {"host": "a.example.com", "path": "/"}), -32602)
    finally:
        await c.close()
        srv.stop()


async def t_lookup_refused(env):
    # A lookup refused on the way to a path is a refusal like any other: in
    # the log at the default level with its decision and rule, and in the
    # answer as -32050 with the rule.  Under a denied directory, and for a
    # child that is not on the way to the visible path inside a traversable
    # (denied or hidden) directory.
    lk = os.path.join(env.ws, "lookup")
    for name in ("denied/file.txt", "tdeny/pub/ok.txt", "tdeny/other.txt", "thide/pub/ok.txt", "thide/other.txt"):
        host_file(os.path.join(lk, name))
    srv = OwnServer(env, "lookup", {"version": 1, "rules": [
        {"path": "/", "access": "read", "why": "system files"},
        {"path": "${WORKSPACE}", "access": "write", "why": "the workspace"},
        {"path": lk + "/denied", "access": "deny", "why": "a denied directory"},
        {"path": lk + "/tdeny", "access": "deny", "why": "a denied directory with a way through"},
        {"path": lk + "/tdeny/pub", "access": "read", "why": "the way through"},
        {"path": lk + "/thide", "access": "hide", "why": "a hidden directory with a way through"},
        {"path": lk + "/thide/pub", "access": "read", "why": "the other way through"}]})
    c = await Client.connect(srv.url)
    try:
        await c.handshake()
        cases = [
            ("fs/readFile", lk + "/denied/file.txt", -32050, "deny", "a denied directory", 13),
            ("fs/getMetadata", lk + "/denied/file.txt", -32050, "deny", "a denied directory", 13),
            ("fs/readFile", lk + "/tdeny/other.txt", -32050, "deny", "a denied directory with a way through", 13),
            ("fs/readFile", lk + "/thide/other.txt", -32004, "hide", "a hidden directory with a way through", 2),
        ]
        for method, path, code, decision, why, errno_ in cases:
            srv.new_records()
            answer = await c.call(method, {"path": path})
            try:
                expect_refusal(answer, srv.new_records(), c.log_session, code, path, decision, why, errno_,
                               op="lookup")
            except AssertionError as e:
                raise AssertionError("%s %s: %s" % (method, path, e)) from None
        for path in (lk + "/tdeny/pub/ok.txt", lk + "/thide/pub/ok.txt"):  # the ways through are open
            assert base64.b64decode(ok(await c.call("fs/readFile", {"path": path}))["dataBase64"]) == b"host data\n"
    finally:
        await c.close()
        srv.stop()


async def t_process(env, c):
    if os.geteuid() != 0 or not os.access("/dev/fuse", os.R_OK | os.W_OK):
        return "skip"
    r = ok(await c.call("process/start", {"processId": "py1",
                                          "argv": ["/bin/sh", "-c", "echo out; echo err >&2; exit 7"],
                                          "cwd": "file://" + env.ws, "env": {"PATH": "/usr/bin:/bin"},
                                          "tty": False, "pipeStdin": False, "arg0": None}))
    # One of the values Codex's client knows: any other fails the command.
    assert r == {"processId": "py1", "sandboxType": "linuxSeccomp"}, r
    out, errs, exited = b"", b"", None
    while True:
        m = await c.take(lambda m: m.get("params", {}).get("processId") == "py1")
        if m["method"] == "process/output":
            if m["params"]["stream"] == "stderr":
                errs += base64.b64decode(m["params"]["chunk"])
            else:
                out += base64.b64decode(m["params"]["chunk"])
        elif m["method"] == "process/exited":
            exited = m["params"]
        elif m["method"] == "process/closed":
            break
    assert out == b"out\n" and errs == b"err\n", (out, errs)
    assert exited["exitCode"] == 7 and exited["sandboxDenied"] is False, exited
    r = ok(await c.call("process/read", {"processId": "py1", "afterSeq": 0}))
    assert r["exited"] and r["closed"] and r["exitCode"] == 7 and len(r["chunks"]) == 2, r
    assert ok(await c.call("process/terminate", {"processId": "py1"}))["running"] is False


async def t_many(env):
    clients = await asyncio.gather(*[Client.connect(env.url) for _ in range(100)])
    await asyncio.gather(*[c.handshake() for c in clients])
    rs = await asyncio.gather(*[c.call("fs/getMetadata", {"path": env.ws}) for c in clients])
    assert all(ok(r)["isDirectory"] for r in rs)
    await asyncio.gather(*[c.close() for c in clients])


async def t_remote(env):
    bin_ = os.environ.get("FUSEBOX_BIN", "fusebox")
    e = dict(os.environ, XDG_STATE_HOME=os.path.join(env.dir, "state"))
    # A non-loopback address without --allow-remote and a token: refused (usage error).
    for extra in ([], ["--allow-remote"]):
        r = subprocess.run([bin_, "serve", "--listen", "ws://0.0.0.0:0"] + extra, env=e, capture_output=True)
        assert r.returncode == 2 and b"--token-file" in r.stderr, r
    token = os.path.join(env.dir, "token")
    with open(token, "w") as f:
        f.write("t0k3n\n")
    os.chmod(token, 0o600)
    p = subprocess.Popen([bin_, "serve", "--listen", "ws://0.0.0.0:0", "--allow-remote", "--token-file", token],
                         stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, env=e)
    try:
        port = p.stdout.readline().decode().strip().rsplit(":", 1)[1]
        url = "ws://127.0.0.1:" + port
        try:
            await websockets.connect(url)
            raise AssertionError("connected without the token")
        except websockets.exceptions.InvalidStatusCode as ex:
            assert ex.status_code == 401, ex
        try:
            await websockets.connect(url, extra_headers={"Authorization": "Bearer wrong"})
            raise AssertionError("connected with a wrong token")
        except websockets.exceptions.InvalidStatusCode as ex:
            assert ex.status_code == 401, ex
        c = Client(await websockets.connect(url, extra_headers={"Authorization": "Bearer t0k3n"}))
        await c.handshake()
        await c.close()
        # A browser's Origin is refused even with the token.
        try:
            await websockets.connect(url, origin="https://example.com",
                                     extra_headers={"Authorization": "Bearer t0k3n"})
            raise AssertionError("connected with an Origin header")
        except websockets.exceptions.InvalidStatusCode as ex:
            assert ex.status_code == 403, ex
    finally:
        p.terminate()
        p.wait(30)


def t_unix_sync(env):
    import socket
    import stat
    bin_ = os.environ.get("FUSEBOX_BIN", "fusebox")
    e = dict(os.environ, XDG_STATE_HOME=os.path.join(env.dir, "state"))
    path = os.path.join(env.dir, "api.sock")
    p = subprocess.Popen([bin_, "serve", "--listen", "unix:" + path, "--workspace", env.ws],
                         stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, env=e)
    try:
        assert p.stdout.readline().decode().strip() == "unix:" + path
        st = os.stat(path)
        assert stat.S_ISSOCK(st.st_mode) and stat.S_IMODE(st.st_mode) == 0o600, oct(st.st_mode)
        # Another user can't even connect (the mode); the server also checks SO_PEERCRED.
        pid = os.fork()
        if pid == 0:
            try:
                os.setgid(65534)
                os.setuid(65534)
                socket.socket(socket.AF_UNIX).connect(path)
                os._exit(1)
            except PermissionError:
                os._exit(0)
            except BaseException:
                os._exit(2)
        assert os.waitpid(pid, 0)[1] == 0, "another uid could connect"
        s = socket.socket(socket.AF_UNIX)
        s.connect(path)
        f = s.makefile("rwb")

        def call(obj):
            f.write(json.dumps(obj).encode() + b"\n")
            f.flush()
            while True:
                m = json.loads(f.readline())
                if m.get("id") == obj.get("id", -1):
                    return m
        assert "result" in call({"id": 1, "method": "initialize", "params": {"clientName": "unix"}})
        f.write(b'{"method":"initialized"}\n')
        assert call({"id": 2, "method": "fs/getMetadata", "params": {"path": env.ws}})["result"]["isDirectory"]
        # An oversized line: an error on id -1, then the connection still answers.
        f.write(b"x" * (17 * 1024 * 1024) + b"\n")
        f.flush()
        m = json.loads(f.readline())
        assert m["id"] == -1 and m["error"]["code"] == -32600 and "limit" in m["error"]["message"], m
        f.write(b"not json\r\n")
        f.flush()
        assert json.loads(f.readline())["error"]["code"] == -32600
        assert call({"id": 3, "method": "fs/getMetadata", "params": {"path": env.ws}})["result"]["isDirectory"]
        s.close()
    finally:
        p.terminate()
        assert p.wait(30) == 0
    assert not os.path.exists(path), "the socket was left behind"


def t_stdio_sync(env):
    bin_ = os.environ.get("FUSEBOX_BIN", "fusebox")
    e = dict(os.environ, XDG_STATE_HOME=os.path.join(env.dir, "state"))
    msgs = [{"id": 1, "method": "initialize", "params": {"clientName": "stdio"}},
            {"method": "initialized"},
            {"id": 2, "method": "fs/readFile", "params": {"path": os.path.join(env.ws, "secret.txt")}}]
    r = subprocess.run([bin_, "serve", "--listen", "stdio", "--workspace", env.ws],
                       input="".join(json.dumps(m) + "\n" for m in msgs).encode(), capture_output=True, env=e,
                       timeout=60)
    lines = [json.loads(l) for l in r.stdout.decode().splitlines()]
    assert r.returncode == 0, r  # EOF on stdin stops it cleanly
    assert lines[0]["id"] == 1 and "sessionId" in lines[0]["result"], lines
    # builtin:default hides nothing in the workspace: the file is readable
    assert base64.b64decode(lines[1]["result"]["dataBase64"]) == b"secret\n", lines


def t_eof_sync(env):
    # A client may send its requests and close its input at once: every
    # request before the EOF is answered before the connection (and, on
    # stdio, the server) ends; the last line needs no newline.
    bin_ = os.environ.get("FUSEBOX_BIN", "fusebox")
    e = dict(os.environ, XDG_STATE_HOME=os.path.join(env.dir, "state"))
    secret = os.path.join(env.ws, "secret.txt")
    msgs = [{"id": 1, "method": "initialize", "params": {"clientName": "eof"}}, {"method": "initialized"}]
    msgs += [{"id": i, "method": "fs/readFile", "params": {"path": secret}} for i in range(2, 102)]
    text = "\n".join(json.dumps(m) for m in msgs)
    r = subprocess.run([bin_, "serve", "--listen", "stdio", "--workspace", env.ws], input=text.encode(),
                       capture_output=True, env=e, timeout=120)
    assert r.returncode == 0, r
    ids = [json.loads(line)["id"] for line in r.stdout.decode().splitlines()]
    assert ids == list(range(1, 102)), "stdio: answers to %s of ids 1..101 before EOF ended it" % ids
    # A unix client's shutdown(SHUT_WR): the same, and then the server closes.
    path = os.path.join(env.dir, "eof.sock")
    p = subprocess.Popen([bin_, "serve", "--listen", "unix:" + path, "--workspace", env.ws],
                         stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, env=e)
    try:
        assert p.stdout.readline().decode().strip() == "unix:" + path
        s = socket.socket(socket.AF_UNIX)
        s.connect(path)
        s.sendall((text + "\n").encode())
        s.shutdown(socket.SHUT_WR)
        s.settimeout(60)
        buf = client_util.recv_until(s)
        s.close()
        ids = [json.loads(line)["id"] for line in buf.decode().splitlines()]
        assert ids == list(range(1, 102)), "unix: answers to %s of ids 1..101 before the client's EOF" % ids
    finally:
        p.terminate()
        assert p.wait(30) == 0


async def t_eof(env):
    await asyncio.get_running_loop().run_in_executor(None, t_eof_sync, env)


def t_sigkill_sync(env):
    # A call's record is in the log before its answer leaves: kill the
    # server with SIGKILL as soon as the answer to fs/createDirectory
    # arrives, ten times; every directory made has its mkdir record.
    bin_ = os.environ.get("FUSEBOX_BIN", "fusebox")
    e = dict(os.environ, XDG_STATE_HOME=os.path.join(env.dir, "state"))
    log = os.path.join(env.dir, "killed.jsonl")
    for i in range(10):
        d = os.path.join(env.ws, "killed-%d" % i)
        p = subprocess.Popen([bin_, "serve", "--listen", "stdio", "--workspace", env.ws, "--policy", env.policy,
                              "--log", log], stdin=subprocess.PIPE, stdout=subprocess.PIPE, env=e)
        for m in [{"id": 1, "method": "initialize", "params": {"clientName": "killed"}}, {"method": "initialized"},
                  {"id": 2, "method": "fs/createDirectory", "params": {"path": d}}]:
            p.stdin.write((json.dumps(m) + "\n").encode())
        p.stdin.flush()
        for _ in range(2):
            answer = json.loads(p.stdout.readline())
        p.kill()
        p.wait(60)
        assert answer.get("id") == 2 and "result" in answer, answer
        assert os.path.isdir(d), d  # made on the host
        with open(log) as f:
            records = [json.loads(line) for line in f if line.strip()]
        assert any(r["op"] == "mkdir" and r["path"] == d for r in records), \
            "mkdir %s was answered, the server then killed, and its record is missing" % d


async def t_sigkill(env):
    return await asyncio.get_running_loop().run_in_executor(None, t_sigkill_sync, env)


async def t_unix(env):
    await asyncio.get_running_loop().run_in_executor(None, t_unix_sync, env)


async def t_stdio(env):
    await asyncio.get_running_loop().run_in_executor(None, t_stdio_sync, env)


async def main(env):
    c = await Client.connect(env.url)
    await c.handshake()
    tests = [("handshake", lambda: t_handshake(env)), ("fs", lambda: t_fs(env, c)),
             ("errors", lambda: t_errors(env, c)), ("denial", lambda: t_denial(env, c)),
             ("session", lambda: t_session(env, c)), ("log", lambda: t_log(env, c)),
             ("narrow", lambda: t_narrow(env)), ("net-explain", lambda: t_net_explain(env)),
             ("lookup", lambda: t_lookup_refused(env)),
             ("process", lambda: t_process(env, c)), ("codex_context", lambda: t_codex_context(env, c)),
             ("debug", lambda: t_debug(env)), ("codex_values", lambda: t_codex_values(env, c)),
             ("many", lambda: t_many(env)),
             ("remote", lambda: t_remote(env)), ("unix", lambda: t_unix(env)),
             ("stdio", lambda: t_stdio(env)), ("eof", lambda: t_eof(env)), ("utf8", lambda: t_utf8(env)),
             ("abrupt", lambda: t_abrupt(env)), ("sigkill", lambda: t_sigkill(env))]
    counts = await runner_util.run_named(tests, lambda name, t: t(),
                                         lambda: "reproduce the server with: %s" % env.command)
    await c.close()
    return counts


if __name__ == "__main__":
    env = Env()
    try:
        passed, failed, skipped = asyncio.run(main(env))
    finally:
        status = env.stop()
    if status != 0:
        print("fusebox serve did not stop cleanly: %s" % status)
        failed += 1
    runner_util.finish(passed, failed, skipped)
