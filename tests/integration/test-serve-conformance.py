#!/usr/bin/env python3
"""Conformance of `fusebox serve` with Codex's `codex exec-server`.

Not part of CI (it downloads the Codex CLI from npm).  Run by hand:

    /usr/bin/python3 tests/integration/test-serve-conformance.py [--codex PATH] [--fusebox PATH]

Without --codex it installs @openai/codex with npm into a temporary prefix
(its Linux package ships the `codex` binary, which has `codex exec-server`).
Both servers are started on loopback, each gets the same corpus of requests
(paths in a fresh temporary directory, no sandbox: Codex's own sandboxed fs
calls need its Linux sandbox helper), and for every request the answers are
compared by shape: result or error, the error code, and the JSON type of
every member of the result (values differ: session ids, times).  Each
difference is printed; the ones docs/api.md explains ("Differences from
Codex") are marked as expected.  Exit status: 0 when every difference is an
expected one, 1 otherwise.
"""
import argparse
import asyncio
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile

import websockets

EXPECTED = {
    # method: why the answers may differ (docs/api.md, "Differences from Codex")
    "fs/getMetadata": "createdAtMs is the change time in fusebox",
    "initialize": "fusebox adds environmentInfo members (sandboxType, policy, runDir)",
    "environment/info": "fusebox adds sandboxType, policy, runDir",
    "process/read": "timing: whether the process has exited when a read with waitMs is answered",
    "batch": "fusebox refuses JSON batches",
    "notification": "fusebox answers an unknown notification and keeps the connection",
    "response": "fusebox answers a client response and keeps the connection",
}


def corpus(d):
    f = "file://" + d
    return [
        ("fs/writeFile", {"path": f + "/a.txt", "dataBase64": "aGVsbG8="}),
        ("fs/readFile", {"path": f + "/a.txt"}),
        ("fs/readFile", {"path": f + "/missing"}),
        ("fs/readFile", {"path": 42}),
        ("fs/readFile", {}),
        ("fs/readFile", {"path": "http://example.com/x"}),
        ("fs/writeFile", {"path": f + "/b.txt", "dataBase64": "not base64!"}),
        ("fs/createDirectory", {"path": f + "/d/e"}),
        ("fs/createDirectory", {"path": f + "/x/y", "recursive": False}),
        ("fs/getMetadata", {"path": f + "/a.txt"}),
        ("fs/getMetadata", {"path": f + "/missing"}),
        ("fs/canonicalize", {"path": f + "/d/../a.txt"}),
        ("fs/readDirectory", {"path": f}),
        ("fs/walk", {"path": f, "options": {"maxDepth": 4, "maxDirectories": 10, "maxEntries": 100,
                                             "followDirectorySymlinks": False}}),
        ("fs/walk", {"path": f, "options": {"maxDepth": 100, "maxDirectories": 10, "maxEntries": 100,
                                             "followDirectorySymlinks": False}}),
        ("fs/copy", {"sourcePath": f + "/a.txt", "destinationPath": f + "/c.txt", "recursive": False}),
        ("fs/copy", {"sourcePath": f + "/d", "destinationPath": f + "/d2", "recursive": False}),
        ("fs/remove", {"path": f + "/c.txt"}),
        ("fs/remove", {"path": f + "/nothing", "force": False}),
        ("fs/remove", {"path": f + "/d", "recursive": False}),
        ("fs/open", {"handleId": "h1", "path": f + "/a.txt"}),
        ("fs/readBlock", {"handleId": "h1", "offset": 0, "len": 3}),
        ("fs/close", {"handleId": "h1"}),
        ("fs/readBlock", {"handleId": "h1", "offset": 0, "len": 3}),
        ("fs/open", {"handleId": "x" * 40, "path": f + "/a.txt"}),
        ("process/start", {"processId": "p1", "argv": ["/bin/sh", "-c", "echo hi"], "cwd": f,
                           "env": {"PATH": "/usr/bin:/bin"}, "tty": False, "pipeStdin": False, "arg0": None}),
        ("process/start", {"processId": "p2", "argv": [], "cwd": f, "env": {}, "tty": False}),
        ("process/read", {"processId": "p1", "afterSeq": 0, "maxBytes": 1000, "waitMs": 2000}),
        ("process/write", {"processId": "nobody", "chunk": "eA==", "writeId": "w1"}),
        ("process/terminate", {"processId": "nobody"}),
        ("no/such/method", {}),
        ("environment/info", {}),
    ]


def shape(v):
    if isinstance(v, dict):
        return {k: shape(x) for k, x in sorted(v.items())}
    if isinstance(v, list):
        return [shape(v[0])] if v else []
    return type(v).__name__


async def drive(url, d):
    out = {}
    async with websockets.connect(url, max_size=None) as ws:
        async def call(i, method, params):
            await ws.send(json.dumps({"id": i, "method": method, "params": params}))
            while True:
                m = json.loads(await asyncio.wait_for(ws.recv(), 30))
                if m.get("id") == i and "method" not in m:
                    return m

        out["initialize"] = await call(1, "initialize", {"clientName": "conformance"})
        await ws.send(json.dumps({"method": "initialized", "params": {}}))
        for i, (method, params) in enumerate(corpus(d), start=10):
            out["%02d %s" % (i, method)] = await call(i, method, params)
    return out


def summarize(m):
    if m is None:
        return "no answer"
    if "error" in m:
        return "error %s" % m["error"].get("code")
    return json.dumps(shape(m.get("result")), sort_keys=True)


def start(argv, env=None):
    p = subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, env=env, text=True)
    for _ in range(200):
        line = p.stdout.readline()
        m = re.search(r"ws://[0-9.]+:[0-9]+", line)
        if m:
            return p, m.group(0)
    p.kill()
    raise RuntimeError("%s printed no ws:// URL" % argv[0])


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--codex")
    ap.add_argument("--fusebox", default=os.environ.get("FUSEBOX_BIN", "fusebox"))
    args = ap.parse_args()
    tmp = tempfile.mkdtemp(prefix="fusebox-conformance-")
    codex = args.codex
    if codex is None:
        subprocess.run(["npm", "install", "--silent", "--prefix", tmp + "/npm", "@openai/codex"], check=True)
        codex = tmp + "/npm/node_modules/.bin/codex"
    dirs = {name: os.path.join(tmp, name) for name in ("codex", "fusebox")}
    for d in dirs.values():
        os.makedirs(d)
    cp, curl = start([codex, "exec-server", "--listen", "ws://127.0.0.1:0"])
    env = dict(os.environ, XDG_STATE_HOME=tmp + "/state")
    fp, furl = start([args.fusebox, "serve", "--listen", "ws://127.0.0.1:0", "--policy", "builtin:host",
                      "--workspace", dirs["fusebox"]], env)
    try:
        a = asyncio.run(drive(curl, dirs["codex"]))
        b = asyncio.run(drive(furl, dirs["fusebox"]))
    finally:
        cp.terminate()
        fp.terminate()
    unexpected = 0
    for key in a:
        sa, sb = summarize(a.get(key)), summarize(b.get(key))
        if sa == sb:
            continue
        method = key.split(" ", 1)[-1]
        why = EXPECTED.get(method)
        if why is None:
            unexpected += 1
        print("%s %s\n  codex:   %s\n  fusebox: %s" % ("EXPECTED" if why else "DIFFERS ", key, sa, sb))
        if why:
            print("  (%s)" % why)
    shutil.rmtree(tmp, ignore_errors=True)
    print("%d unexpected differences" % unexpected)
    return 1 if unexpected else 0


if __name__ == "__main__":
    sys.exit(main())
