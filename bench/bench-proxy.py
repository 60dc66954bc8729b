#!/usr/bin/env python3
"""The network proxy's cost (docs/performance.md, "The network proxy").

Run by hand, as root, with the build's fusebox:

    FUSEBOX_BIN=build/launcher/fusebox python3 bench/bench-proxy.py [--size MiB] [--connections N]

A server on the host's 127.0.0.1 answers every connection with an HTTP
response of SIZE bytes sent with sendfile(2), or, for the set-up figure,
one byte.  Two figures, each direct (the client on the host) and through
the proxy (the client in `fusebox run` with a network allowlist that names
127.0.0.1, going through CONNECT):

  - a download of SIZE bytes (default 1024 MiB) by curl, in MB/s, and the
    ratio (the proxy's budget: within 1.5x of direct), --rounds times
    (default 3) alternately direct and through the proxy, the medians; with
    the CPU time each took (user + system of everything it ran: curl, and
    through the proxy also fusebox's supervisor with its proxy and the
    sandbox), steadier than MB/s on a loaded machine;
  - the set-up of a connection: connect, the request, the first byte back,
    N times (default 1000) by one Python process; the median and the
    proxy's extra (its budget: under 1 ms).
"""
import argparse
import json
import os
import resource
import socket
import statistics
import subprocess
import sys
import tempfile
import threading
import time

BIN = os.environ.get("FUSEBOX_BIN", "fusebox")


def serve(listener, body_path, size):
    head = b"HTTP/1.1 200 OK\r\nContent-Length: %d\r\nConnection: close\r\n\r\n" % size
    while True:
        conn, _ = listener.accept()
        threading.Thread(target=answer, args=(conn, head, body_path, size), daemon=True).start()


def answer(conn, head, body_path, size):
    with conn:
        data = b""
        while b"\r\n\r\n" not in data:
            b = conn.recv(4096)
            if not b:
                return
            data += b
        if data.startswith(b"GET /one "):
            conn.sendall(b"HTTP/1.1 200 OK\r\nContent-Length: 1\r\nConnection: close\r\n\r\nx")
            return
        conn.sendall(head)
        with open(body_path, "rb") as f:
            sent = 0
            while sent < size:
                n = os.sendfile(conn.fileno(), f.fileno(), sent, size - sent)
                if n == 0:
                    break
                sent += n


SETUP = r"""
import socket, statistics, sys, time
port, n, proxy = int(sys.argv[1]), int(sys.argv[2]), sys.argv[3] == "proxy"
times = []
for i in range(n):
    t = time.perf_counter()
    if proxy:
        s = socket.create_connection(("127.0.0.1", 3128))
        s.sendall(b"CONNECT 127.0.0.1:%d HTTP/1.1\r\n\r\n" % port)
        got = b""
        while b"\r\n\r\n" not in got:
            got += s.recv(4096)
    else:
        s = socket.create_connection(("127.0.0.1", port))
    s.sendall(b"GET /one HTTP/1.1\r\n\r\n")
    got = b""
    while not got.endswith(b"x"):
        got += s.recv(4096)
    times.append(time.perf_counter() - t)
    s.close()
print(statistics.median(times) * 1e6)
"""


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--size", type=int, default=1024, help="MiB to download")
    ap.add_argument("--connections", type=int, default=1000)
    ap.add_argument("--rounds", type=int, default=3, help="downloads each way, alternately")
    args = ap.parse_args()
    size = args.size * 1024 * 1024
    tmp = tempfile.mkdtemp(prefix="bench-proxy-")
    body = os.path.join(tmp, "body")
    with open(body, "wb") as f:
        f.truncate(size)  # a sparse file: the page cache serves zeros
    listener = socket.socket()
    listener.bind(("127.0.0.1", 0))
    listener.listen(128)
    port = listener.getsockname()[1]
    threading.Thread(target=serve, args=(listener, body, size), daemon=True).start()
    policy = os.path.join(tmp, "policy.json")
    with open(policy, "w") as f:
        json.dump({"version": 1, "rules": [{"path": "/", "access": "read", "why": "tools"}],
                   "network": {"allow": [{"cidr": "127.0.0.1", "port": port, "why": "the bench's server"}]}}, f)
    inside = [BIN, "run", "--policy", policy, "--cwd", "/", "--run-dir", os.path.join(tmp, "run"), "--"]

    url = "http://127.0.0.1:%d/big" % port
    curl = ["curl", "-sS", "-o", "/dev/null", "-w", "%{speed_download}"]
    def download(argv):
        """(bytes per second, CPU seconds of everything ARGV ran)"""
        before = resource.getrusage(resource.RUSAGE_CHILDREN)
        speed = float(subprocess.run(argv, capture_output=True, text=True, check=True).stdout)
        after = resource.getrusage(resource.RUSAGE_CHILDREN)
        return speed, after.ru_utime + after.ru_stime - before.ru_utime - before.ru_stime

    direct, proxied = [], []
    for _ in range(args.rounds):
        direct.append(download(curl + ["--noproxy", "*", url]))
        proxied.append(download(inside + curl + ["--noproxy", "", "-p", url]))
        subprocess.run(["rm", "-rf", os.path.join(tmp, "run")])  # a run directory is made anew
    d_speed, p_speed = statistics.median(x[0] for x in direct), statistics.median(x[0] for x in proxied)
    print("download %d MiB, median of %d: direct %.0f MB/s (CPU %.2f s), through the proxy %.0f MB/s (CPU %.2f s) "
          "(%.2fx)" % (args.size, args.rounds, d_speed / 1e6, statistics.median(x[1] for x in direct), p_speed / 1e6,
                       statistics.median(x[1] for x in proxied), d_speed / p_speed))
    print("  each round (MB/s): direct %s; through the proxy %s" %
          (" ".join("%.0f" % (x[0] / 1e6) for x in direct), " ".join("%.0f" % (x[0] / 1e6) for x in proxied)))

    d = float(subprocess.run([sys.executable, "-c", SETUP, str(port), str(args.connections), "direct"],
                             capture_output=True, text=True, check=True).stdout)
    for name in os.listdir(tmp):
        if name == "run":
            subprocess.run(["rm", "-rf", os.path.join(tmp, name)])
    p = float(subprocess.run(inside + ["python3", "-c", SETUP, str(port), str(args.connections), "proxy"],
                             capture_output=True, text=True, check=True).stdout)
    print("connection set-up, median of %d: direct %.0f us, through the proxy %.0f us (+%.0f us)" %
          (args.connections, d, p, p - d))
    subprocess.run(["rm", "-rf", tmp])


if __name__ == "__main__":
    main()
