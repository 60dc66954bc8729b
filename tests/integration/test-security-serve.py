#!/usr/bin/env python3
"""Adversarial tests: what anyone on the machine, or one client of
`fusebox serve`, can do to the server's other clients.

Real servers ($FUSEBOX_BIN), real WebSocket clients (Debian's
python3-websockets), a real second user (uid 65534) where we are root.

- Only the intended client connects: the ws:// listener wants the token the
  server made at start (printed in its URL) or read from --token-file, on
  loopback too; without it, or with a wrong one, 401 before anything else.
  Another user can't learn it (not in the server's command line, its run
  directory or anything it can read) and can't connect.  Serving without a
  token takes --insecure-no-auth, which says so on stderr.

Exit status: 0 all passed, 1 a check failed, 77 a prerequisite is missing
(unless FUSEBOX_TESTS_MUST_RUN=1).  A failure prints the command that starts
the same server by hand.
"""
import asyncio
import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import urllib.parse

MUST_RUN = os.environ.get("FUSEBOX_TESTS_MUST_RUN") == "1"
try:
    import websockets
except ImportError:
    print("python3-websockets is missing (apt-get install python3-websockets)", file=sys.stderr)
    sys.exit(1 if MUST_RUN else 77)

BIN = os.environ.get("FUSEBOX_BIN", "fusebox")
NOBODY = 65534


class Server:
    """`fusebox serve ARGS` with its state under DIR; the first line of its
    stdout is parsed: .url (as printed), .bare (scheme, host and port),
    .port, .token (None when the URL carries none)."""

    last_command = None

    def __init__(self, tmp, *args, listen="ws://127.0.0.1:0"):
        self.dir = tempfile.mkdtemp(prefix="srv-", dir=tmp)
        self.ws = os.path.join(self.dir, "ws")
        os.mkdir(self.ws)
        self.env = dict(os.environ, XDG_STATE_HOME=os.path.join(self.dir, "state"))
        self.argv = [BIN, "serve", "--listen", listen, "--workspace", self.ws] + list(args)
        self.command = "XDG_STATE_HOME=%s %s" % (self.env["XDG_STATE_HOME"], " ".join(self.argv))
        Server.last_command = self.command
        self.err_path = os.path.join(self.dir, "stderr")
        with open(self.err_path, "w") as err:
            self.proc = subprocess.Popen(self.argv, stdout=subprocess.PIPE, stderr=err, env=self.env)
        self.url = self.proc.stdout.readline().decode().strip()
        if not self.url:
            raise AssertionError("no address from %s: %s" % (self.command, self.stderr()))
        u = urllib.parse.urlsplit(self.url)
        self.port = u.port
        self.bare = "%s://%s" % (u.scheme, u.netloc)
        self.token = urllib.parse.parse_qs(u.query).get("token", [None])[0]

    def stderr(self):
        with open(self.err_path) as f:
            return f.read()

    def stop(self):
        self.proc.send_signal(signal.SIGTERM)
        try:
            status = self.proc.wait(60)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            status = self.proc.wait()
        assert status == 0, "%s exited %s: %s" % (self.command, status, self.stderr())


class Client:
    def __init__(self, ws):
        self.ws = ws
        self.next_id = 1
        self.inbox = []
        self.session_id = None

    @classmethod
    async def connect(cls, url, headers=None, source="127.0.0.1"):
        """SOURCE: the loopback address to connect from (a client of its own)."""
        u = urllib.parse.urlsplit(url)
        sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        sock.bind((source, 0))
        sock.setblocking(False)
        await asyncio.get_running_loop().sock_connect(sock, (u.hostname, u.port))
        return cls(await websockets.connect(url, sock=sock, extra_headers=headers or {}, max_size=None))

    async def recv(self):
        return json.loads(await asyncio.wait_for(self.ws.recv(), 60))

    async def call(self, method, params=None):
        rid = self.next_id
        self.next_id += 1
        await self.ws.send(json.dumps({"id": rid, "method": method, "params": params or {}}))
        for i, m in enumerate(self.inbox):
            if m.get("id") == rid and "method" not in m:
                return self.inbox.pop(i)
        while True:
            m = await self.recv()
            if m.get("id") == rid and "method" not in m:
                return m
            self.inbox.append(m)

    async def handshake(self, resume=None, name="security"):
        params = {"clientName": name}
        if resume is not None:
            params["resumeSessionId"] = resume
        r = await self.call("initialize", params)
        if "result" in r:
            self.session_id = r["result"]["sessionId"]
            await self.ws.send(json.dumps({"method": "initialized", "params": {}}))
        return r

    async def close(self):
        await self.ws.close()


def ok(r):
    assert "result" in r, r
    return r["result"]


async def http_status(url, headers=None):
    """The HTTP status of a WebSocket handshake to URL: 101 when it is
    accepted (and then closed)."""
    try:
        ws = await websockets.connect(url, extra_headers=headers or {})
    except websockets.exceptions.InvalidStatusCode as e:
        return e.status_code
    await ws.close()
    return 101


def plain_get(port, target, headers=""):
    """A plain HTTP GET; returns the status line's code."""
    s = socket.create_connection(("127.0.0.1", port))
    s.settimeout(30)
    s.sendall(("GET %s HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n%s\r\n" % (target, headers)).encode())
    buf = b""
    while b"\r\n" not in buf:
        more = s.recv(4096)
        if not more:
            break
        buf += more
    s.close()
    return int(buf.split(b" ", 2)[1]) if buf.startswith(b"HTTP/1.1 ") else 0


# --- only the intended client connects ----------------------------------------------


async def t_token_required(tmp):
    srv = Server(tmp)
    try:
        assert srv.token is not None, "the URL carries no token: %s" % srv.url
        assert len(srv.token) >= 32 and all(c in "0123456789abcdef" for c in srv.token), srv.token
        wrong = "0" * len(srv.token)
        # Refused before the handshake: no token, a wrong one, the right one
        # in the wrong place, a prefix of it.
        for url, headers in [(srv.bare, {}), (srv.bare + "/?token=" + wrong, {}),
                             (srv.bare, {"Authorization": "Bearer " + wrong}),
                             (srv.bare, {"Authorization": "Basic " + srv.token}),
                             (srv.bare + "/?token=" + srv.token[:-1], {}),
                             (srv.bare + "/?tok=" + srv.token, {})]:
            status = await http_status(url, headers)
            assert status == 401, "%s %s: %s, not 401" % (url, headers, status)
        assert plain_get(srv.port, "/readyz") == 401
        assert plain_get(srv.port, "/readyz?token=" + srv.token) == 200
        # Accepted as Codex can send it: the URL as printed (its
        # CODEX_EXEC_SERVER_URL) and a bearer header (environments.toml).
        for url, headers in [(srv.url, {}), (srv.bare, {"Authorization": "Bearer " + srv.token}),
                             (srv.bare + "/some/path?x=1&token=" + srv.token, {})]:
            c = await Client.connect(url, headers)
            ok(await c.handshake())
            ok(await c.call("fs/getMetadata", {"path": srv.ws}))
            await c.close()
        # A browser page that learnt the token is still refused.
        assert await http_status(srv.url, {"Origin": "https://example.com"}) == 403
        # A new start, a new token.
        other = Server(tmp)
        try:
            assert other.token is not None and other.token != srv.token
            assert await http_status(other.bare + "/?token=" + srv.token) == 401
        finally:
            other.stop()
        # The token is in no message of the server's.
        assert srv.token not in srv.stderr(), srv.stderr()
    finally:
        srv.stop()


NOBODY_CLIENT = r'''
import asyncio, json, os, sys, websockets
pid, state, url = int(sys.argv[1]), sys.argv[2], sys.argv[3]
out = {"uid": os.getuid(), "found": []}
# Where another user could look for the token: the server's command line
# and environment, its stdout, every file of its state it can read.
for what in ("cmdline", "environ", "fd/1"):
    try:
        with open("/proc/%d/%s" % (pid, what), "rb") as f:
            data = f.read(1 << 20)
        out[what] = "read"
        out["found"] += [what] if sys.argv[4].encode() in data else []
    except OSError as e:
        out[what] = e.strerror
for root, dirs, files in os.walk(state):
    for name in files:
        try:
            with open(os.path.join(root, name), "rb") as f:
                if sys.argv[4].encode() in f.read():
                    out["found"].append(os.path.join(root, name))
        except OSError:
            pass
async def main():
    try:
        ws = await websockets.connect(url)
        await ws.send(json.dumps({"id": 1, "method": "initialize", "params": {"clientName": "nobody"}}))
        out["answer"] = json.loads(await ws.recv())
        out["status"] = 101
    except websockets.exceptions.InvalidStatusCode as e:
        out["status"] = e.status_code
asyncio.run(main())
print(json.dumps(out))
'''


def as_nobody():
    os.setgroups([])
    os.setgid(NOBODY)
    os.setuid(NOBODY)


async def t_other_user(tmp):
    if os.geteuid() != 0:
        return "skip"  # t_token_required proves the token requirement
    srv = Server(tmp)
    try:
        os.chmod(tmp, 0o755)
        os.chmod(srv.dir, 0o755)
        # It knows the address (ss(8) shows it), not the token.
        r = subprocess.run(["/usr/bin/python3", "-c", NOBODY_CLIENT, str(srv.proc.pid), srv.env["XDG_STATE_HOME"],
                            srv.bare, srv.token or "no token"], preexec_fn=as_nobody, capture_output=True, text=True,
                           timeout=120)
        assert r.returncode == 0, r
        out = json.loads(r.stdout)
        assert out["uid"] == NOBODY, out
        assert out["found"] == [], "uid %d found the token in %s" % (NOBODY, out["found"])
        assert out["status"] == 401, "uid %d got %s, not 401: %s" % (NOBODY, out["status"], out)
    finally:
        srv.stop()


async def t_insecure_no_auth(tmp):
    srv = Server(tmp, "--insecure-no-auth")
    try:
        assert srv.token is None and srv.url == srv.bare, srv.url
        assert "WARNING: --insecure-no-auth" in srv.stderr(), srv.stderr()
        c = await Client.connect(srv.url)
        ok(await c.handshake())
        await c.close()
    finally:
        srv.stop()
    env = dict(os.environ, XDG_STATE_HOME=os.path.join(tmp, "state"))
    token = os.path.join(tmp, "token")
    with open(token, "w") as f:
        f.write("a-token-of-our-own\n")
    os.chmod(token, 0o600)
    for args in (["--insecure-no-auth", "--token-file", token],
                 ["--listen", "ws://0.0.0.0:0", "--insecure-no-auth", "--allow-remote"],
                 ["--listen", "ws://0.0.0.0:0", "--allow-remote"]):
        r = subprocess.run([BIN, "serve"] + args, env=env, capture_output=True, text=True, timeout=60)
        assert r.returncode == 2, (args, r)
    # A token from a file: asked, and not printed.
    srv = Server(tmp, "--token-file", token)
    try:
        assert srv.url == srv.bare and "a-token-of-our-own" not in srv.url + srv.stderr(), srv.url
        assert await http_status(srv.url) == 401
        c = await Client.connect(srv.url, {"Authorization": "Bearer a-token-of-our-own"})
        ok(await c.handshake())
        await c.close()
    finally:
        srv.stop()


async def t_unix_socket(tmp):
    path = os.path.join(tmp, "api.sock")
    srv = Server(tmp, listen="unix:" + path)
    try:
        assert srv.url == "unix:" + path
        assert os.stat(path).st_mode & 0o777 == 0o600, oct(os.stat(path).st_mode)
        if os.geteuid() != 0:
            return
        os.chmod(tmp, 0o755)
        os.chmod(path, 0o666)  # even loosened, the server checks the peer's uid
        pid = os.fork()
        if pid == 0:
            code = 2
            try:
                as_nobody()
                s = socket.socket(socket.AF_UNIX)
                s.connect(path)
                code = 3  # connected: the server must close without an answer
                s.settimeout(30)
                s.sendall(b'{"id":1,"method":"initialize","params":{"clientName":"nobody"}}\n')
                code = 0 if s.recv(4096) == b"" else 1
            except (ConnectionResetError, BrokenPipeError):
                code = 0
            except BaseException:
                pass
            os._exit(code)
        _, status = os.waitpid(pid, 0)
        assert os.WIFEXITED(status) and os.WEXITSTATUS(status) == 0, \
            "uid %d: %s (1: answered, 2: could not connect, 3: no close)" % (NOBODY, status >> 8)
    finally:
        srv.stop()


async def main(tmp):
    tests = [("token_required", t_token_required), ("other_user", t_other_user),
             ("insecure_no_auth", t_insecure_no_auth), ("unix_socket", t_unix_socket)]
    only = sys.argv[1:]
    passed = failed = skipped = 0
    for name, t in tests:
        if only and name not in only:
            continue
        try:
            if await t(tmp) == "skip":
                skipped += 1
                print("SKIP", name)
            else:
                passed += 1
                print("ok", name)
        except Exception as e:  # noqa: BLE001 - report and go on
            failed += 1
            print("FAIL %s: %r\n  the last server it started: %s" % (name, e, Server.last_command))
    return passed, failed, skipped


if __name__ == "__main__":
    tmp = tempfile.mkdtemp(prefix="fusebox-security-serve-")
    try:
        passed, failed, skipped = asyncio.run(main(tmp))
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    print("%d passed, %d failed, %d skipped" % (passed, failed, skipped))
    if skipped and MUST_RUN:
        sys.exit(1)
    sys.exit(1 if failed else 0)
