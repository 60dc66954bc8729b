"""What the tests that drive the real Codex CLI share.

- find_codex(): the pinned Codex binary (tools/codex.sh installs it into a
  cache outside the checkout), or a message naming what is missing.
- ScriptedModel: a stand-in for the model, on loopback.  It speaks the
  Responses API's streaming events as Codex's client parses them
  (codex-rs/codex-api/src/sse/responses.rs: `response.created`,
  `response.output_item.done` with one item each, `response.completed`), and
  answers each request with the next step of a script: the step is the number
  of tool outputs the request carries, so a retried request gets the same
  answer.  Every request body is kept, to look at what the agent saw.
- codex_home(): a CODEX_HOME whose config.toml points Codex at that model
  through a custom provider (wire_api "responses", a key from the
  environment), never asks for approval, and checks for no update.
- codex_env(): the environment for `codex exec`: its HOME and CODEX_HOME in
  the test's directory, and every proxy variable aimed at a closed loopback
  port, so that anything Codex might try beyond loopback fails at once
  instead of leaving the machine.
- LoggingProxy: a WebSocket proxy that records every message both ways
  (Debian's python3-websockets).

Nothing here talks to anything but 127.0.0.1.
"""
import asyncio
import http.server
import json
import os
import shutil
import subprocess
import sys
import threading

SOURCE_ROOT = os.environ.get("FUSEBOX_SOURCE_ROOT",
                             os.path.abspath(os.path.join(os.path.dirname(__file__), "..", "..")))
MUST_RUN = os.environ.get("FUSEBOX_TESTS_MUST_RUN") == "1"
SKIP = 77

# A model Codex 0.171 knows, so that it offers its full tool set
# (exec_command, and apply_patch as a freeform tool); nothing is sent to it.
MODEL = "gpt-5.5"


def skip(why):
    """A missing prerequisite: exit 77, or fail when every test must run."""
    print("SKIP: %s" % why, file=sys.stderr)
    sys.exit(1 if MUST_RUN else SKIP)


def find_codex():
    """The pinned Codex binary where tools/codex.sh installs it, or another
    one named by $FUSEBOX_CODEX (to check another version by hand).
    Returns (path, version) or skips."""
    tool = os.path.join(SOURCE_ROOT, "tools", "codex.sh")
    version = subprocess.run([tool, "--version"], capture_output=True, text=True, check=True).stdout.strip()
    path = os.environ.get("FUSEBOX_CODEX") or \
        subprocess.run([tool, "--path"], capture_output=True, text=True, check=True).stdout.strip()
    if not os.access(path, os.X_OK):
        skip("the Codex CLI %s is not installed at %s: run tools/codex.sh (tools/test.sh does)" % (version, path))
    node = subprocess.run(["sh", "-c", "command -v node"], capture_output=True, text=True)
    if node.returncode != 0:
        skip("node is missing (apt-get install nodejs, or run tools/codex.sh)")
    got = subprocess.run([path, "--version"], capture_output=True, text=True).stdout.strip()
    if os.environ.get("FUSEBOX_CODEX"):
        return path, got.replace("codex-cli ", "")
    if got != "codex-cli " + version:
        skip("%s reports %r, not codex-cli %s: run tools/codex.sh" % (path, got, version))
    return path, version


def prerequisites(starts, tool, package_hint):
    """What every Codex test needs: the pinned Codex, fusebox (the binary
    under test) able to start sandboxes (fusebox STARTS), and TOOL.
    Returns (codex, version, fusebox) or skips, naming what is missing."""
    codex, version = find_codex()
    fusebox = os.environ.get("FUSEBOX_BIN", "fusebox")
    if os.geteuid() != 0 and not os.access("/dev/fuse", os.R_OK | os.W_OK):
        skip("/dev/fuse is not usable by this user: fusebox %s can't start sandboxes" % starts)
    if shutil.which(tool) is None:
        skip("%s is missing%s" % (tool, package_hint))
    return codex, version, fusebox


def message(text):
    return {"type": "message", "role": "assistant", "content": [{"type": "output_text", "text": text}]}


def shell(call_id, cmd, **extra):
    """A call of Codex's exec_command tool."""
    return {"type": "function_call", "name": "exec_command", "call_id": call_id,
            "arguments": json.dumps(dict({"cmd": cmd}, **extra))}


def apply_patch(call_id, patch):
    """A call of Codex's freeform apply_patch tool."""
    return {"type": "custom_tool_call", "name": "apply_patch", "call_id": call_id, "input": patch}


def tool_outputs(request):
    """{call_id: output text} of the tool outputs a request carries."""
    out = {}
    for item in request.get("input", []):
        if item.get("type") in ("function_call_output", "custom_tool_call_output"):
            o = item.get("output")
            if isinstance(o, list):  # content items
                o = "".join(c.get("text", "") for c in o if isinstance(c, dict))
            out[item["call_id"]] = o
    return out


class ScriptedModel:
    """STEPS: a list of lists of output items; step N answers a request that
    carries N tool outputs.  Past the end, a final message."""

    def __init__(self, steps):
        self.steps = steps
        self.requests = []  # (path, parsed body or None)
        self.lock = threading.Lock()
        model = self

        class Handler(http.server.BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, *args):
                pass

            def answer(self, status, body, ctype="application/json"):
                self.send_response(status)
                self.send_header("content-type", ctype)
                self.send_header("content-length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

            def do_GET(self):
                with model.lock:
                    model.requests.append((self.path, None))
                self.answer(404, b"{}")

            def do_POST(self):
                data = self.rfile.read(int(self.headers.get("content-length", 0)))
                try:
                    body = json.loads(data)
                except ValueError:
                    body = None
                with model.lock:
                    model.requests.append((self.path, body))
                if not self.path.endswith("/responses") or body is None:
                    self.answer(404, b"{}")
                    return
                n = len(tool_outputs(body))
                items = model.steps[n] if n < len(model.steps) else [message("done")]
                rid = "resp-%d" % n
                events = [{"type": "response.created", "response": {"id": rid}}]
                events += [{"type": "response.output_item.done", "output_index": i, "item": item}
                           for i, item in enumerate(items)]
                events.append({"type": "response.completed",
                               "response": {"id": rid, "usage": {"input_tokens": 1, "output_tokens": 1,
                                                                 "total_tokens": 2}}})
                sse = "".join("event: %s\ndata: %s\n\n" % (e["type"], json.dumps(e)) for e in events)
                self.answer(200, sse.encode(), "text/event-stream")

        self.server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = "http://127.0.0.1:%d/v1" % self.server.server_address[1]
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)
        self.thread.start()

    def model_requests(self):
        with self.lock:
            return [b for p, b in self.requests if p.endswith("/responses") and b is not None]

    def outputs(self):
        """Every tool output the agent sent back, by call id."""
        out = {}
        for r in self.model_requests():
            out.update(tool_outputs(r))
        return out

    def stop(self):
        self.server.shutdown()
        self.server.server_close()


def codex_home(directory, model_url):
    home = os.path.join(directory, "codex-home")
    os.makedirs(home, exist_ok=True)
    with open(os.path.join(home, "config.toml"), "w") as f:
        f.write('model = "%s"\n'
                'model_provider = "scripted"\n'
                'approval_policy = "never"\n'
                'sandbox_mode = "workspace-write"\n'
                'check_for_update_on_startup = false\n'
                '\n'
                '[model_providers.scripted]\n'
                'name = "scripted"\n'
                'base_url = "%s"\n'
                'wire_api = "responses"\n'
                'env_key = "FUSEBOX_SCRIPTED_MODEL_KEY"\n'
                'request_max_retries = 0\n'
                'stream_max_retries = 0\n' % (MODEL, model_url))
    return home


def codex_env(directory, codex_home_dir, exec_server_url):
    home = os.path.join(directory, "home")
    os.makedirs(home, exist_ok=True)
    env = {k: v for k, v in os.environ.items() if not k.lower().endswith("_proxy")}
    closed = "http://127.0.0.1:9"  # discard: nothing listens, nothing leaves
    env.update(HOME=home, CODEX_HOME=codex_home_dir, CODEX_EXEC_SERVER_URL=exec_server_url,
               FUSEBOX_SCRIPTED_MODEL_KEY="not-a-real-key", HTTP_PROXY=closed, HTTPS_PROXY=closed,
               ALL_PROXY=closed, http_proxy=closed, https_proxy=closed, all_proxy=closed,
               NO_PROXY="127.0.0.1,localhost", no_proxy="127.0.0.1,localhost", RUST_LOG="error")
    env.pop("OPENAI_API_KEY", None)
    return env


def run_codex_exec(codex, cwd, env, prompt, timeout=300):
    """`codex exec --json` in CWD; returns (returncode, events, stderr)."""
    p = subprocess.run([codex, "exec", "--json", "--skip-git-repo-check", "--sandbox", "workspace-write", prompt],
                       cwd=cwd, env=env, stdin=subprocess.DEVNULL, capture_output=True, text=True,
                       timeout=timeout)
    return p.returncode, json_events(p.stdout), p.stderr


def agent_messages(events):
    """The texts of the agent's messages among codex exec's --json EVENTS."""
    return [e["item"]["text"] for e in events
            if e.get("type") == "item.completed" and e.get("item", {}).get("type") == "agent_message"]


def host_text(path):
    """PATH's text as the host has it, or the error reading it gave."""
    try:
        with open(path) as f:
            return f.read()
    except OSError as e:
        return repr(e)


def json_events(text):
    """The JSON lines of `codex exec --json`'s output (others skipped)."""
    events = []
    for line in text.splitlines():
        try:
            events.append(json.loads(line))
        except ValueError:
            pass
    return events


class LoggingProxy:
    """ws://127.0.0.1:PORT relaying each connection to UPSTREAM; every
    message is appended to .messages as (direction, parsed JSON), direction
    ">" for the client's and "<" for the server's.  Runs in its own thread
    with its own event loop."""

    def __init__(self, upstream):
        import websockets  # Debian's python3-websockets

        self.upstream = upstream
        self.messages = []
        self.lock = threading.Lock()
        self.ready = threading.Event()
        self.websockets = websockets
        self.thread = threading.Thread(target=self._run, daemon=True)
        self.thread.start()
        self.ready.wait(30)

    def _record(self, direction, text):
        if isinstance(text, bytes):
            text = text.decode("utf-8", "replace")
        try:
            m = json.loads(text)
        except ValueError:
            m = text
        with self.lock:
            self.messages.append((direction, m))

    async def _handler(self, ws, path=None):
        async with self.websockets.connect(self.upstream, max_size=None) as up:
            async def pump(src, dst, direction):
                async for m in src:
                    self._record(direction, m)
                    await dst.send(m)

            await asyncio.gather(pump(ws, up, ">"), pump(up, ws, "<"), return_exceptions=True)

    def _run(self):
        async def main():
            self.stop_event = asyncio.Event()
            async with self.websockets.serve(self._handler, "127.0.0.1", 0, max_size=None) as server:
                self.url = "ws://127.0.0.1:%d" % server.sockets[0].getsockname()[1]
                self.ready.set()
                await self.stop_event.wait()

        self.loop = asyncio.new_event_loop()
        self.loop.run_until_complete(main())

    def requests(self, method=None):
        with self.lock:
            return [m for d, m in self.messages
                    if d == ">" and isinstance(m, dict) and (method is None or m.get("method") == method)]

    def stop(self):
        self.loop.call_soon_threadsafe(self.stop_event.set)
        self.thread.join(30)


def start_server(argv, env, log_path):
    """Start a server that prints its ws:// URL as its first line (fusebox
    serve, codex exec-server), its stderr into LOG_PATH; returns (process,
    url).  The rest of its stdout is drained, so that it never blocks."""
    log = open(log_path, "w")
    p = subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=log, env=env, text=True)
    log.close()
    line = p.stdout.readline().strip()
    if not line.startswith("ws://"):
        p.kill()
        p.wait()
        with open(log_path) as f:
            raise RuntimeError("%s printed no ws:// URL but %r; stderr: %s" % (argv[0], line, f.read()))
    threading.Thread(target=p.stdout.read, daemon=True).start()
    return p, line


def stop_server(p):
    """SIGTERM, then the exit status (SIGKILL after a minute)."""
    p.terminate()
    try:
        return p.wait(60)
    except subprocess.TimeoutExpired:
        p.kill()
        return p.wait()
