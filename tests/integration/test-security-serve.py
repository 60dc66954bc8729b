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
- A session belongs to the client that made it: client A, who knows B's
  session id (the access log and every record carry it), can't resume B's
  session by it, before or after B's connection drops, nor with a wrong
  secret; each refusal ends A's connection, and however many A sends, B
  resumes its own at its first try.  The secret is in no record.
- log/subscribe shows A its own session's records, not B's, unless the
  operator started the server with --subscribe-all; a subscriber that stops
  reading while another client floods the log loses its subscription
  (log/ended), not its connection or its session.
- The server shares fairly: a client (a peer address; A connects from
  127.0.0.1, B from 127.0.0.2) at its share of fs/open handles, connections,
  sessions or running processes gets an error that names the limit and what
  to do, and B is still served: its connection, its session, its reads, its
  handles, its processes.
- Open files too: under RLIMIT_NOFILE 2000, three greedy clients each start
  processes that hold as many files as they can; then another client's
  `cat` and a greedy client's own next `cat` start, load their libraries and
  read.  Each holder got its own EMFILE, logged as fusebox's refusal, none
  less than its floor, no client more than its floors and its part.

Exit status: 0 all passed, 1 a check failed, 77 a prerequisite is missing
(unless FUSEBOX_TESTS_MUST_RUN=1).  A failure prints the command that starts
the same server by hand.
"""
import asyncio
import base64
import contextlib
import glob
import json
import os
import re
import resource
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import urllib.parse

import client_util
import runner_util

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
    .port, .token (None when the URL carries none).  `with Server(...) as
    srv:` stops it when the block ends, even when it fails."""

    last_command = None

    def __init__(self, tmp, *args, listen="ws://127.0.0.1:0", nofile=None, files=None, prepare=None, env=None):
        """NOFILE: the server's RLIMIT_NOFILE, soft and hard.  FILES: {name:
        text} written in the workspace, and PREPARE: called with the
        workspace, before the server starts.  ENV: {name: value} added to
        the server's environment."""
        self.dir = tempfile.mkdtemp(prefix="srv-", dir=tmp)
        self.ws = os.path.join(self.dir, "ws")
        os.mkdir(self.ws)
        for name, text in (files or {}).items():
            with open(os.path.join(self.ws, name), "w") as f:
                f.write(text)
        if prepare is not None:
            prepare(self.ws)
        added = dict(env or {}, XDG_STATE_HOME=os.path.join(self.dir, "state"))
        self.env = dict(os.environ, **added)
        self.argv = [BIN, "serve", "--listen", listen, "--workspace", self.ws] + list(args)
        self.command = "%s %s%s" % (" ".join("%s=%s" % kv for kv in added.items()),
                                    "prlimit --nofile=%d:%d " % (nofile, nofile) if nofile else "",
                                    " ".join(self.argv))
        Server.last_command = self.command

        def limit():
            if nofile:
                resource.setrlimit(resource.RLIMIT_NOFILE, (nofile, nofile))

        self.err_path = os.path.join(self.dir, "stderr")
        with open(self.err_path, "w") as err:
            self.proc = subprocess.Popen(self.argv, stdout=subprocess.PIPE, stderr=err, env=self.env,
                                         preexec_fn=limit)
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

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.stop()

    def stop(self):
        self.proc.send_signal(signal.SIGTERM)
        try:
            status = self.proc.wait(60)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            status = self.proc.wait()
        assert status == 0, "%s exited %s: %s" % (self.command, status, self.stderr())


class Client(client_util.Client):
    @classmethod
    async def connect(cls, url, headers=None, source="127.0.0.1", slow=False):
        """SOURCE: the loopback address to connect from (a client of its
        own).  SLOW: a client that reads only when asked to (small buffers,
        websockets' reader stops after a few unread messages)."""
        u = urllib.parse.urlsplit(url)
        sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        if slow:
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
        sock.bind((source, 0))
        sock.setblocking(False)
        await asyncio.get_running_loop().sock_connect(sock, (u.hostname, u.port))
        # (no compression for a slow one: the flood that fills its queue is
        # of near-identical records, which permessage-deflate shrinks 50-fold)
        return cls(await websockets.connect(url, sock=sock, extra_headers=headers or {}, max_size=None,
                                            max_queue=2 if slow else 32,
                                            compression=None if slow else "deflate"))

    async def handshake(self, resume=None, name="security"):
        params = {"clientName": name}
        if resume is not None:
            params["resumeSessionId"] = resume
        r = await self.call("initialize", params)
        if "result" in r:
            self.session_id = r["result"]["sessionId"]
            self.log_session = self.session_id.split(".")[0]
            await self.ws.send(json.dumps({"method": "initialized", "params": {}}))
        return r

    async def closed_by_server(self):
        """True when the server closes the connection (within a minute)
        without another message."""
        try:
            m = await asyncio.wait_for(self.ws.recv(), 60)
        except websockets.exceptions.ConnectionClosed:
            return True
        except asyncio.TimeoutError:
            return False
        self.inbox.append(json.loads(m))
        return False

    async def take_event(self, pred):
        """The next log/event whose params satisfy PRED (others stay in the
        inbox)."""
        for m in self.inbox:
            if m.get("method") == "log/event" and pred(m["params"]):
                return m["params"]
        while True:
            m = await self.recv()
            self.inbox.append(m)
            if m.get("method") == "log/event" and pred(m["params"]):
                return m["params"]


ok = client_util.ok
err = client_util.err


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
    buf = client_util.recv_until(s, b"\r\n")
    s.close()
    return int(buf.split(b" ", 2)[1]) if buf.startswith(b"HTTP/1.1 ") else 0


# --- only the intended client connects ----------------------------------------------


async def t_token_required(tmp):
    with Server(tmp) as srv:
        assert srv.token is not None, "the URL carries no token: %s" % srv.url
        assert len(srv.token) >= 32 and all(c in "0123456789abcdef" for c in srv.token), srv.token
        wrong = "0" * len(srv.token)
        # Refused before the handshake: no token, a wrong one, the right one
        # in the wrong place, a prefix of it.
        for url, headers in [(srv.bare, {}), (srv.bare + "/?token=" + wrong, {}),
                             (srv.bare, {"Authorization": "Bearer " + wrong}),
                             (srv.bare, {"Authorization": "Basic " + srv.token}),
                             (srv.bare + "/?token=" + srv.token[:-1], {}),
                             (srv.bare + "/?tok=" + srv.token, {}),
                             # The right token with more behind a NUL, or
                             # given twice: never a match.
                             (srv.bare + "/?token=" + srv.token + "%00", {}),
                             (srv.bare + "/?token=" + srv.token + "%00junk", {}),
                             (srv.bare + "/?token=" + wrong + "&token=" + srv.token, {}),
                             (srv.bare + "/?token=" + srv.token + "&token=" + srv.token, {})]:
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
    with Server(tmp) as srv:
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


async def t_insecure_no_auth(tmp):
    with Server(tmp, "--insecure-no-auth") as srv:
        assert srv.token is None and srv.url == srv.bare, srv.url
        assert "WARNING: --insecure-no-auth" in srv.stderr(), srv.stderr()
        c = await Client.connect(srv.url)
        ok(await c.handshake())
        await c.close()
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
    with Server(tmp, "--token-file", token) as srv:
        assert srv.url == srv.bare and "a-token-of-our-own" not in srv.url + srv.stderr(), srv.url
        assert await http_status(srv.url) == 401
        c = await Client.connect(srv.url, {"Authorization": "Bearer a-token-of-our-own"})
        ok(await c.handshake())
        await c.close()


async def t_token_file_hidden(tmp):
    """--token-file in a directory the policy shows: no process of the
    server and no fs/* call reads it.  A process that could would call the
    server (its network the host's, the token in hand) under the server's
    policy, whatever narrower sandbox it was started in."""
    # not under /tmp, which a sandbox has of its own
    tokdir = tempfile.mkdtemp(prefix="fusebox-tokdir-", dir="/var/tmp")
    try:
        await token_file_hidden(tmp, tokdir)
    finally:
        shutil.rmtree(tokdir, ignore_errors=True)


async def token_file_hidden(tmp, tokdir):
    token = os.path.join(tokdir, "token")
    secret = "a-token-the-view-must-not-show"
    with open(token, "w") as f:
        f.write(secret + "\n")
    os.chmod(token, 0o600)
    with open(token) as f:  # there, and readable outside
        assert f.read().strip() == secret
    policy = os.path.join(tokdir, "policy.json")
    with open(policy, "w") as f:
        json.dump({"version": 1, "rules": [{"path": "/", "access": "read", "why": "the host"},
                                           {"path": tokdir, "access": "read", "why": "the token's directory"}]}, f)
    with Server(tmp, "--token-file", token, "--policy", policy) as srv:
        c = await Client.connect(srv.url, {"Authorization": "Bearer " + secret})
        ok(await c.handshake(name="t"))
        listed = ok(await c.call("fs/readDirectory", {"path": tokdir}))
        names = [e["fileName"] for e in listed["entries"]]
        assert "policy.json" in names and "token" not in names, names
        r = await c.call("fs/readFile", {"path": token})
        assert "error" in r, r
        if os.access("/dev/fuse", os.R_OK | os.W_OK):
            ok(await c.call("process/start", start_params(srv, "peek", ["/bin/sh", "-c", "cat %s; ls %s" % (token, tokdir)])))
            out, code = await output_of(c, "peek")
            assert secret not in out and "policy.json" in out and "No such file" in out, (out, code)
        await c.close()


async def t_paths_of_another_user(tmp):
    """A --token-file another user made (they know the token), and a
    --listen unix: socket in a directory of theirs (they could put their
    own listener there, or have the server's end remove a socket of
    someone else's): both refused before anything is served."""
    if os.geteuid() != 0:
        return
    os.chmod(tmp, 0o755)
    env = dict(os.environ, XDG_STATE_HOME=os.path.join(tmp, "state-paths"))
    theirs = tempfile.mkdtemp(prefix="theirs-", dir=tmp)
    os.chmod(theirs, 0o777)
    os.chown(theirs, NOBODY, NOBODY)
    token = os.path.join(theirs, "token")
    with open(token, "w") as f:
        f.write("a-token-they-know\n")
    os.chmod(token, 0o600)
    os.chown(token, NOBODY, NOBODY)
    with open(token) as f:  # there, and readable by the server's user
        assert f.read().strip() == "a-token-they-know"
    r = subprocess.run([BIN, "serve", "--listen", "ws://127.0.0.1:0", "--token-file", token], env=env,
                       capture_output=True, text=True, timeout=60)
    assert r.returncode == 1 and "not out of other users' reach" in r.stderr and r.stdout == "", r
    sock = os.path.join(theirs, "api.sock")
    r = subprocess.run([BIN, "serve", "--listen", "unix:" + sock], env=env, capture_output=True, text=True,
                       timeout=60)
    assert r.returncode == 1 and "not out of other users' reach" in r.stderr, r
    assert not os.path.exists(sock)


async def t_unix_socket(tmp):
    path = os.path.join(tmp, "api.sock")
    with Server(tmp, listen="unix:" + path) as srv:
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


# --- a session belongs to its client ----------------------------------------------


def log_records(srv, client):
    """The server's access-log records (its run directory is the client's
    environmentInfo.runDir)."""
    with open(os.path.join(client.run_dir, "access.jsonl")) as f:
        return [json.loads(line) for line in f if line.strip()]


async def start_client(srv, name, **kw):
    c = await Client.connect(srv.url, **kw)
    r = ok(await c.handshake(name=name))
    c.run_dir = r["environmentInfo"]["runDir"]
    return c


@contextlib.asynccontextmanager
async def served(tmp, name, *args, **kw):
    """A Server(TMP, *ARGS, **KW) and its client NAME for the block: the
    client is closed when the block ends, the server stopped even when it
    fails."""
    with Server(tmp, *args, **kw) as srv:
        c = await start_client(srv, name)
        yield srv, c
        await c.close()


async def t_resume_takeover(tmp):
    with Server(tmp, "--detach-timeout", "60000") as srv:
        b = await start_client(srv, "b")
        secret_file = os.path.join(srv.ws, "b-was-here.txt")
        ok(await b.call("fs/writeFile", {"path": secret_file, "dataBase64": "YgoK"}))
        # What A can know of B: its session id, from the log.
        ids = {r.get("session") for r in log_records(srv, b)}
        assert b.log_session in ids, ids
        secret = b.session_id[len(b.log_session) + 1:]
        a_tries = [b.log_session, b.log_session + ".", b.log_session + "." + "0" * 32,
                   b.log_session + "." + secret[:-1]]
        for attempt in a_tries:
            a = await Client.connect(srv.url)
            r = await a.handshake(attempt, name="a")
            assert "result" not in r, "A took B's session with %r: %s" % (attempt, r)
            assert r["error"]["code"] == -32600, "%r named B's session: %s" % (attempt, r)
            e = r["error"]
            assert b.log_session not in e["message"] and "0" * 32 not in e["message"], e
            # That answer was the connection's last: a second try on it is
            # not even read.
            try:
                await a.ws.send(json.dumps({"id": 9, "method": "initialize",
                                            "params": {"clientName": "a", "resumeSessionId": attempt}}))
            except websockets.exceptions.ConnectionClosed:
                pass
            assert await a.closed_by_server(), "a refused resume left the connection open: %s" % attempt
        # B's connection drops; A tries again, by the id and by the id with
        # a guess: still refused.
        await b.close()
        for attempt in a_tries[:3]:
            a = await Client.connect(srv.url)
            r = await a.handshake(attempt, name="a")
            assert "result" not in r, "B dropped, and A took its session with %r: %s" % (attempt, r)
            err(r, -32600)
            assert await a.closed_by_server()
        assert secret and secret not in json.dumps(log_records(srv, b))
        # B, with what initialize gave it, gets its session back.
        b2 = await Client.connect(srv.url)
        for _ in range(300):
            r = await b2.handshake(b.session_id, name="b")
            if "result" in r or r["error"]["code"] != -32010:
                break
            await asyncio.sleep(0.02)  # the server has not seen B's close yet
        assert ok(r)["sessionId"] == b.session_id, r
        ok(await b2.call("fs/getMetadata", {"path": secret_file}))
        await b2.close()
        # The secret is in no record and no message of the server's.
        text = open(os.path.join(b.run_dir, "access.jsonl")).read() + srv.stderr()
        assert b.session_id.split(".", 1)[1] not in text


async def resume_own(srv, b):
    """B's resume of its own session, on a new connection: granted at its
    first try (-32010 only while the server has not seen B's last
    connection close)."""
    for _ in range(600):
        b2 = await Client.connect(srv.url, source="127.0.0.2")
        r = await b2.handshake(b.session_id, name="b")
        if "result" in r or r["error"]["code"] != -32010:
            break
        await b2.ws.close()
        await asyncio.sleep(0.02)
    assert "result" in r and r["result"]["sessionId"] == b.session_id, "B's right secret refused: %s" % r
    return b2


async def t_resume_guessed(tmp):
    with Server(tmp, "--detach-timeout", "60000") as srv:
        b = await start_client(srv, "b", source="127.0.0.2")
        ok(await b.call("process/start", start_params(srv, "b-sleep", ["/bin/sleep", "600"])))
        await b.close()
        for round in range(4):
            # A guesses B's secret, on a connection each: every guess is
            # refused alike and ends its connection.
            for i in range(48):
                a = await Client.connect(srv.url)
                e = err(await a.handshake(b.log_session + ".%032x" % (round * 48 + i), name="a"), -32600)
                assert e["message"].startswith("no session to resume with that sessionId"), e
                assert await a.closed_by_server()
            # B, with the right secret, gets in whatever A sent before
            # (against a server-wide count of refusals checked first, B was
            # refused "too many refused resumes", and its session expired).
            b2 = await resume_own(srv, b)
            r = ok(await b2.call("process/read", {"processId": "b-sleep"}))
            assert r["exited"] is False, r
            await b2.close()


async def own_event(c, path):
    """Make a record of C's own (a write of PATH) and wait for its
    log/event: every record written before it has been delivered by then."""
    ok(await c.call("fs/writeFile", {"path": path, "dataBase64": "YQo="}))
    return await c.take_event(lambda p: p.get("path") == path)


async def t_log_scope(tmp):
    for all_ in (False, True):
        with Server(tmp, *(["--subscribe-all"] if all_ else [])) as srv:
            a = await start_client(srv, "a")
            b = await start_client(srv, "b")
            s = ok(await a.call("log/subscribe", {}))
            s2 = ok(await a.call("log/subscribe", {"filter": {"session": b.log_session}}))
            b_path = os.path.join(srv.ws, "b-private.txt")
            ok(await b.call("fs/writeFile", {"path": b_path, "dataBase64": "YgoK"}))
            err(await b.call("fs/readFile", {"path": "/etc/no-such-file-b"}), -32004)
            ev = await own_event(a, os.path.join(srv.ws, "a-marker-%d" % all_))
            assert ev["session"] == a.log_session, ev
            seen = [m["params"] for m in a.inbox if m.get("method") == "log/event"]
            theirs = [p for p in seen if p.get("session") != a.log_session]
            if all_:
                assert any(p.get("session") == b.log_session for p in theirs), seen
            else:
                assert theirs == [], "A saw records of other sessions: %s" % theirs
                assert b.log_session not in json.dumps(a.inbox), a.inbox
            assert s.get("scope") == ("all" if all_ else "session"), s
            ok(await a.call("log/unsubscribe", {"subscriptionId": s2["subscriptionId"]}))
            await a.close()
            await b.close()


async def t_slow_subscriber(tmp):
    # B subscribes (every record: the operator's setting, the H1 attack's
    # case) and stops reading; A floods the log.  B loses its subscription,
    # not its connection or its session.
    with Server(tmp, "--subscribe-all") as srv:
        b = await start_client(srv, "b", slow=True)
        ok(await b.call("log/subscribe", {}))
        a = await start_client(srv, "a")
        deep = os.path.join(srv.ws, "f" * 250, "g" * 250, "h" * 250)
        os.makedirs(deep)
        # A write is a record of 1.1 KiB here.  Past B's 8 MiB the server
        # says (stderr) that it ends B's subscription: the kernel's buffers
        # for B take a few MiB first, as many as the host's tcp_wmem allows.
        for i in range(100000):
            await a.ws.send(json.dumps({"id": 100 + i, "method": "fs/writeFile",
                                        "params": {"path": deep + "/x", "dataBase64": "YQo="}}))
            if i % 500 == 499:
                await a.call("fs/getMetadata", {"path": srv.ws})  # A reads its answers
                a.inbox.clear()
                if "ending log subscription" in srv.stderr():
                    break
        assert "ending log subscription" in srv.stderr(), "%d writes, 110 MiB of records" % (i + 1)
        ended = None
        while ended is None:
            m = await b.recv()
            if m.get("method") == "log/ended":
                ended = m["params"]
        assert "subscribe again" in ended["reason"], ended
        ok(await b.call("fs/getMetadata", {"path": srv.ws}))  # still connected
        # ... and still attached: its handle resumes nothing elsewhere.
        c = await Client.connect(srv.url)
        err(await c.handshake(b.session_id, name="c"), -32010)
        await c.close()
        await a.close()
        await b.close()


# --- fair shares ------------------------------------------------------------------


def upgrade_request(srv, source="127.0.0.1", timeout=30):
    """A socket from SOURCE that has sent a WebSocket handshake by hand,
    with the token; TIMEOUT for what it reads next."""
    s = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    s.bind((source, 0))
    s.connect(("127.0.0.1", srv.port))
    s.settimeout(timeout)
    s.sendall(("GET /?token=%s HTTP/1.1\r\nHost: 127.0.0.1\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n"
               "Sec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\nSec-WebSocket-Version: 13\r\n\r\n"
               % srv.token).encode())
    return s


def raw_upgrade(srv, source="127.0.0.1"):
    """A WebSocket handshake by hand, from SOURCE: (status, body)."""
    s = upgrade_request(srv, source)
    buf = client_util.recv_until(s, b"\r\n\r\n")
    head, _, body = buf.partition(b"\r\n\r\n")
    status = int(head.split(b" ", 2)[1]) if head.startswith(b"HTTP/1.1 ") else 0
    if status != 101:
        body += client_util.recv_until(s)
    s.close()
    return status, body.decode(errors="replace")


async def b_is_served(srv, with_process=True):
    """Client B, from another address: a connection, a session, a read, a
    handle and (with a usable /dev/fuse) a process."""
    b = await start_client(srv, "b", source="127.0.0.2")
    path = os.path.join(srv.ws, "b.txt")
    ok(await b.call("fs/writeFile", {"path": path, "dataBase64": "Ygo="}))
    assert ok(await b.call("fs/readFile", {"path": path}))["dataBase64"] == "Ygo="
    ok(await b.call("fs/open", {"handleId": "b1", "path": path}))
    ok(await b.call("fs/readBlock", {"handleId": "b1", "offset": 0, "len": 2}))
    if with_process and os.geteuid() == 0 and os.access("/dev/fuse", os.R_OK | os.W_OK):
        ok(await b.call("process/start", {"processId": "b-echo", "argv": ["/bin/echo", "b"],
                                          "cwd": "file://" + srv.ws, "env": {"PATH": "/usr/bin:/bin"},
                                          "tty": False, "pipeStdin": False, "arg0": None}))
        while True:
            m = await b.recv()
            if m.get("method") == "process/closed":
                break
    await b.close()


async def t_handle_share(tmp):
    with Server(tmp) as srv:
        path = os.path.join(srv.ws, "a.txt")
        with open(path, "w") as f:
            f.write("a\n")
        conns, refusal, n = [], None, 0
        # A opens handles, 256 a connection at most, until its share says no.
        while refusal is None and n < 6000:
            a = await start_client(srv, "a")
            conns.append(a)
            for i in range(257):
                r = await a.call("fs/open", {"handleId": "h%d" % i, "path": path})
                if "error" in r:
                    refusal = r["error"]["message"]
                    break
                n += 1
            if refusal is not None and "on this connection" in refusal:
                assert i == 256, (i, refusal)  # the connection's own bound, 256
                refusal = None
        assert refusal is not None, "A holds %d handles on %d connections, never refused" % (n, len(conns))
        assert "its share of the server's" in refusal and "fs/close" in refusal, refusal
        await b_is_served(srv)
        # A gets its room back as it closes them.
        ok(await conns[0].call("fs/close", {"handleId": "h0"}))
        ok(await conns[-1].call("fs/open", {"handleId": "again", "path": path}))
        for a in conns:
            await a.close()


async def t_connection_share(tmp):
    with Server(tmp) as srv:
        conns, refusal = [], None
        while refusal is None and len(conns) < 2000:
            try:
                conns.append(await Client.connect(srv.url))
            except websockets.exceptions.InvalidStatusCode as e:
                refusal = e.status_code
        assert refusal == 503, "%d connections from A, then %s" % (len(conns), refusal)
        status, body = raw_upgrade(srv)
        assert status == 503 and "its share of the server's" in body and "close some" in body, (status, body)
        await b_is_served(srv, with_process=False)
        # One closed, one more for A.
        await conns.pop().close()
        for _ in range(100):
            status, _ = raw_upgrade(srv)
            if status == 101:
                break
            await asyncio.sleep(0.05)  # until the server has seen the close
        assert status == 101, status
        for c in conns:
            await c.close()


async def t_session_share(tmp):
    with Server(tmp, "--detach-timeout", "600000") as srv:
        refusal, n = None, 0
        # A makes sessions and leaves them detached, until its share says no.
        while refusal is None and n < 2000:
            a = await Client.connect(srv.url)
            r = await a.handshake(name="a")
            if "error" in r:
                refusal = r["error"]["message"]
            else:
                n += 1
            a.ws.transport.abort()  # a reset: no closing handshake to wait for
        assert refusal is not None, "A made %d sessions, never refused" % n
        assert "its share of the server's" in refusal and "resume one" in refusal, refusal
        await b_is_served(srv, with_process=False)


async def t_process_share(tmp):
    if os.geteuid() != 0 or not os.access("/dev/fuse", os.R_OK | os.W_OK):
        return "skip"
    async with served(tmp, "a") as (srv, a):
        refusal, n = None, 0
        while refusal is None and n < 300:
            r = await a.call("process/start", {"processId": "s%d" % n, "argv": ["/bin/sleep", "600"],
                                               "cwd": "file://" + srv.ws, "env": {"PATH": "/usr/bin:/bin"},
                                               "tty": False, "pipeStdin": False, "arg0": None})
            if "error" in r:
                refusal = r["error"]["message"]
            else:
                n += 1
        assert refusal is not None and "its share of the server's" in refusal and "process/terminate" in refusal, \
            (n, refusal)
        await b_is_served(srv)
        # One ended, one more for A.
        ok(await a.call("process/terminate", {"processId": "s0"}))
        for i in range(600):
            r = await a.call("process/start", {"processId": "again", "argv": ["/bin/true"],
                                               "cwd": "file://" + srv.ws, "env": {"PATH": "/usr/bin:/bin"},
                                               "tty": False, "pipeStdin": False, "arg0": None})
            if "result" in r:
                break
            await asyncio.sleep(0.05)  # until s0 is seen to end
        ok(r)


# --- open files: a floor for every process, a part for every client ---------------

HOLD_FILES = 2000
# what fs.h keeps for each running sandbox (FB_VIEW_FD_FLOOR), less the files
# fb-holdopen maps before it opens any (itself, the loader, libc) and a margin
FLOOR_HELD_MIN = 64 - 8


def start_params(srv, pid, argv, pipe_stdin=False):
    return {"processId": pid, "argv": argv, "cwd": "file://" + srv.ws, "env": {"PATH": "/usr/bin:/bin"},
            "tty": False, "pipeStdin": pipe_stdin, "arg0": None}


async def output_of(c, pid, needle=None):
    """PID's stdout and stderr once they hold NEEDLE, or once it closed:
    (text, exit code or None)."""
    out, code = b"", None
    while needle is None or needle not in out:
        m = c.inbox.pop(0) if c.inbox else await c.recv()
        p = m.get("params") or {}
        if p.get("processId") != pid:
            if "method" in m:
                continue
            c.inbox.append(m)  # an answer to a call of another task: not here
            continue
        if m.get("method") == "process/output":
            out += base64.b64decode(p["chunk"])
        elif m.get("method") == "process/exited":
            code = p["exitCode"]
        elif m.get("method") == "process/closed":
            break
    return out.decode(errors="replace"), code


async def hold_until_refused(srv, c, who):
    """C starts fb-holdopen processes, each holding as many files as it
    can, until process/start says C runs its share: [(files, errno)]."""
    held = []
    while len(held) < 64:
        pid = "%s-hold%d" % (who, len(held))
        r = await c.call("process/start", start_params(srv, pid, [os.path.join(srv.ws, "fb-holdopen"),
                                                                  os.path.join(srv.ws, "many"), str(HOLD_FILES)],
                                                       pipe_stdin=True))
        if "error" in r:
            assert "its share of the server's" in r["error"]["message"], r
            break
        out, code = await output_of(c, pid, b"ready\n")
        assert "ready" in out, (pid, out, code)
        ok(await c.call("process/write", {"processId": pid, "chunk": base64.b64encode(b"go\n").decode(),
                                          "writeId": "go"}))
        out, code = await output_of(c, pid, b"opened ")
        words = out[out.index("opened "):].split()
        assert len(words) >= 3, (pid, out)
        held.append((int(words[1]), words[2]))
    return held


async def cat_is_served(srv, c, pid):
    ok(await c.call("process/start", start_params(srv, pid, ["/bin/cat", os.path.join(srv.ws, "hello.txt")])))
    out, code = await output_of(c, pid)
    assert code == 0 and out == "hello\n", "%s: exit %s, output %r" % (pid, code, out)


async def t_descriptor_share(tmp):
    if os.geteuid() != 0 or not os.access("/dev/fuse", os.R_OK | os.W_OK):
        return "skip"
    fixture = os.path.join(os.environ.get("FUSEBOX_BUILD_ROOT", ""), "fixtures", "fb-holdopen")
    if not os.access(fixture, os.X_OK):
        print("fixtures/fb-holdopen is missing: build it with ninja", file=sys.stderr)
        return "skip"

    def prepare(ws):
        # in the workspace, which the default policy shows wherever the build is
        shutil.copy(fixture, os.path.join(ws, "fb-holdopen"))
        os.mkdir(os.path.join(ws, "many"))
        for i in range(HOLD_FILES):
            open(os.path.join(ws, "many", "f%05d" % i), "w").close()

    with Server(tmp, nofile=2000, files={"hello.txt": "hello\n"}, prepare=prepare) as srv:
        greedy = {"a": await start_client(srv, "a")}
        for who, source in (("c", "127.0.0.3"), ("d", "127.0.0.4")):
            greedy[who] = await start_client(srv, who, source=source)
        held = {}
        for who, c in greedy.items():
            held[who] = await hold_until_refused(srv, c, who)
        print("  held: %s" % held)
        # another client, while they hold all that: its command starts,
        # loads its libraries and reads
        b = await start_client(srv, "b", source="127.0.0.2")
        await cat_is_served(srv, b, "b-cat")
        # and A's own next command: one of its holders ends (its share of
        # processes), the others hold on, and A's part is still taken
        a, last = greedy["a"], "a-hold%d" % (len(held["a"]) - 1)
        ok(await a.call("process/terminate", {"processId": last}))
        await output_of(a, last)
        await cat_is_served(srv, a, "a-cat")
        # each holder got its own refusal, never one for everyone, and
        # never less than its floor; a client's processes together their
        # floors and the client's part, however many it starts (the
        # server says what that part is)
        part = re.search(r"and at most (\d+) more for one client", srv.stderr())
        assert part, srv.stderr()
        for who, h in held.items():
            assert len(h) >= 2, held
            assert all(errno == "EMFILE" and files >= FLOOR_HELD_MIN for files, errno in h), held
            assert sum(files for files, _ in h) <= len(h) * 64 + int(part.group(1)), (held, part.group(0))
        # the refusals are fusebox's, with why, for A's session
        refusals = [r for r in log_records(srv, a)
                    if r.get("rule_origin") == "fusebox:too-many-open-files" and r.get("op") == "open"]
        assert refusals, "no refusal of an open in the access log"
        r = refusals[0]
        assert r["decision"] == "deny" and r["error"] == "EMFILE" and r["rule"] == "fusebox" and r["why"], r
        assert any(x.get("session") == a.log_session for x in refusals), refusals[:3]
        for c in list(greedy.values()) + [b]:
            await c.close()


async def t_floors_taken(tmp):
    """A limit lowered under a running server keeps fewer floors: a start
    past them is refused with the limit named, never a sandbox that can't
    load its libraries; one ended, the next starts."""
    if os.geteuid() != 0 or not os.access("/dev/fuse", os.R_OK | os.W_OK):
        return "skip"
    with Server(tmp, nofile=2000, files={"hello.txt": "hello\n"}) as srv:
        a = await start_client(srv, "a")
        b = await start_client(srv, "b", source="127.0.0.2")
        c = await start_client(srv, "c", source="127.0.0.3")
        for x, pid in ((a, "a-sleep"), (b, "b-sleep")):
            ok(await x.call("process/start", start_params(srv, pid, ["/bin/sleep", "600"])))
        # 600: 338 files for sandboxes, half of them room for 2 floors of 64
        resource.prlimit(srv.proc.pid, resource.RLIMIT_NOFILE, (600, 600))
        e = err(await c.call("process/start", start_params(srv, "c-cat", ["/bin/cat", "hello.txt"])), -32603)
        assert "keeps open files for 2 sandboxes" in e["message"] and "RLIMIT_NOFILE 600" in e["message"] \
            and "retry when some processes have ended" in e["message"], e
        ok(await a.call("process/terminate", {"processId": "a-sleep"}))
        await output_of(a, "a-sleep")
        for _ in range(600):
            r = await c.call("process/start", start_params(srv, "c-cat", ["/bin/cat", os.path.join(srv.ws,
                                                                                                   "hello.txt")]))
            if "result" in r:
                break
            await asyncio.sleep(0.05)  # until a-sleep's floor is back
        ok(r)
        out, code = await output_of(c, "c-cat")
        assert code == 0 and out == "hello\n", (code, out)
        ok(await b.call("process/terminate", {"processId": "b-sleep"}))
        for x in (a, b, c):
            await x.close()


async def main(tmp):
    tests = [("token_required", t_token_required), ("token_file_hidden", t_token_file_hidden),
             ("paths_of_another_user", t_paths_of_another_user),
             ("other_user", t_other_user),
             ("insecure_no_auth", t_insecure_no_auth), ("unix_socket", t_unix_socket),
             ("resume_takeover", t_resume_takeover), ("resume_guessed", t_resume_guessed),
             ("log_scope", t_log_scope), ("slow_subscriber", t_slow_subscriber),
             ("handle_share", t_handle_share), ("connection_share", t_connection_share),
             ("session_share", t_session_share), ("process_share", t_process_share),
             ("descriptor_share", t_descriptor_share), ("floors_taken", t_floors_taken)]
    return await runner_util.run_named(tests, lambda name, t: t(tmp),
                                       lambda: "the last server it started: %s" % Server.last_command)


if __name__ == "__main__":
    tmp = tempfile.mkdtemp(prefix="fusebox-security-serve-")
    try:
        passed, failed, skipped = asyncio.run(main(tmp))
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    runner_util.finish(passed, failed, skipped)
