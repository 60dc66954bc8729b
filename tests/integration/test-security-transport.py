#!/usr/bin/env python3
"""Adversarial tests: what a client of `fusebox serve`'s ws:// listener (and
its unix: one) can make the server hold by the way it sends its bytes.

- fragments: one WebSocket message sent as unfinished fragments (FIN=0) of
  8 MiB each.  libsoup bounds a frame, not a message, and appended them
  without limit (1.6 GiB held for 200 of them, the connection open).  The
  server closes the connection once the message passes 16 MiB and its
  framing, as the bytes arrive; a 12 MiB message in three fragments is
  still answered, and the server serves another client afterwards.
- held_budget: seventeen connections each announce a 16 MiB frame and send
  15.5 MiB of it (libsoup kept each, 64 MiB a frame then, so 1,024
  connections could hold 16 GiB).  What all connections hold of
  unfinished messages is bounded (256 MiB): past it the connection holding
  the most is closed (1013); another client is served.
- stall: a connection that stops in the middle of a message is closed
  (1008) after FUSEBOX_TEST_WS_STALL seconds (30 without it); one idle
  between two messages is not.
- preauth_bound: connections without the token (idle, or with half an HTTP
  request) were neither counted nor timed out: another local user took the
  server's descriptors with them.  Past 256 connections before their
  handshake the oldest is closed: of 300, 44 at least are, and a client
  with the token connects and is served meanwhile.
- handshake_timeout: a connection that is not a WebSocket within
  FUSEBOX_TEST_WS_HANDSHAKE seconds (10 without it) is closed, idle or
  half-sent; a WebSocket idle for as long is not.
- accept_emfile: out of descriptors, the server stops accepting for a
  while instead of retrying at once (GSocketService warned 1,000 times a
  second at full CPU): one warning, and once descriptors are free a new
  client is served.
- client_gone_mid_answers (a unix: listener): clients send bursts of
  fs/readFile of a 2 MB file and go away without reading the answers.
  Letting such a client go, the server answered what it had sent, met the
  client's end (EPIPE), and the stream asked for a close that ran on the
  freed client at the loop's next turn: the server crashed (SIGSEGV, a
  call through a pointer in freed memory) or hung for good in a
  connection freed twice, within seconds, every time.  Now it serves a
  client afterwards and exits 0 on SIGTERM.

Clients speak WebSocket by hand over plain sockets, frames masked with a
zero key (RFC 6455 wants a mask; a zero one leaves the payload as it is).

Exit status: 0 all passed, 1 a check failed, 77 a prerequisite is missing
(unless FUSEBOX_TESTS_MUST_RUN=1).
"""
import asyncio
import contextlib
import json
import os
import random
import re
import select
import socket
import struct
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import security_util as su  # noqa: E402

serve = su.serve
client_util = serve.client_util

MIB = 1024 * 1024
# ipc/ipc-transport-private.h: FB_RPC_WS_HELD_MAX
HELD_MAX = 16 * MIB + 64 * 1024


def upgrade(srv, source="127.0.0.1"):
    """A socket past the WebSocket handshake (with the token), from SOURCE."""
    s = serve.upgrade_request(srv, source, 60)
    head = client_util.recv_until(s, b"\r\n\r\n", "the handshake's answer")
    assert head.startswith(b"HTTP/1.1 101"), head
    assert head.endswith(b"\r\n\r\n"), "bytes after the handshake's answer: %r" % head
    return s


def frame_head(opcode, length, fin=True):
    """A client frame's header for LENGTH bytes of payload, zero mask."""
    b0 = (0x80 if fin else 0) | opcode
    if length < 126:
        return struct.pack("!BB", b0, 0x80 | length) + b"\0\0\0\0"
    if length < 65536:
        return struct.pack("!BBH", b0, 0x80 | 126, length) + b"\0\0\0\0"
    return struct.pack("!BBQ", b0, 0x80 | 127, length) + b"\0\0\0\0"


def send_fragments(s, payload, size):
    """PAYLOAD as one text message in fragments of SIZE bytes."""
    for off in range(0, len(payload), size):
        piece = payload[off:off + size]
        s.sendall(frame_head(1 if off == 0 else 0, len(piece), fin=off + size >= len(payload)) + piece)


def recv_frame(s):
    """(opcode, payload) of the server's next frame, or None once it closed
    or reset the connection."""
    def need(n):
        buf = b""
        while len(buf) < n:
            more = s.recv(n - len(buf))
            if not more:
                return None
            buf += more
        return buf
    try:
        h = need(2)
        if h is None:
            return None
        n = h[1] & 0x7f
        if n == 126:
            n = struct.unpack("!H", need(2))[0]
        elif n == 127:
            n = struct.unpack("!Q", need(8))[0]
        p = need(n) if n else b""
        return (h[0] & 0x0f, p) if p is not None else None
    except ConnectionResetError:
        return None


def answer(s, rid):
    """The JSON answer with id RID (other messages dropped)."""
    while True:
        f = recv_frame(s)
        assert f is not None, "the server closed the connection before answering id %s" % rid
        if f[0] == 1:
            m = json.loads(f[1])
            if m.get("id") == rid:
                return m


def closed_with(s, want):
    """The server closed S; a close frame, if one came, says WANT."""
    while True:
        try:
            f = recv_frame(s)
        except socket.timeout:
            raise AssertionError("the server kept the connection open")
        if f is None:
            return
        if f[0] == 8:
            code = struct.unpack("!H", f[1][:2])[0]
            assert code == want, "closed with %d %r, not %d" % (code, f[1][2:], want)
            return


def closed_too_big(s):
    closed_with(s, 1009)


def initialize(s, name):
    req = json.dumps({"id": 1, "method": "initialize", "params": {"clientName": name}}).encode()
    s.sendall(frame_head(1, len(req)) + req)
    m = answer(s, 1)
    assert "result" in m, m
    note = json.dumps({"method": "initialized", "params": {}}).encode()
    s.sendall(frame_head(1, len(note)) + note)


def initialized(srv, name, source="127.0.0.1"):
    """A socket past the handshake and initialize, as client NAME."""
    s = upgrade(srv, source)
    initialize(s, name)
    return s


@contextlib.contextmanager
def sockets():
    """A list for the block's sockets: each closed when the block ends,
    even when it fails."""
    socks = []
    try:
        yield socks
    finally:
        for s in socks:
            s.close()


def still_served(s, srv):
    """S, a client past initialized, gets an answer."""
    req = json.dumps({"id": 2, "method": "fs/getMetadata", "params": {"path": srv.ws}}).encode()
    s.sendall(frame_head(1, len(req)) + req)
    m = answer(s, 2)
    assert "result" in m, m


def other_client_served(srv):
    initialized(srv, "other", "127.0.0.2").close()


async def t_fragments(tmp):
    with serve.Server(tmp) as srv:
        # A message under the bound, in fragments, is answered.
        s = upgrade(srv)
        req = json.dumps({"id": 1, "method": "initialize", "params": {"clientName": "fragments"}}).encode()
        send_fragments(s, req + b" " * (12 * MIB - len(req)), 4 * MIB)
        assert "result" in answer(s, 1)
        # One past it, in unfinished fragments of 8 MiB: the connection is
        # closed once the server holds the bound, whatever follows.
        frag = b"a" * (8 * MIB)
        sent = 0
        try:
            s.sendall(frame_head(1, len(frag), fin=False) + frag)
            sent += len(frag)
            while sent < 5 * len(frag):
                s.sendall(frame_head(0, len(frag), fin=False) + frag)
                sent += len(frag)
        except (BrokenPipeError, ConnectionResetError):
            pass
        closed_too_big(s)
        assert sent >= HELD_MAX - len(frag), "closed after %d bytes, before the bound" % sent
        s.close()
        other_client_served(srv)


async def t_held_budget(tmp):
    with serve.Server(tmp) as srv, sockets() as conns:
        part = b" " * (15 * MIB + MIB // 2)
        for _ in range(17):
            s = upgrade(srv)
            conns.append(s)
            s.sendall(frame_head(1, 16 * MIB) + part)
        # One of them (the first: they hold as much, it came first) was
        # closed to make room.
        readable, _, _ = select.select(conns, [], [], 60)
        assert readable, "17 connections hold 263 MiB of unfinished frames, none closed"
        closed_with(readable[0], 1013)
        other_client_served(srv)


async def t_stall(tmp):
    with serve.Server(tmp, env={"FUSEBOX_TEST_WS_STALL": "2"}) as srv:
        idle = initialized(srv, "idle")
        s = upgrade(srv)
        s.sendall(frame_head(1, 16 * MIB) + b" " * MIB)
        closed_with(s, 1008)
        s.close()
        # Idle between two messages, for longer than the other stalled:
        # still served.
        still_served(idle, srv)
        idle.close()


def count_closed(socks, want):
    """How many of SOCKS the server closed, waiting up to a minute for
    WANT of them."""
    closed, live = 0, list(socks)
    while closed < want and live:
        readable, _, _ = select.select(live, [], [], 60)
        if not readable:
            break
        for s in readable:
            live.remove(s)
            try:
                if s.recv(65536):
                    continue  # an answer (a 4xx), then the close
            except ConnectionResetError:
                pass
            closed += 1
    return closed


def raw_connections(srv, n):
    """N TCP connections without the token: idle, or (every other one)
    half an HTTP request."""
    socks = []
    for i in range(n):
        s = socket.create_connection(("127.0.0.1", srv.port))
        if i % 2:
            s.sendall(b"GET / HTTP/1.1\r\nHo")
        socks.append(s)
    return socks


async def t_preauth_bound(tmp):
    with serve.Server(tmp, env={"G_MESSAGES_DEBUG": "fusebox"}) as srv, sockets() as socks:
        legit = initialized(srv, "legit")
        socks += raw_connections(srv, 300)
        # Accepted in order: once a later client is served, the 300 were
        # accepted before it.
        other_client_served(srv)
        closed = count_closed(socks, 300 - 256)
        assert closed >= 300 - 256, "of 300 connections before their handshake, %d closed" % closed
        # For the bound, not (later) for their handshake's time.
        assert "256 connections before their handshake: the oldest closed" in srv.stderr()
        still_served(legit, srv)
        legit.close()


async def t_handshake_timeout(tmp):
    with serve.Server(tmp, env={"FUSEBOX_TEST_WS_HANDSHAKE": "2"}) as srv, sockets() as socks:
        idle = initialized(srv, "idle")
        socks += raw_connections(srv, 2)
        closed = count_closed(socks, 2)
        assert closed == 2, "of an idle connection and a half-sent request, %d closed" % closed
        still_served(idle, srv)
        idle.close()


def accept_warnings(srv):
    """Lines of the server's stderr about accepting (GSocketService's
    "Error accepting connection" too)."""
    return [line for line in srv.stderr().splitlines() if re.search(r"accept(ing)? (a )?connection", line)]


async def t_accept_emfile(tmp):
    with serve.Server(tmp, nofile=64) as srv, sockets() as socks:
        socks += raw_connections(srv, 120)
        for _ in range(600):
            if accept_warnings(srv):
                break
            await asyncio.sleep(0.1)
        assert accept_warnings(srv), "64 descriptors and 120 connections, and no warning: %s" % srv.stderr()
        # A while out of descriptors: the warning is not repeated.
        await asyncio.sleep(1)
        warnings = accept_warnings(srv)
        assert len(warnings) == 1, "%d warnings: %s" % (len(warnings), warnings[:3])
        for s in socks:
            s.close()
        for _ in range(600):
            try:
                other_client_served(srv)
                break
            except (AssertionError, OSError):
                await asyncio.sleep(0.1)
        else:
            raise AssertionError("no client served once the connections closed")


def rpc_line(rid, method, params):
    return (json.dumps({"id": rid, "method": method, "params": params}) + "\n").encode()


def gone_clients(path, big, seed):
    """Fifteen clients, one after another: each initializes, sends 1-30
    fs/readFile of BIG (some cut in the middle of a line), waits up to
    0.3 s, and goes (half of them shutting their side first), never
    reading an answer."""
    rnd = random.Random(seed)
    for _ in range(15):
        with socket.socket(socket.AF_UNIX) as s:
            s.settimeout(60)
            s.connect(path)
            s.sendall(rpc_line(1, "initialize", {"clientName": "gone"}) + b'{"method":"initialized","params":{}}\n')
            assert b'"result"' in s.makefile("rb").readline()
            data = b"".join(rpc_line(i, "fs/readFile", {"path": big}) for i in range(2, 2 + rnd.randint(1, 30)))
            if rnd.random() < 0.3:
                data = data[:rnd.randint(1, len(data) - 1)]
            with contextlib.suppress(OSError):
                s.sendall(data)
            time.sleep(rnd.random() * 0.3)
            if rnd.random() < 0.5:
                with contextlib.suppress(OSError):
                    s.shutdown(socket.SHUT_WR)


async def t_client_gone_mid_answers(tmp):
    def prepare(ws):
        with open(os.path.join(ws, "big"), "wb") as f:
            f.write(os.urandom(2 * MIB))

    path = os.path.join(tmp, "api.sock")
    with serve.Server(tmp, listen="unix:" + path, prepare=prepare) as srv:
        big = os.path.join(srv.ws, "big")
        loop = asyncio.get_running_loop()
        await asyncio.gather(*(loop.run_in_executor(None, gone_clients, path, big, seed) for seed in (1, 2)))
        assert srv.proc.poll() is None, "the server ended (%s): %s" % (srv.proc.returncode, srv.stderr()[-2000:])
        with socket.socket(socket.AF_UNIX) as s:
            s.settimeout(30)
            s.connect(path)
            s.sendall(rpc_line(1, "initialize", {"clientName": "after"}))
            line = s.makefile("rb").readline()
            assert b'"result"' in line, "a client after them got %r: %s" % (line, srv.stderr()[-2000:])
    # (Server.stop: exit 0 on SIGTERM, within 60 s)


if __name__ == "__main__":
    su.run([("fragments", t_fragments), ("held_budget", t_held_budget), ("stall", t_stall),
            ("preauth_bound", t_preauth_bound), ("handshake_timeout", t_handshake_timeout),
            ("accept_emfile", t_accept_emfile), ("client_gone_mid_answers", t_client_gone_mid_answers)],
           "fusebox-security-transport-")
