#!/usr/bin/env python3
"""`fusebox run` with a network allowlist: real clients through the proxy.

The real `fusebox` ($FUSEBOX_BIN) runs real clients (curl, Python's
urllib, raw sockets) in a sandbox whose only network is loopback and the
proxy's port; they reach an HTTP server this test starts on the host's
127.0.0.1 (the proxy runs in the host's network namespace).  Names resolve
only through --resolve: never the machine's resolver, never an outside
network.  The server is first shown to answer on the host, so a refusal
can't pass because nothing was there.

- allowed: curl through CONNECT (-p), through SOCKS5 (--socks5-hostname),
  as a plain proxied request (HTTP_PROXY), and Python's urllib, each get
  the file; the log holds a "connect" and a "disconnect" with the bytes;
  git clones a repository over HTTP.
- refused by name: curl's CONNECT gets 403 with the entry's why, a plain
  request its body, SOCKS5 reply 2 ("not allowed by ruleset"); the log
  holds the refusal with the rule and its why.
- an allowed name that resolves to 127.0.0.1 is refused unless the
  allowlist names loopback.
- no way around the proxy: a raw connect() to the server's port reaches
  the sandbox's own loopback (refused), one to an outside address finds
  no route.
- a request's head with a bare LF or CR, a folded line or a control
  character in a header is refused (400) and never reaches the host.
- robustness: garbage gets 400, a client that stops mid-request is closed
  after the handshake's bound, and the proxy keeps serving.

Exit status: 0 all passed, 1 a check failed, 77 a prerequisite is missing
(unless FUSEBOX_TESTS_MUST_RUN=1).
"""
import base64
import functools
import http.server
import json
import os
import resource
import shutil
import socket
import struct
import subprocess
import sys
import tempfile
import threading
import time
import traceback
import urllib.request

BIN = os.environ.get("FUSEBOX_BIN", "fusebox")
MUST_RUN = os.environ.get("FUSEBOX_TESTS_MUST_RUN") == "1"
PROXY = "127.0.0.1:3128"  # FB_PROXY_PORT, ipc/ipc-proxy.h
CONTENT = "through the proxy %d\n" % os.getpid()


class QuietHandler(http.server.SimpleHTTPRequestHandler):
    def log_message(self, *args):
        pass


class QuietServer(http.server.ThreadingHTTPServer):
    def handle_error(self, request, client_address):
        if not isinstance(sys.exc_info()[1], ConnectionError):  # clients that vanish on purpose
            super().handle_error(request, client_address)


class Host:
    """The host's HTTP server on 127.0.0.1, and a sandbox to run commands in."""

    def __init__(self, tmp):
        self.tmp = tmp
        self.www = os.path.join(tmp, "www")
        os.makedirs(self.www, exist_ok=True)
        with open(os.path.join(self.www, "hello.txt"), "w") as f:
            f.write(CONTENT)
        handler = functools.partial(QuietHandler, directory=self.www)
        self.server = QuietServer(("127.0.0.1", 0), handler)
        self.port = self.server.server_address[1]
        threading.Thread(target=self.server.serve_forever, daemon=True).start()
        self.runs = 0

    def policy(self, allow, deny=()):
        path = os.path.join(self.tmp, "policy-%d.json" % self.runs)
        with open(path, "w") as f:
            json.dump({"version": 1,
                       "rules": [{"path": "/", "access": "read", "why": "system files and tools"},
                                 {"path": "/tmp", "access": "write", "source": "private", "why": "a private /tmp"}],
                       "network": {"allow": list(allow), "deny": list(deny)}}, f)
        return path

    def run(self, policy, script, *resolve):
        """(status, stdout, stderr, the run's records) of SCRIPT in a sandbox."""
        self.runs += 1
        run_dir = os.path.join(self.tmp, "run-%d" % self.runs)
        argv = [BIN, "run", "--policy", policy, "--run-dir", run_dir, "--cwd", "/"]
        for r in resolve:
            argv += ["--resolve", r]
        argv += ["--", "/bin/sh", "-c", script]
        p = subprocess.run(argv, capture_output=True, text=True, timeout=120)
        with open(os.path.join(run_dir, "access.jsonl")) as f:
            records = [json.loads(line) for line in f if line.strip()]
        return p.returncode, p.stdout, p.stderr, [r for r in records if r.get("op") in ("connect", "disconnect")]

    def allowed_policy(self):
        return self.policy(
            [{"host": "allowed.test", "port": self.port, "why": "the test's server"},
             {"cidr": "127.0.0.1", "port": self.port, "why": "the test's server is on the host's loopback"}],
            [{"host": "denied.test", "why": "the test's refused name"}])

    def close(self):
        self.server.shutdown()


def check_records(records, host, n):
    """N connections to HOST, each a connect then a disconnect with bytes."""
    connects = [r for r in records if r["op"] == "connect"]
    ends = [r for r in records if r["op"] == "disconnect"]
    assert len(connects) == n and len(ends) == n, records
    for c in connects:
        assert c["host"] == host and c["decision"] == "allow" and c["errno"] == 0, c
        assert c["address"] == "127.0.0.1" and c["rule"] == "allow[1]" and c["why"], c
    for e in ends:
        assert e["bytes_read"] >= len(CONTENT) and e["bytes_written"] > 0 and e["duration_us"] >= 0, e
    # the same run's records, numbered with the file accesses
    seqs = [r["seq"] for r in records]
    assert seqs == sorted(seqs) and len(set(r["run"] for r in records)) == 1, records


def t_allowed(h):
    # the server answers on the host first
    direct = urllib.request.build_opener(urllib.request.ProxyHandler({}))
    assert direct.open("http://127.0.0.1:%d/hello.txt" % h.port).read().decode() == CONTENT
    pol = h.allowed_policy()
    url = "http://allowed.test:%d/hello.txt" % h.port
    r = "allowed.test:127.0.0.1"
    for client in ("curl -sS -p " + url, "curl -sS --socks5-hostname %s %s" % (PROXY, url), "curl -sS " + url,
                   "python3 -c 'import urllib.request, sys; "
                   "sys.stdout.write(urllib.request.urlopen(\"%s\").read().decode())'" % url):
        code, out, err, records = h.run(pol, client, r)
        assert code == 0 and out == CONTENT, (client, code, out, err)
        check_records(records, "allowed.test", 1)
    # the variables the clients read
    code, out, err, _ = h.run(pol, "env", r)
    env = dict(line.split("=", 1) for line in out.splitlines() if "=" in line)
    for name in ("HTTP_PROXY", "HTTPS_PROXY", "http_proxy", "https_proxy"):
        assert env.get(name) == "http://" + PROXY, (name, out)
    assert env.get("ALL_PROXY") == env.get("all_proxy") == "socks5h://" + PROXY, out
    assert env.get("NO_PROXY") == env.get("no_proxy") == "localhost,127.0.0.1,::1", out


def t_git_clone(h):
    """git clone over HTTP (git's dumb protocol: plain GETs through the
    proxy), bare: the policy keeps every .git from the sandbox."""
    if shutil.which("git") is None:
        print("(git is missing: skipped)")
        return
    src = os.path.join(h.tmp, "src")
    bare = os.path.join(h.www, "repo.git")
    git = ["git", "-c", "user.name=fusebox test", "-c", "user.email=test@fusebox.invalid"]
    subprocess.run(git + ["init", "-q", src], check=True)
    with open(os.path.join(src, "README"), "w") as f:
        f.write(CONTENT)
    subprocess.run(git + ["-C", src, "add", "README"], check=True)
    subprocess.run(git + ["-C", src, "commit", "-q", "-m", "one"], check=True)
    subprocess.run(git + ["clone", "-q", "--bare", src, bare], check=True)
    subprocess.run(git + ["-C", bare, "update-server-info"], check=True)
    code, out, err, records = h.run(h.allowed_policy(), "git clone -q --bare http://allowed.test:%d/repo.git "
                                    "/tmp/c.git && git --git-dir=/tmp/c.git show HEAD:README" % h.port, "allowed.test:127.0.0.1")
    assert code == 0 and out == CONTENT, (code, out, err)
    connects = [r for r in records if r["op"] == "connect"]
    assert connects and all(r["decision"] == "allow" and r["host"] == "allowed.test" for r in connects), records


def t_refused_by_name(h):
    pol = h.allowed_policy()
    url = "http://denied.test:%d/hello.txt" % h.port
    code, out, err, records = h.run(pol, "curl -sS -v -p " + url, "denied.test:127.0.0.1")
    assert code != 0 and "403" in err and "the test's refused name" in err and CONTENT not in out, (code, out, err)
    [rec] = records
    assert rec["op"] == "connect" and rec["decision"] == "deny" and rec["error"] == "EACCES", rec
    assert rec["host"] == "denied.test" and rec["port"] == h.port and rec["rule"] == "deny[0]", rec
    assert rec["why"] == "the test's refused name" and rec["address"] is None, rec
    # fusebox log --denied shows it, and the report files it under its host
    log = os.path.join(h.tmp, "run-%d" % h.runs, "access.jsonl")
    denied = subprocess.run([BIN, "log", "--denied", log], capture_output=True, text=True, timeout=60).stdout
    assert "connect" in denied and "denied.test:%d" % h.port in denied and "the test's refused name" in denied, \
        denied
    report = json.loads(subprocess.run([BIN, "report", "--json", log], capture_output=True, text=True,
                                       timeout=60).stdout)
    assert report["network"] == [{"host": "denied.test", "connections": 0, "failed": 0, "denials": 1,
                                  "bytes_received": 0, "bytes_sent": 0}], report.get("network")
    # a plain request: the body says it
    code, out, err, records = h.run(pol, "curl -sS " + url, "denied.test:127.0.0.1")
    assert "refused by the network policy" in out and "the test's refused name" in out, (code, out, err)
    # SOCKS5: 2, connection not allowed by ruleset; a name on no entry: the default
    code, out, err, records = h.run(pol, "curl -sS --socks5-hostname %s http://other.test:%d/" % (PROXY, h.port))
    assert code == 97 and "(2)" in err, (code, out, err)
    [rec] = records
    assert rec["decision"] == "deny" and rec["rule"] == "default" and rec["host"] == "other.test", rec


def t_loopback_needs_naming(h):
    pol = h.policy([{"host": "allowed.test", "why": "a name whose answer points at the host's loopback"}])
    code, out, err, records = h.run(pol, "curl -sS -v -p http://allowed.test:%d/hello.txt" % h.port,
                                    "allowed.test:127.0.0.1")
    assert code != 0 and "403" in err and CONTENT not in out, (code, out, err)
    [rec] = records
    assert rec["decision"] == "deny" and rec["address"] == "127.0.0.1" and rec["rule"] == "loopback", rec
    # the same through SOCKS5, by address (NO_PROXY would keep curl from the proxy)
    code, out, err, records = h.run(pol, "curl -sS --noproxy \"\" --socks5 %s http://127.0.0.1:%d/hello.txt" %
                                    (PROXY, h.port))
    assert code == 97 and CONTENT not in out, (code, out, err)
    assert [r["decision"] for r in records] == ["deny"], records


RAW = """
import errno, socket, sys
for addr in (("127.0.0.1", %d), ("192.0.2.1", 80)):
    s = socket.socket()
    s.settimeout(20)
    try:
        s.connect(addr)
        print(addr[0], "connected")
    except OSError as e:
        print(addr[0], errno.errorcode.get(e.errno, e.errno))
"""


def t_no_way_around(h):
    pol = h.allowed_policy()
    code, out, err, records = h.run(pol, "python3 -c '%s'" % (RAW % h.port))
    lines = out.splitlines()
    # the sandbox's own loopback, where nothing listens; no route out
    assert lines == ["127.0.0.1 ECONNREFUSED", "192.0.2.1 ENETUNREACH"], (code, out, err)
    assert records == [], records


# the sandbox's side: a connection to the proxy, and all it answers
CLIENT = """
import socket, sys
def conn():
    s = socket.create_connection(("127.0.0.1", 3128))
    s.settimeout(60)
    return s
def answer(s):
    data = b""
    while True:
        b = s.recv(4096)
        if not b:
            return data
        data += b
"""

HANG = CLIENT + """
s = conn()
s.sendall(b"\\x16\\x03\\x01\\x02\\x00garbage\\r\\n\\r\\n")
print("garbage", answer(s).split(b"\\r\\n")[0].decode())
s = conn()
s.sendall(b"CONNECT allowed.test:%d HTTP/1.1\\r\\nHost: allo")
print("hung", answer(s).split(b"\\r\\n")[0].decode())
s = conn()
s.sendall(b"\\x05\\x01")
print("socks-hung", repr(answer(s)))
s = conn()
s.sendall(b"GET http://allowed.test:%d/hello.txt HTTP/1.1\\r\\nHost: allowed.test\\r\\n\\r\\n")
print("after", answer(s).split(b"\\r\\n")[0].decode())
"""


def t_bounded_handshake(h):
    pol = h.allowed_policy()
    code, out, err, records = h.run(pol, "python3 -c '%s'" % (HANG % (h.port, h.port)), "allowed.test:127.0.0.1")
    assert out.splitlines() == ["garbage HTTP/1.1 400 Bad Request", "hung HTTP/1.1 408 Request Timeout",
                                "socks-hung b''", "after HTTP/1.0 200 OK"], (code, out, err)
    # the garbage is a refused connection of its own (below)
    assert [r["op"] for r in records] == ["connect", "connect", "disconnect"], records
    assert records[0]["decision"] == "deny" and records[0]["rule"] == "malformed", records


PROBES = CLIENT + """
def ask(data, greet=False):
    s = conn()
    if greet:
        s.sendall(b"\\x05\\x01\\x00")
        s.recv(2)
    s.sendall(data)
    return answer(s)
print(ask(b"CONNECT allowed%%2etest:443 HTTP/1.1\\r\\n\\r\\n").split(b"\\r\\n")[0].decode())
print(ask(b"\\x05\\x02\\x00\\x01\\x7f\\x00\\x00\\x01\\x00\\x50", True)[1])
print(ask(b"\\x05\\x01\\x00\\x09\\x7f\\x00\\x00\\x01\\x00\\x50", True)[1])
print(ask(b"\\x05\\x01\\x00\\x03\\x0callowed.test\\x00\\x00", True)[1])
print(ask(b"\\x05\\x01\\x00\\x03\\x0callowed\\x00test\\x00\\x50", True)[1])
print(ask(b"GET http://allowed.test:%d/ HTTP/1.1\\r\\nHost: forbidden.internal\\r\\n\\r\\n").split(b"\\r\\n")[0].decode())
"""


def t_parser_refusals(h):
    """What the proxy refuses before any decision (a malformed authority,
    SOCKS5 BIND, an unknown address type, port 0, a NUL in a name, a Host
    header naming another host) is answered and logged as a refused
    connection, rule "malformed", by fusebox, with the reason."""
    pol = h.allowed_policy()
    code, out, err, records = h.run(pol, "python3 -c '%s'" % (PROBES % h.port), "allowed.test:127.0.0.1")
    assert out.splitlines() == ["HTTP/1.1 400 Bad Request", "7", "8", "1", "1", "HTTP/1.1 400 Bad Request"], \
        (code, out, err)
    assert len(records) == 6, records
    for r in records:
        assert r["op"] == "connect" and r["decision"] == "deny" and r["rule"] == "malformed", r
        assert r["rule_origin"].startswith("fusebox: ") and r["why"] in r["rule_origin"], r
    assert "CONNECT" in records[1]["why"] and "address type" in records[2]["why"], records
    assert records[3]["host"] == "allowed.test" and records[3]["port"] == 0, records[3]
    assert "Host header" in records[5]["why"], records[5]


CAP = CLIENT + """
idle = [socket.create_connection(("127.0.0.1", 3128)) for _ in range(256)]
s = conn()
s.sendall(b"GET http://allowed.test:%d/hello.txt HTTP/1.1\\r\\nHost: allowed.test\\r\\n\\r\\n")
s.settimeout(2)
try:
    early = s.recv(100)
except socket.timeout:
    early = None
print("while full", early)
s.settimeout(60)
data = answer(s)
for i in idle:
    i.setblocking(False)
closed = 0
for i in idle:
    try:
        closed += i.recv(1) == b""
    except BlockingIOError:
        pass
print("then", data.split(b"\\r\\n")[0].decode(), closed > 0)
"""


def t_connection_cap(h):
    pol = h.allowed_policy()
    code, out, err, records = h.run(pol, "python3 -c '%s'" % (CAP % h.port), "allowed.test:127.0.0.1")
    # the 257th waits until an idle one is closed (the handshake's bound),
    # then is served
    assert out.splitlines() == ["while full None", "then HTTP/1.0 200 OK True"], (code, out, err)
    assert [r["op"] for r in records] == ["connect", "disconnect"], records


def read_until_end(c):
    """What socket C sent until its end, or until its timeout."""
    data = b""
    try:
        while True:
            b = c.recv(4096)
            if not b:
                break
            data += b
    except socket.timeout:
        pass
    return data


class Recorder:
    """A host server on 127.0.0.1 that keeps every byte a connection sent
    (until its end, or 3 s of silence), then answers 200."""

    def __init__(self):
        self.sock = socket.socket()
        self.sock.bind(("127.0.0.1", 0))
        self.sock.listen(8)
        self.port = self.sock.getsockname()[1]
        self.got = []
        threading.Thread(target=self.serve, daemon=True).start()

    def serve(self):
        while True:
            try:
                c, _ = self.sock.accept()
            except OSError:
                return
            c.settimeout(3)
            self.got.append(read_until_end(c))
            c.sendall(b"HTTP/1.0 200 OK\r\nContent-Length: 3\r\n\r\nok\n")
            c.close()


PIPELINED = CLIENT + """
import time
HEAD = b"POST http://allowed.test:%d/one HTTP/1.1\\r\\nHost: allowed.test:%d\\r\\nContent-Length: 4\\r\\n\\r\\n"
SECOND = b"GET /second HTTP/1.1\\r\\nHost: forbidden.internal\\r\\n\\r\\n"
s = conn()
s.sendall(HEAD + b"body" + SECOND)  # read along with the request
print(answer(s).split(b"\\r\\n")[0].decode())
s = conn()
s.sendall(HEAD + b"bo")  # the end of the body and what follows come later: spliced, then dropped
time.sleep(0.5)
s.sendall(b"dy" + SECOND)
print(answer(s).split(b"\\r\\n")[0].decode())
"""


def t_one_request(h):
    """A plain request reaches the host as the one request decided: a Host
    header naming another host is refused (400), and what a client
    pipelines after the request's body is dropped."""
    rec = Recorder()
    pol = h.policy([{"host": "allowed.test", "why": "the test's servers"},
                    {"cidr": "127.0.0.1", "why": "the test's servers are on the host's loopback"}])
    code, out, err, records = h.run(
        pol, "curl -s -o /dev/null -w '%%{http_code}\\n' -H 'Host: forbidden.internal' http://allowed.test:%d/hello.txt;"
        " python3 -c '%s'" % (h.port, PIPELINED % (rec.port, rec.port)), "allowed.test:127.0.0.1")
    assert out.splitlines() == ["400", "HTTP/1.0 200 OK", "HTTP/1.0 200 OK"], (code, out, err)
    assert len(rec.got) == 2, rec.got
    for got in rec.got:
        assert got.startswith(b"POST /one HTTP/1.1\r\n"), rec.got
        assert got.endswith(b"\r\n\r\nbody") and b"second" not in got, rec.got
    rec.sock.close()


SMUGGLED = CLIENT + """
P = %d
def first(data):
    s = conn()
    s.sendall(data)
    return answer(s).split(b"\\r\\n")[0].decode()
GET = b"GET http://allowed.test:%%d/ HTTP/1.1\\r\\n" %% P
HOST = b"Host: allowed.test:%%d\\r\\n" %% P
print(first(GET + HOST + b"X-A: 1\\r\\n\\r\\n"))
print(first(GET + b"X-A: 1\\nHost: forbidden.internal\\r\\n" + HOST + b"\\r\\n"))
print(first(GET + b"X-A: 1\\rHost: forbidden.internal\\r\\n" + HOST + b"\\r\\n"))
print(first(GET + HOST + b"X-A: 1\\nTransfer-Encoding: chunked\\r\\nContent-Length: 5\\r\\n\\r\\n0\\r\\n\\r\\n"))
print(first(GET + HOST + b"X-A: 1\\r\\n Host: forbidden.internal\\r\\n\\r\\n"))
print(first(GET + HOST + b"X-A: 1\\x0bHost: forbidden.internal\\r\\n\\r\\n"))
"""


def t_bare_lf(h):
    """Only CRLF ends a line of a request's head: a bare LF or CR, a folded
    line or a control character in a header's value would let a host that
    reads lines otherwise (Python's http.server, nginx) see a header the
    proxy never decided (a foreign Host, a Transfer-Encoding); each is
    refused (400), logged as malformed with the reason, and never reaches
    the host, which the well-formed request first shows is there."""
    rec = Recorder()
    pol = h.policy([{"host": "allowed.test", "port": rec.port, "why": "the test's server"},
                    {"cidr": "127.0.0.1", "port": rec.port, "why": "the test's server is on the host's loopback"}])
    code, out, err, records = h.run(pol, "python3 -c '%s'" % (SMUGGLED % rec.port), "allowed.test:127.0.0.1")
    assert out.splitlines() == ["HTTP/1.0 200 OK"] + ["HTTP/1.1 400 Bad Request"] * 5, (code, out, err)
    assert len(rec.got) == 1 and rec.got[0].startswith(b"GET / HTTP/1.1\r\n"), rec.got
    assert b"forbidden" not in rec.got[0], rec.got
    refused = [r for r in records if r["decision"] == "deny"]
    assert len(refused) == 5, records
    for r in refused:
        assert r["op"] == "connect" and r["rule"] == "malformed", r
    assert [r["why"] for r in refused[:3]] == [
        "an LF not preceded by CR in the request's head (only CRLF ends a line)",
        "a CR not followed by LF in the request's head (only CRLF ends a line)",
        "an LF not preceded by CR in the request's head (only CRLF ends a line)"], refused
    assert "obs-fold" in refused[3]["why"] and "control character" in refused[4]["why"], refused
    rec.sock.close()


class Dns:
    """A DNS server on port 53 of a loopback address of its own (another run
    of this test may hold another) that answers 127.0.0.1 for names under
    corp.test and "no such name" for the others, and keeps the names asked."""

    def __init__(self):
        self.sock = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
        for i in range(64):
            self.address = "127.88.%d.%d" % (os.getpid() % 250 + 1, (os.getpid() // 250 + i) % 250 + 1)
            try:
                self.sock.bind((self.address, 53))
                break
            except OSError:
                if i == 63:
                    raise
        self.asked = []
        threading.Thread(target=self.serve, daemon=True).start()

    def serve(self):
        while True:
            try:
                d, a = self.sock.recvfrom(512)
            except OSError:
                return
            qid, = struct.unpack(">H", d[:2])
            i, labels = 12, []
            while d[i]:
                labels.append(d[i + 1:i + 1 + d[i]].decode())
                i += 1 + d[i]
            name, qtype, q = ".".join(labels), struct.unpack(">H", d[i + 1:i + 3])[0], d[12:i + 5]
            self.asked.append(name)
            if name.endswith("corp.test") and qtype == 1:
                r = struct.pack(">HHHHHH", qid, 0x8180, 1, 1, 0, 0) + q + b"\xc0\x0c" + \
                    struct.pack(">HHIH", 1, 1, 60, 4) + socket.inet_aton("127.0.0.1")
            elif name.endswith("corp.test"):
                r = struct.pack(">HHHHHH", qid, 0x8180, 1, 0, 0, 0) + q
            else:
                r = struct.pack(">HHHHHH", qid, 0x8183, 1, 0, 0, 0) + q
            self.sock.sendto(r, a)


def t_absolute_name(h):
    """The proxy resolves the name it decided on, absolute: the host's
    resolv.conf search list never turns foo.example.test into
    foo.example.test.corp.test (here a server on the host's loopback)."""
    if shutil.which("unshare") is None:
        raise Skip("needs unshare")
    dns = Dns()
    resolv = os.path.join(h.tmp, "resolv.conf")
    with open(resolv, "w") as f:
        f.write("nameserver %s\nsearch corp.test\noptions ndots:5 attempts:1 timeout:1\n" % dns.address)
    pol = h.policy([{"host": "foo.example.test", "port": h.port, "why": "the name the test asks for"},
                    {"cidr": "127.0.0.1", "port": h.port, "why": "the test's server is on the host's loopback"}])
    run_dir = os.path.join(h.tmp, "run-dns")
    inner = "mount --bind %s /etc/resolv.conf && exec %s run --policy %s --run-dir %s --cwd / -- " \
            "curl -s -w '%%{http_code}\\n' http://foo.example.test.:%d/hello.txt" % (resolv, BIN, pol, run_dir, h.port)
    p = subprocess.run(["unshare", "-m", "sh", "-c", inner], capture_output=True, text=True, timeout=120)
    dns.sock.close()
    assert not any(n.endswith("corp.test") for n in dns.asked), (dns.asked, p.stdout, p.stderr)
    assert "foo.example.test" in dns.asked and CONTENT not in p.stdout, (dns.asked, p.stdout, p.stderr)
    assert p.stdout.splitlines()[-1] == "502", (p.stdout, p.stderr)


class Skip(Exception):
    pass


def t_session(h):
    """run --session: the session's daemon runs each command's proxy, its
    records in the command's own log, resolving names as that command's
    --resolve says."""
    pol = h.allowed_policy()
    env = dict(os.environ, XDG_STATE_HOME=os.path.join(h.tmp, "state"))
    env.pop("FUSEBOX_TESTS_MUST_RUN", None)
    by_address = "http://127.0.0.1:%d/hello.txt" % h.port
    by_name = "http://allowed.test:%d/hello.txt" % h.port
    # the command that starts the session, then two that join it
    commands = [["curl", "-sS", "--noproxy", "", "-p", by_address + "?0"], ["curl", "-sS", "-p", by_name + "?1"],
                ["curl", "-sS", "-p", by_name + "?2"]]
    try:
        for i, argv in enumerate(commands):
            resolve = ["--resolve", "allowed.test:127.0.0.1"] if i > 0 else []
            p = subprocess.run([BIN, "run", "--session", "net", "--policy", pol, "--cwd", "/"] + resolve + ["--"] +
                               argv, capture_output=True, text=True, env=env, timeout=120)
            assert p.returncode == 0 and p.stdout == CONTENT, (i, p.returncode, p.stdout, p.stderr)
    finally:
        subprocess.run([BIN, "session", "stop", "net"], env=env, capture_output=True, timeout=60)
    runs = os.path.join(h.tmp, "state", "fusebox", "runs")
    logs = {}
    for rid in os.listdir(runs):
        path = os.path.join(runs, rid, "access.jsonl")
        if os.path.exists(path):
            with open(path) as f:
                recs = [json.loads(line) for line in f if line.strip()]
            net = [r for r in recs if r.get("op") in ("connect", "disconnect")]
            if net:
                logs[net[0]["host"]] = logs.get(net[0]["host"], []) + [[r["op"] for r in net]]
    assert logs == {"127.0.0.1": [["connect", "disconnect"]],
                    "allowed.test": [["connect", "disconnect"]] * 2}, logs


def t_serve(h):
    """serve's process/start: the same proxy, its records the process's."""
    pol = h.policy([{"cidr": "127.0.0.1", "port": h.port, "why": "the test's server, by address"}])
    log = os.path.join(h.tmp, "serve.jsonl")
    env = dict(os.environ, XDG_STATE_HOME=os.path.join(h.tmp, "state"))
    env.pop("FUSEBOX_TESTS_MUST_RUN", None)
    p = subprocess.Popen([BIN, "serve", "--listen", "stdio", "--policy", pol, "--workspace", h.tmp, "--log", log],
                         stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=env, text=True)
    url = "http://127.0.0.1:%d/hello.txt" % h.port
    msgs = [{"id": 1, "method": "initialize", "params": {"clientName": "network"}}, {"method": "initialized"},
            {"id": 2, "method": "process/start",
             "params": {"processId": "n1", "argv": ["curl", "-sS", "--noproxy", "", "-p", url], "cwd": "file:///",
                        "env": {"PATH": "/usr/bin:/bin"}, "tty": False, "pipeStdin": False, "arg0": None}}]
    try:
        for m in msgs:
            p.stdin.write(json.dumps(m) + "\n")
        p.stdin.flush()
        out = b""
        for line in p.stdout:
            m = json.loads(line)
            if m.get("method") == "process/output":
                out += base64.b64decode(m["params"]["chunk"])
            if "error" in m or m.get("method") == "process/closed":
                break
        assert out.decode() == CONTENT, (out, m)
    finally:
        p.stdin.close()
        p.wait(timeout=60)
    with open(log) as f:
        records = [json.loads(line) for line in f if line.strip()]
    net = [r for r in records if r.get("op") in ("connect", "disconnect")]
    assert [r["op"] for r in net] == ["connect", "disconnect"], net
    assert all(r["process"] == "n1" and r["rule"] == "allow[0]" for r in net), net
    assert net[1]["bytes_read"] >= len(CONTENT), net


HOLD = """
import socket, sys, time
print("ready", flush=True)
time.sleep(2)
held = [socket.create_connection(("127.0.0.1", 3128)) for _ in range(64)]
print("held", flush=True)
time.sleep(60)
"""


def sockets(pid):
    n = 0
    for fd in os.listdir("/proc/%d/fd" % pid):
        try:
            n += os.readlink("/proc/%d/fd/%s" % (pid, fd)).startswith("socket:")
        except OSError:
            pass
    return n


def t_serve_tunnel_share(h):
    """serve counts a process's proxy connections against the descriptors
    it keeps for processes: under a 1,024 limit a process holding 64 idle
    connections costs the server a few descriptors, not 64 (two clients'
    processes took every descriptor of a 2,048 limit that way)."""
    pol = h.policy([{"cidr": "127.0.0.1", "port": h.port, "why": "the test's server, by address"}])
    env = dict(os.environ, XDG_STATE_HOME=os.path.join(h.tmp, "state"))
    env.pop("FUSEBOX_TESTS_MUST_RUN", None)
    p = subprocess.Popen(["sh", "-c", 'ulimit -n 1024 && exec "$0" "$@"', BIN, "serve", "--listen", "stdio",
                          "--policy", pol, "--workspace", h.tmp, "--log", os.path.join(h.tmp, "serve.jsonl")],
                         stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=env, text=True)
    msgs = [{"id": 1, "method": "initialize", "params": {"clientName": "network"}}, {"method": "initialized"},
            {"id": 2, "method": "process/start",
             "params": {"processId": "n1", "argv": ["python3", "-c", HOLD], "cwd": "file:///",
                        "env": {"PATH": "/usr/bin:/bin"}, "tty": False, "pipeStdin": False, "arg0": None}}]
    try:
        for m in msgs:
            p.stdin.write(json.dumps(m) + "\n")
        p.stdin.flush()
        out, base, most = b"", None, 0
        for line in p.stdout:
            m = json.loads(line)
            if m.get("method") == "process/output":
                out += base64.b64decode(m["params"]["chunk"])
            if base is None and b"ready" in out:
                base = sockets(p.pid)
            if b"held" in out:
                break
            assert "error" not in m and m.get("method") != "process/closed", (out, m)
        # the proxy accepts what it takes within moments: look for a while
        for _ in range(30):
            most = max(most, sockets(p.pid) - base)
            if most >= 64:
                break
            threading.Event().wait(0.1)
        assert 0 < most < 32, (base, most)
    finally:
        p.stdin.close()
        p.wait(timeout=60)


VANISH = CLIENT + """
import struct, time
def vanish(s):  # a reset, not a close: nothing more is read or sent
    s.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
    s.close()
print("ready", flush=True)
time.sleep(1)
for _ in range(40):  # mid-download
    s = conn()
    s.sendall(b"CONNECT allowed.test:%d HTTP/1.1\\r\\nHost: allowed.test\\r\\n\\r\\n")
    head = b""
    while not head.endswith(b"\\r\\n\\r\\n"):
        head += s.recv(1)
    s.sendall(b"GET /big.bin HTTP/1.1\\r\\nHost: allowed.test\\r\\n\\r\\n")
    got = 0
    while got < 65536:
        got += len(s.recv(65536))
    vanish(s)
for _ in range(20):  # mid-handshake
    s = conn()
    s.sendall(b"CONNECT allowed.te")
    vanish(s)
print("vanished", flush=True)
sys.stdin.read()  # until the test has looked
"""


def t_vanishing_clients(h):
    """Clients that vanish (a reset mid-download, or mid-handshake) cost
    the proxy nothing once gone: each tunnel's disconnect is logged with
    its bytes, the supervisor's sockets return to what they were, and the
    next client is served."""
    with open(os.path.join(h.www, "big.bin"), "wb") as f:
        f.write(os.urandom(1 << 20) * 16)
    pol = h.allowed_policy()
    run_dir = os.path.join(h.tmp, "run-vanish")
    script = "python3 -c '%s' && curl -sS -p http://allowed.test:%d/hello.txt" % (VANISH % h.port, h.port)
    p = subprocess.Popen([BIN, "run", "--policy", pol, "--run-dir", run_dir, "--cwd", "/", "--resolve",
                          "allowed.test:127.0.0.1", "--", "/bin/sh", "-c", script],
                         stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    try:
        assert p.stdout.readline() == b"ready\n"
        base = sockets(p.pid)
        assert p.stdout.readline() == b"vanished\n"
        now = sockets(p.pid)
        for _ in range(100):  # the resets reach the proxy within moments
            if now <= base:
                break
            threading.Event().wait(0.1)
            now = sockets(p.pid)
        assert now <= base, (base, now)
        out, err = p.communicate(timeout=60)  # closes the command's stdin
    finally:
        if p.poll() is None:
            p.kill()
            p.wait()
    assert p.returncode == 0 and out.decode() == CONTENT, (p.returncode, out, err[-2000:])
    with open(os.path.join(run_dir, "access.jsonl")) as f:
        records = [json.loads(line) for line in f if line.strip()]
    tunnels = [r for r in records if r.get("op") in ("connect", "disconnect") and r.get("host") == "allowed.test"]
    connects = [r for r in tunnels if r["op"] == "connect"]
    ends = [r for r in tunnels if r["op"] == "disconnect"]
    assert len(connects) == 41 and len(ends) == 41, [r["op"] for r in tunnels]
    # 40 tunnels cut mid-download, then curl's
    assert len([e for e in ends if e["bytes_read"] >= 65536]) == 40, ends


IDLE = CLIENT + """
import time
s = conn()
s.sendall(b"CONNECT allowed.test:%d HTTP/1.1\\r\\n\\r\\n")
head = b""
while not head.endswith(b"\\r\\n\\r\\n"):
    head += s.recv(1)
print(head.split(b"\\r\\n")[0].decode())
start = time.monotonic()
# the bound counts from the tunnel's start, a moment before the answer was read
print("closed", s.recv(1) == b"", time.monotonic() - start >= 1.5, flush=True)
"""


def t_idle_tunnel(h):
    """A tunnel that moves no byte either way is closed by the proxy after
    its idle bound (600 s; 2 s here by FUSEBOX_TEST_PROXY_IDLE), with its
    disconnect record."""
    pol = h.allowed_policy()
    env = dict(os.environ, FUSEBOX_TEST_PROXY_IDLE="2")
    run_dir = os.path.join(h.tmp, "run-idle")
    p = subprocess.run([BIN, "run", "--policy", pol, "--run-dir", run_dir, "--cwd", "/", "--resolve",
                        "allowed.test:127.0.0.1", "--", "python3", "-c", IDLE % h.port],
                       capture_output=True, text=True, env=env, timeout=120)
    assert p.returncode == 0 and p.stdout.splitlines() == ["HTTP/1.1 200 Connection established", "closed True True"], \
        (p.returncode, p.stdout, p.stderr[-2000:])
    with open(os.path.join(run_dir, "access.jsonl")) as f:
        records = [json.loads(line) for line in f if line.strip()]
    net = [r for r in records if r.get("op") in ("connect", "disconnect")]
    assert [r["op"] for r in net] == ["connect", "disconnect"], net
    assert net[1]["duration_us"] >= 2000000 and net[1]["bytes_read"] == 0, net


def t_explain_address(h):
    """serve's policy/explain checks an address as the proxy does: under
    0.0.0.0/0, 127.0.0.1 is refused (loopback), as the proxy refuses it;
    an entry naming loopback allows it."""
    pol = h.policy([{"cidr": "0.0.0.0/0", "why": "anywhere"},
                    {"cidr": "127.0.0.1", "port": h.port, "why": "the test's server"}])
    env = dict(os.environ, XDG_STATE_HOME=os.path.join(h.tmp, "state"))
    env.pop("FUSEBOX_TESTS_MUST_RUN", None)
    msgs = [{"id": 1, "method": "initialize", "params": {"clientName": "network"}}, {"method": "initialized"},
            {"id": 2, "method": "policy/explain", "params": {"host": "127.0.0.1", "port": h.port + 1}},
            {"id": 3, "method": "policy/explain", "params": {"host": "127.0.0.1", "port": h.port}},
            {"id": 4, "method": "policy/explain", "params": {"host": "192.0.2.1", "port": 80}}]
    p = subprocess.run([BIN, "serve", "--listen", "stdio", "--policy", pol, "--workspace", h.tmp],
                       input="".join(json.dumps(m) + "\n" for m in msgs), capture_output=True, text=True,
                       env=env, timeout=60)
    got = {m["id"]: m["result"] for m in map(json.loads, p.stdout.splitlines()) if m.get("id", 0) >= 2 and "result" in m}
    assert (got[2]["decision"], got[2]["rule"]) == ("deny", "loopback"), got
    assert got[3]["decision"] == "allow" and got[4]["decision"] == "allow", got


# a flooder: 150 connections to the proxy, held
FLOOD_HOLD = """
import os, socket, sys, time
held = []
for _ in range(150):
    try:
        held.append(socket.create_connection(("127.0.0.1", 3128)))
    except OSError:
        break
os.write(1, b"held %d\\n" % len(held))
"""
FLOOD = FLOOD_HOLD + "time.sleep(8)\n"


# Connections held in their handshake (a byte each, never a whole
# request), then the file view used while they are held: no open may fail
# for want of the supervisor's descriptors.
HANDSHAKES = """
import os, socket, sys, time
held = []
for _ in range(250):
    try:
        c = socket.create_connection(("127.0.0.1", 3128), timeout=2)
        c.sendall(b"C")
        held.append(c)
    except OSError:
        break
time.sleep(1)
ok = failed = 0
for root, dirs, files in os.walk("/usr/include"):
    for name in files[:50]:
        try:
            with open(os.path.join(root, name), "rb") as f:
                f.read(10)
            ok += 1
        except OSError as e:
            failed += 1
            print("failed", e, flush=True)
    if ok + failed >= 1500:
        break
print("opened", ok, "failed", failed, flush=True)
time.sleep(float(sys.argv[1]))
"""


def opened_all(out):
    """HANDSHAKES' walk opened 1,500 files or more, and none failed."""
    lines = [line.split() for line in out.splitlines() if line.startswith("opened ")]
    return len(lines) == 1 and int(lines[0][1]) >= 1500 and lines[0][2:] == ["failed", "0"]


def t_handshake_flood(h):
    """Connections to the proxy count against its share of the
    supervisor's descriptors from their accept, not only once they are
    tunnels: under `ulimit -n 256`, 250 connections held in their
    handshake leave the view every descriptor it needs (before, the
    supervisor reached 256 and opens failed with EMFILE), past the share a
    new connection is closed at once (one message), and a tunnel is made
    again once they end.  Then the same in a session: six commands that
    flood their proxies while a seventh uses the view (the commands' proxies
    share one part of the session daemon's descriptors), and a command
    after them makes a tunnel; and one command that holds every tunnel it
    may (half of that part) leaves another command room for one.  A
    connection closed at its accept is recorded (rule `descriptors`)."""
    assert os.path.isdir("/usr/include") and len(os.listdir("/usr/include")) > 100
    pol = h.allowed_policy()
    py = shutil.which("python3", path="/usr/bin:/bin") or "python3"
    curl = "curl -s -o /dev/null -w '%%{http_code}\\n' -p http://allowed.test:%d/hello.txt" % h.port
    p = subprocess.run(["sh", "-c", 'ulimit -n 256 && exec "$0" "$@"', BIN, "run", "--policy", pol, "--run-dir",
                        os.path.join(h.tmp, "run-handshakes"), "--cwd", "/", "--resolve", "allowed.test:127.0.0.1",
                        "--", "/bin/sh", "-c", "%s -c '%s' 0; %s" % (py, HANDSHAKES, curl)],
                       capture_output=True, text=True, timeout=120)
    assert p.returncode == 0, (p.returncode, p.stdout[-2000:], p.stderr[-2000:])
    assert opened_all(p.stdout), (p.stdout[-2000:], p.stderr[-2000:])
    assert p.stdout.splitlines()[-1:] == ["200"], (p.stdout[-2000:], p.stderr[-2000:])
    told = [line for line in p.stderr.splitlines() if "new connections are closed until some end" in line]
    assert len(told) == 1, p.stderr[-2000:]
    with open(os.path.join(h.tmp, "run-handshakes", "access.jsonl")) as f:
        records = [json.loads(line) for line in f if line.strip()]
    closed = [r for r in records if r.get("op") == "connect" and r.get("rule") == "descriptors"]
    assert closed and all(r["decision"] == "deny" and r["errno"] == 24 and r["path"] == "-" for r in closed), records[-5:]

    env = dict(os.environ, XDG_STATE_HOME=os.path.join(h.tmp, "state"))
    env.pop("FUSEBOX_TESTS_MUST_RUN", None)
    argv = ["sh", "-c", 'ulimit -n 256 && exec "$0" "$@"', BIN, "run", "--session", "flood", "--policy", pol, "--cwd",
            "/", "--resolve", "allowed.test:127.0.0.1", "--"]
    flooders = []
    try:
        # six: more than the daemon's descriptors hold at one share each
        for _ in range(6):
            flooders.append(subprocess.Popen(argv + [py, "-c", HANDSHAKES, "10"], stdout=subprocess.PIPE,
                                             stderr=subprocess.PIPE, text=True, env=env))
            threading.Event().wait(1)
        p = subprocess.run(argv + [py, "-c", HANDSHAKES, "0"], capture_output=True, text=True, timeout=120, env=env)
        for f in flooders:
            f.communicate(timeout=120)
        # the floods over, their descriptors are the next command's
        again = subprocess.run(argv + ["/bin/sh", "-c", curl], capture_output=True, text=True, timeout=120, env=env)
        # one command holding every tunnel it may (half of the session's
        # share) leaves another command room for one
        holder = subprocess.Popen(argv + [py, "-c", HOLD_TUNNELS % h.port], stdout=subprocess.PIPE,
                                  stderr=subprocess.PIPE, text=True, env=env)
        flooders.append(holder)
        refused = holder.stdout.readline()
        beside = subprocess.run(argv + ["/bin/sh", "-c", curl], capture_output=True, text=True, timeout=120, env=env)
        holder.communicate(timeout=120)
    finally:
        for f in flooders:
            if f.poll() is None:
                f.kill()
                f.wait()
        subprocess.run([BIN, "session", "stop", "flood"], env=env, capture_output=True, timeout=60)
    assert p.returncode == 0, (p.returncode, p.stdout[-2000:], p.stderr[-2000:])
    assert opened_all(p.stdout), (p.stdout[-2000:], p.stderr[-2000:])
    assert again.stdout.splitlines() == ["200"], (again.returncode, again.stdout, again.stderr[-2000:])
    assert refused.startswith("refused ") and " 503 " in refused, refused
    assert beside.stdout.splitlines() == ["200"], (refused, beside.returncode, beside.stdout, beside.stderr[-2000:])


# The proxies' share of the descriptors set past what `ulimit -n 256`
# gives the whole process, so that a flood makes the process itself run
# out (EMFILE): what the proxy does then, should anything else have taken
# them (see handshake_flood for the share itself).
PAST_THE_LIMIT = dict(os.environ, FUSEBOX_TEST_PROXY_FDS="4096")


def t_accept_backoff(h):
    """Out of descriptors, the proxy stops accepting for a while (one
    warning) instead of spinning on accept() with a warning each time, and
    serves again once connections end."""
    pol = h.allowed_policy()
    run_dir = os.path.join(h.tmp, "run-flood")
    # the flooders run the interpreter itself: a wrapper script (pyenv's
    # shims are bash scripts) can itself run out of descriptors under
    # `ulimit -n 256` and leave the proxy never flooded
    py = shutil.which("python3", path="/usr/bin:/bin") or "python3"
    script = ("%s -c '%s' & %s -c '%s' & wait; "
              "curl -s -o /dev/null -w '%%{http_code}\\n' http://allowed.test:%d/hello.txt") % (py, FLOOD, py, FLOOD,
                                                                                               h.port)
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    p = subprocess.run(["sh", "-c", 'ulimit -n 256 && exec "$0" "$@"', BIN, "run", "--policy", pol, "--run-dir",
                        run_dir, "--cwd", "/", "--resolve", "allowed.test:127.0.0.1", "--", "/bin/sh", "-c", script],
                       capture_output=True, text=True, timeout=120, env=PAST_THE_LIMIT)
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu = after.ru_utime + after.ru_stime - before.ru_utime - before.ru_stime
    # the flood reached the proxy: 300 connections are more than a
    # supervisor limited to 256 descriptors can accept
    held = sum(int(line.split()[1]) for line in p.stdout.splitlines() if line.startswith("held "))
    assert held == 300, (p.stdout, p.stderr[-2000:])
    full = [line for line in p.stderr.splitlines() if "network proxy:" in line and "Too many open files" in line]
    assert 1 <= len(full) <= 3, (len(full), p.stderr[-2000:])
    # 8 s with the supervisor out of descriptors: a spinning accept() burns
    # them on the CPU, a backed-off one sleeps
    assert cpu < 3, (cpu, p.stderr[-2000:])
    assert p.stdout.splitlines()[-1:] == ["200"], (p.stdout, p.stderr[-2000:])

def big_file(h, mib):
    """A file of MIB MiB in the server's directory, and its SHA-256."""
    import hashlib
    data = os.urandom(1 << 20) * mib
    with open(os.path.join(h.www, "big.bin"), "wb") as f:
        f.write(data)
    return hashlib.sha256(data).hexdigest()


# a tunnel that moves a large file: the request pipelined right after
# CONNECT (the bytes the proxy read with the handshake go first), then the
# client half-closes and reads to the end; STALL: it stops reading for a
# while after 1 MiB, telling the test when it stops and starts again
DOWNLOAD = CLIENT + """
import hashlib, time
STALL = %d
s = conn()
get = b"GET /big.bin HTTP/1.0\\r\\nHost: allowed.test\\r\\n\\r\\n"
s.sendall(b"CONNECT allowed.test:%d HTTP/1.1\\r\\nHost: allowed.test\\r\\n\\r\\n" + get)
head = b""
while not head.endswith(b"\\r\\n\\r\\n"):
    head += s.recv(1)
s.shutdown(socket.SHUT_WR)
data = bytearray()
while True:
    b = s.recv(65536)
    if not b:
        break
    data += b
    if STALL and len(data) >= 1 << 20:
        print("stalled", flush=True)
        time.sleep(STALL)
        print("reading", flush=True)
        STALL = 0
body = bytes(data).split(b"\\r\\n\\r\\n", 1)[1]
print("got", len(get), len(data), hashlib.sha256(body).hexdigest(), flush=True)
"""


def check_download(out, records, digest):
    """The client got the whole file, and the tunnel's record holds exactly
    the bytes each way that the client sent and received."""
    got = [line.split() for line in out.splitlines() if line.startswith("got ")]
    assert len(got) == 1 and got[0][3] == digest, out
    sent, received = int(got[0][1]), int(got[0][2])
    ends = [r for r in records if r["op"] == "disconnect"]
    assert len(ends) == 1, records
    assert ends[0]["bytes_written"] == sent and ends[0]["bytes_read"] == received, (sent, received, ends)


def t_large_exact(h):
    """32 MiB through a tunnel whose client half-closes after its request:
    every byte arrives, and the disconnect record counts exactly what went
    each way, the request the proxy read along with the CONNECT included."""
    digest = big_file(h, 32)
    code, out, err, records = h.run(h.allowed_policy(), "python3 -c '%s'" % (DOWNLOAD % (0, h.port)),
                                    "allowed.test:127.0.0.1")
    assert code == 0, (code, out, err[-2000:])
    check_download(out, records, digest)


def cpu_seconds(pid):
    """User and system time of PID (all its threads), in seconds."""
    with open("/proc/%d/stat" % pid) as f:
        fields = f.read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def t_slow_reader(h):
    """A client that stops reading mid-download while the host keeps
    sending: the tunnel's pipe fills and the proxy waits for the client's
    socket to take more, spending no CPU meanwhile (a proxy that waited on
    the host's socket, readable all along, would spin); the client then
    gets the rest, every byte, counted exactly."""
    digest = big_file(h, 32)
    run_dir = os.path.join(h.tmp, "run-slow")
    p = subprocess.Popen([BIN, "run", "--policy", h.allowed_policy(), "--run-dir", run_dir, "--cwd", "/", "--resolve",
                          "allowed.test:127.0.0.1", "--", "python3", "-c", DOWNLOAD % (5, h.port)],
                         stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        assert p.stdout.readline() == "stalled\n"
        threading.Event().wait(1)  # the pipe and the sockets' buffers fill
        before = cpu_seconds(p.pid)
        line = p.stdout.readline()
        during = cpu_seconds(p.pid) - before
        assert line == "reading\n", line
        out, err = p.communicate(timeout=120)
    finally:
        if p.poll() is None:
            p.kill()
            p.wait()
    assert p.returncode == 0, (p.returncode, out, err[-2000:])
    # about 4 s of a stalled reader: a spinning supervisor burns them
    assert during < 0.25, during
    with open(os.path.join(run_dir, "access.jsonl")) as f:
        records = [json.loads(line) for line in f if line.strip()]
    check_download(out, [r for r in records if r.get("op") in ("connect", "disconnect")], digest)


class UrgentServer:
    """A host server on 127.0.0.1 that sends "x", an urgent byte "?"
    (MSG_OOB) and "yyyy", ends its side, and keeps what it got, urgent
    bytes inline."""

    def __init__(self):
        self.sock = socket.socket()
        self.sock.bind(("127.0.0.1", 0))
        self.sock.listen(1)
        self.port = self.sock.getsockname()[1]
        self.got = None
        self.done = threading.Event()
        threading.Thread(target=self.serve, daemon=True).start()

    def serve(self):
        c, _ = self.sock.accept()
        c.setsockopt(socket.SOL_SOCKET, socket.SO_OOBINLINE, 1)
        c.settimeout(30)
        c.sendall(b"x")
        time.sleep(0.2)
        c.send(b"?", socket.MSG_OOB)
        time.sleep(0.2)
        c.sendall(b"yyyy")
        c.shutdown(socket.SHUT_WR)
        self.got = read_until_end(c)
        c.close()
        self.done.set()


URGENT = CLIENT + """
import time
s = conn()
s.settimeout(20)
s.sendall(b"CONNECT allowed.test:%d HTTP/1.1\\r\\n\\r\\n")
head = b""
while not head.endswith(b"\\r\\n\\r\\n"):
    head += s.recv(1)
s.sendall(b"a")
time.sleep(0.2)
s.send(b"!", socket.MSG_OOB)
time.sleep(0.2)
s.sendall(b"bbbb")
s.shutdown(socket.SHUT_WR)
try:
    print(head.split(b"\\r\\n")[0].decode(), answer(s).decode())
except socket.timeout:
    print("timed out")
"""


def t_urgent_byte(h):
    """TCP urgent data (MSG_OOB) from either end of a tunnel: splice(2)
    stops at the urgent mark while the socket stays readable, so a proxy
    that only spliced would wake for ever and move nothing past it.  The
    urgent byte goes on as an ordinary byte, both ways, every byte after
    it arrives, and the record counts them all."""
    srv = UrgentServer()
    code, out, err, records = h.run(h.policy([{"host": "allowed.test", "port": srv.port, "why": "the urgent server"},
                                                   {"cidr": "127.0.0.1", "port": srv.port, "why": "on the host's loopback"}]),
                                    "python3 -c '%s'" % (URGENT % srv.port), "allowed.test:127.0.0.1")
    assert srv.done.wait(30), "the server never saw the client's end"
    assert code == 0, (code, out, err[-2000:])
    assert out.strip() == "HTTP/1.1 200 Connection established x?yyyy", out
    assert srv.got == b"a!bbbb", srv.got
    ends = [r for r in records if r["op"] == "disconnect"]
    assert len(ends) == 1 and ends[0]["bytes_written"] == 6 and ends[0]["bytes_read"] == 6, records


# tunnels opened and held until the proxy refuses one; then one closed,
# and another opened in its place
TUNNELS = CLIENT + """
def tunnel():
    s = conn()
    s.sendall(b"CONNECT allowed.test:%d HTTP/1.1\\r\\n\\r\\n")
    head = b""
    while not head.endswith(b"\\r\\n\\r\\n"):
        b = s.recv(1)
        if not b:
            break
        head += b
    return s, head
held = []
for _ in range(40):
    s, head = tunnel()
    if not head.startswith(b"HTTP/1.1 200 "):
        print("refused", len(held), head.split(b"\\r\\n")[0].decode(), answer(s).decode().strip(), flush=True)
        break
    held.append(s)
s = held.pop()  # ended both ways, so the proxy has closed it when the end arrives
s.shutdown(socket.SHUT_WR)
answer(s)
s, head = tunnel()
print("then", head.split(b"\\r\\n")[0].decode(), flush=True)
"""


HOLD_TUNNELS = TUNNELS + """
import time
time.sleep(8)
"""


def t_tunnel_cap(h):
    """A tunnel costs the supervisor six descriptors (two sockets, a pipe
    each way): under RLIMIT_NOFILE 256 the proxy holds the few tunnels half
    its reserve of descriptors allows (64 / 2 / 6), refuses the next with
    503 naming the limit (and a refused record), and takes one again once
    another closed."""
    run_dir = os.path.join(h.tmp, "run-tunnels")
    p = subprocess.run(["sh", "-c", 'ulimit -n 256 && exec "$0" "$@"', BIN, "run", "--policy", h.allowed_policy(),
                        "--run-dir", run_dir, "--cwd", "/", "--resolve", "allowed.test:127.0.0.1", "--", "python3",
                        "-c", TUNNELS % h.port], capture_output=True, text=True, timeout=120)
    lines = p.stdout.splitlines()
    assert p.returncode == 0 and len(lines) == 2, (p.returncode, p.stdout, p.stderr[-2000:])
    refused = lines[0].split(" ", 5)
    assert refused[:5] == ["refused", "5", "HTTP/1.1", "503", "Service"], lines
    assert "the proxy has 5 tunnels open" in refused[5], lines
    assert lines[1] == "then HTTP/1.1 200 Connection established", lines
    with open(os.path.join(run_dir, "access.jsonl")) as f:
        records = [json.loads(line) for line in f if line.strip()]
    denied = [r for r in records if r.get("op") == "connect" and r["decision"] == "deny"]
    assert len(denied) == 1 and denied[0]["rule"] == "descriptors" and "5 tunnels open" in denied[0]["why"], denied


# two flooders take every descriptor the supervisor has; then the first
# one asks for a tunnel on its first connection (accepted long before)
PIPE_FLOOD = FLOOD_HOLD + """
time.sleep(2)
if sys.argv[1] == "ask":
    s = held[0]
    s.settimeout(8)
    s.sendall(b"CONNECT allowed.test:PORT HTTP/1.1\\r\\n\\r\\n")
    data = b""
    try:
        while True:
            b = s.recv(4096)
            if not b:
                break
            data += b
    except socket.timeout:
        data += b" (no end)"
    os.write(1, b"asked " + data.split(b"\\r\\n")[0] + b" | " + data.split(b"\\r\\n\\r\\n", 1)[-1].strip() + b"\\n")
time.sleep(1)
"""


def t_pipe_emfile(h):
    """A supervisor out of descriptors when a tunnel's pipes are made
    refuses that one request (503 naming why, a refused record) instead of
    a tunnel half made, and serves again once descriptors are free."""
    pol = h.allowed_policy()
    run_dir = os.path.join(h.tmp, "run-pipes")
    py = shutil.which("python3", path="/usr/bin:/bin") or "python3"
    flood = PIPE_FLOOD.replace("PORT", str(h.port))
    script = ("%s -c '%s' ask & %s -c '%s' hold & wait; "
              "curl -s -o /dev/null -w '%%{http_code}\\n' -p http://allowed.test:%d/hello.txt") % (py, flood, py, flood,
                                                                                                  h.port)
    p = subprocess.run(["sh", "-c", 'ulimit -n 256 && exec "$0" "$@"', BIN, "run", "--policy", pol, "--run-dir",
                        run_dir, "--cwd", "/", "--resolve", "allowed.test:127.0.0.1", "--", "/bin/sh", "-c", script],
                       capture_output=True, text=True, timeout=120, env=PAST_THE_LIMIT)
    held = sum(int(line.split()[1]) for line in p.stdout.splitlines() if line.startswith("held "))
    assert held == 300, (p.stdout, p.stderr[-2000:])
    asked = [line for line in p.stdout.splitlines() if line.startswith("asked ")]
    assert len(asked) == 1 and asked[0].startswith("asked HTTP/1.1 503 Service Unavailable | "), (p.stdout,
                                                                                                 p.stderr[-2000:])
    assert "no descriptors left for the tunnel's pipes" in asked[0], asked
    assert p.stdout.splitlines()[-1:] == ["200"], (p.stdout, p.stderr[-2000:])
    with open(os.path.join(run_dir, "access.jsonl")) as f:
        records = [json.loads(line) for line in f if line.strip()]
    net = [r for r in records if r.get("op") in ("connect", "disconnect")]
    assert net[0]["op"] == "connect" and net[0]["decision"] == "deny" and net[0]["rule"] == "descriptors", net
    assert net[0]["errno"] == 24 and "pipes" in net[0]["why"], net[0]  # EMFILE
    assert [r["op"] for r in net[1:]] == ["connect", "disconnect"] and net[1]["decision"] == "allow", net


def main():
    if os.geteuid() != 0 or not os.access("/dev/fuse", os.R_OK | os.W_OK):
        print("needs root and /dev/fuse", file=sys.stderr)
        sys.exit(1 if MUST_RUN else 77)
    if shutil.which("curl") is None:
        print("needs curl", file=sys.stderr)
        sys.exit(1 if MUST_RUN else 77)
    tests = [("allowed", t_allowed), ("git_clone", t_git_clone), ("refused_by_name", t_refused_by_name),
             ("loopback_needs_naming", t_loopback_needs_naming), ("no_way_around", t_no_way_around),
             ("bounded_handshake", t_bounded_handshake), ("connection_cap", t_connection_cap),
             ("parser_refusals", t_parser_refusals), ("one_request", t_one_request), ("bare_lf", t_bare_lf),
             ("absolute_name", t_absolute_name),
             ("session", t_session), ("serve", t_serve), ("serve_tunnel_share", t_serve_tunnel_share),
             ("accept_backoff", t_accept_backoff), ("vanishing_clients", t_vanishing_clients), ("idle_tunnel", t_idle_tunnel),
             ("explain_address", t_explain_address),
             ("large_exact", t_large_exact), ("slow_reader", t_slow_reader), ("tunnel_cap", t_tunnel_cap),
             ("pipe_emfile", t_pipe_emfile), ("urgent_byte", t_urgent_byte),
             ("handshake_flood", t_handshake_flood)]
    only = sys.argv[1:]
    failed = 0
    for name, t in tests:
        if only and name not in only:
            continue
        tmp = tempfile.mkdtemp(prefix="fusebox-network-")
        h = Host(tmp)
        try:
            t(h)
            print("ok", name)
        except Skip as e:
            if MUST_RUN:
                failed += 1
            print("skip %s: %s" % (name, e))
        except Exception:  # noqa: BLE001 - report and go on
            failed += 1
            print("FAIL %s: %s\n  by hand: %s run --policy %s/policy-N.json --resolve allowed.test:127.0.0.1 "
                  "-- curl -p http://allowed.test:%d/hello.txt" % (name, traceback.format_exc(), BIN, tmp, h.port))
        finally:
            h.close()
            shutil.rmtree(tmp, ignore_errors=True)
    sys.exit(1 if failed else 0)


if __name__ == "__main__":
    main()
