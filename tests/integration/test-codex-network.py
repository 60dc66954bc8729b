#!/usr/bin/env python3
"""The real Codex CLI inside `fusebox run`, its model reachable only through
the network proxy.

`codex exec` (the version tools/codex.sh pins) runs in a sandbox whose
policy's network is an allowlist naming one host, model.test (and
127.0.0.1 at its port: the stand-in is on the host's loopback).  The
scripted stand-in for the model (codex_util.py) listens on the host's
127.0.0.1; Codex reaches it as http://model.test:PORT through the proxy,
which resolves model.test with --resolve (never the machine's resolver).
The model makes Codex, one tool call at a time:

  1. write a file into the workspace (it must land on the host);
  2. curl a name that is not on the list (refused, with the entry's why in
     curl's output and in the log).

Whatever else Codex tries to reach (its update checks, its telemetry) is
refused and logged, and nothing leaves loopback: a refused name is never
resolved.

Exit status: 0 passed, 1 failed, 77 node, curl or the pinned Codex is
missing (unless FUSEBOX_TESTS_MUST_RUN=1: then 1).
"""
import json
import os
import shutil
import subprocess
import sys
import tempfile

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import codex_util as cu  # noqa: E402


def main():
    codex, version, fusebox = cu.prerequisites("run", "curl", "")
    # not under /tmp, which the policy makes private
    tmp = tempfile.mkdtemp(prefix="fusebox-codex-network-", dir="/var/tmp")
    model = None
    failures = []
    try:
        ws = os.path.join(tmp, "ws")
        os.makedirs(ws)
        steps = [
            [cu.shell("c-write", "echo made by the agent > made.txt; cat made.txt")],
            [cu.shell("c-curl", "curl -sS http://other.test/; echo curl-exit=$?")],
            [cu.message("all done")],
        ]
        model = cu.ScriptedModel(steps)
        port = int(model.url.split(":")[2].split("/")[0])
        home = cu.codex_home(tmp, "http://model.test:%d/v1" % port)
        policy = os.path.join(tmp, "policy.json")
        with open(policy, "w") as f:
            json.dump({"version": 1,
                       "rules": [{"path": "/", "access": "read", "why": "system files and the pinned Codex"},
                                 {"path": "/tmp", "access": "write", "source": "private", "why": "a private /tmp"},
                                 {"path": tmp, "access": "write", "why": "the workspace, HOME and CODEX_HOME"}],
                       "network": {"allow": [
                           {"host": "model.test", "port": port, "why": "the agent's model"},
                           {"cidr": "127.0.0.1", "port": port, "why": "the stand-in model is on the host's loopback"},
                       ]}}, f)
        run_dir = os.path.join(tmp, "run")
        env = {k: v for k, v in os.environ.items() if not k.lower().endswith("_proxy")}
        env.pop("OPENAI_API_KEY", None)
        argv = [fusebox, "run", "--policy", policy, "--run-dir", run_dir, "--resolve", "model.test:127.0.0.1",
                "--setenv", "HOME", tmp, "--setenv", "CODEX_HOME", home,
                "--setenv", "FUSEBOX_SCRIPTED_MODEL_KEY", "not-a-real-key", "--setenv", "RUST_LOG", "error", "--",
                codex, "exec", "--json", "--skip-git-repo-check", "--dangerously-bypass-approvals-and-sandbox",
                "Work on this repository."]
        p = subprocess.run(argv, cwd=ws, env=env, stdin=subprocess.DEVNULL, capture_output=True, text=True,
                           timeout=300)
        events = cu.json_events(p.stdout)
        outs = model.outputs()
        reproduce = "cd %s && %s (a scripted model at %s)" % (ws, " ".join(argv), model.url)

        def check(cond, what):
            if not cond:
                failures.append(what)

        check(p.returncode == 0, "fusebox run -- codex exec exited %d; stderr:\n%s" % (p.returncode, p.stderr[-4000:]))
        messages = cu.agent_messages(events)
        check(messages and messages[-1] == "all done", "the agent did not finish: %s" % messages)
        # 1. The workspace holds what the agent's command wrote.
        o = outs.get("c-write", "")
        check("made by the agent" in o, "c-write: %r" % o)
        content = cu.host_text(os.path.join(ws, "made.txt"))
        check(content == "made by the agent\n", "made.txt on the host: %r" % content)
        # 2. The name not on the list: refused, with the why.
        o = outs.get("c-curl", "")
        check("refused by the network policy" in o and "no network entry allows this host and port" in o,
              "c-curl: %r" % o)

        try:
            with open(os.path.join(run_dir, "access.jsonl")) as f:
                records = [json.loads(line) for line in f if line.strip()]
        except OSError as e:
            records = []
            check(False, "the run's access log: %s" % e)
        net = [r for r in records if r.get("op") == "connect"]
        model_conns = [r for r in net if r.get("host") == "model.test"]
        check(model_conns and all(r["decision"] == "allow" and r["errno"] == 0 and r["address"] == "127.0.0.1"
                                  for r in model_conns),
              "the model's connections in the log: %s" % model_conns)
        check(len([r for r in records if r.get("op") == "disconnect" and r.get("host") == "model.test"]) ==
              len(model_conns), "a model connection without its disconnect record")
        other = [r for r in net if r.get("host") == "other.test"]
        check(len(other) == 1 and other[0]["decision"] == "deny" and other[0]["rule"] == "default" and
              other[0]["address"] is None, "the refused curl in the log: %s" % other)
        # everything else Codex tried was refused, and never resolved
        check(all(r["decision"] == "deny" and r["address"] is None for r in net
                  if r.get("host") not in ("model.test",)), "a connection beyond the list: %s" % net)
        if failures:
            print("FAIL with Codex %s:\n  %s\nreproduce:\n  %s" % (version, "\n  ".join(failures), reproduce))
            return 1
        print("ok: Codex %s in fusebox run reached its model through the proxy (%d connections refused)" %
              (version, len([r for r in net if r["decision"] == "deny"])))
        return 0
    finally:
        if model is not None:
            model.stop()
        shutil.rmtree(tmp, ignore_errors=True)


if __name__ == "__main__":
    sys.exit(main())
