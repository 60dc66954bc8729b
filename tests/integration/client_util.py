"""A JSON-RPC client of `fusebox serve` on a connected websocket (a
python3-websockets connection): calls and their answers, with every other
message kept in an inbox until a test asks for it.  The test programs add
how they connect and shake hands.  ok(answer) and err(answer, code) assert
that an answer is a result, or an error with that code, and return it;
recv_until(sock, marker) reads a plain socket (a handshake by hand, a
unix client) up to a marker or its end."""
import asyncio
import json


class Client:
    def __init__(self, ws):
        self.ws = ws
        self.next_id = 1
        self.inbox = []
        self.session_id = None  # ID.SECRET, as initialize answered: what a resume takes
        self.log_session = None  # ID, as records carry it

    async def recv(self):
        return json.loads(await asyncio.wait_for(self.ws.recv(), 60))

    async def take(self, pred):
        """The first message, queued or new, for which PRED holds; the
        others stay in the inbox."""
        for i, m in enumerate(self.inbox):
            if pred(m):
                return self.inbox.pop(i)
        while True:
            m = await self.recv()
            if pred(m):
                return m
            self.inbox.append(m)

    async def call(self, method, params=None):
        rid = self.next_id
        self.next_id += 1
        await self.ws.send(json.dumps({"id": rid, "method": method, "params": params or {}}))
        return await self.take(lambda m: m.get("id") == rid and "method" not in m)

    async def close(self):
        await self.ws.close()


def ok(r):
    assert "result" in r, r
    return r["result"]


def err(r, code):
    assert "error" in r, r
    assert r["error"]["code"] == code, r
    return r["error"]


def recv_until(s, marker=None, must=None):
    """What socket S receives until MARKER is in it or, when MARKER is None,
    until the peer closes.  A peer that closes before MARKER came fails
    with MUST (what was awaited) as the message, or, when MUST is None,
    ends the read with what came."""
    buf = b""
    while marker is None or marker not in buf:
        more = s.recv(65536)
        if not more:
            assert marker is None or must is None, "closed before %s" % must
            break
        buf += more
    return buf
