#!/usr/bin/env python3
"""The real Codex CLI, unmodified, drives `fusebox serve` end to end.

`codex exec` (the version tools/codex.sh pins) runs non-interactively in a
git repository with CODEX_EXEC_SERVER_URL pointing at `fusebox serve
--policy builtin:agent`; a scripted stand-in for the model (codex_util.py,
on loopback) makes it, one tool call at a time:

  1. run a shell command that prints and exits 3 (output and exit code must
     come back to the agent);
  2. apply a patch that adds a file (it must land on the host);
  3. read that file back with the next command;
  4. `git status` and `git log` (the repository is visible: builtin:agent);
  5. `git commit` (refused: .git is read-only under builtin:agent);
  6. write a file outside the workspace that the host lets root write (the
     policy reads it only: refused).

The scripted model receives each tool's output in its next request; the
test asserts on those outputs, on the host's files and repository, and on
the access log.  Nothing leaves loopback: the model is local and every
proxy variable points at a closed port.

Exit status: 0 passed, 1 failed, 77 node or the pinned Codex is missing
(unless FUSEBOX_TESTS_MUST_RUN=1: then 1).  A failure prints the commands
that reproduce it.
"""
import glob
import json
import os
import shutil
import subprocess
import sys
import tempfile

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import codex_util as cu  # noqa: E402


def main():
    codex, version, fusebox = cu.prerequisites("serve", "git", " (apt-get install git, or run tools/codex.sh)")

    tmp = tempfile.mkdtemp(prefix="fusebox-codex-agent-")
    # Outside the workspace, somewhere the policy reads but does not let
    # anyone write: not under /tmp, which builtin:agent makes private.
    outside_dir = tempfile.mkdtemp(prefix="fusebox-codex-outside-", dir="/var/tmp")
    model = server = None
    failures = []
    try:
        ws = os.path.join(tmp, "repo")
        os.makedirs(ws)
        git = ["git", "-C", ws, "-c", "user.name=fusebox test", "-c", "user.email=test@fusebox.invalid"]
        subprocess.run(git + ["init", "-q"], check=True)
        with open(os.path.join(ws, "README"), "w") as f:
            f.write("a repository for the agent\n")
        subprocess.run(git + ["add", "README"], check=True)
        subprocess.run(git + ["commit", "-q", "-m", "the first commit"], check=True)
        outside = os.path.join(outside_dir, "outside.txt")
        # The refused write's target exists and the host lets us write it.
        with open(outside, "w") as f:
            f.write("original\n")
        with open(outside) as f:
            assert f.read() == "original\n"

        state = os.path.join(tmp, "state")
        env = dict(os.environ, XDG_STATE_HOME=state, G_MESSAGES_DEBUG="fusebox")
        serve_argv = [fusebox, "serve", "--listen", "ws://127.0.0.1:0", "--policy", "builtin:agent",
                      "--workspace", ws]
        serve_log = os.path.join(tmp, "serve.log")
        server, url = cu.start_server(serve_argv, env, serve_log)

        steps = [
            [cu.shell("c-exit", "printf 'hello from the sandbox\\n'; exit 3")],
            [cu.apply_patch("p-add", "*** Begin Patch\n*** Add File: notes.txt\n+written by apply_patch\n"
                                     "*** End Patch\n")],
            [cu.shell("c-cat", "cat notes.txt")],
            [cu.shell("c-git", "git status --short; git log --oneline")],
            [cu.shell("c-commit", "git add notes.txt && git commit -q -m 'the agent commits'")],
            [cu.shell("c-outside", "echo changed > %s" % outside)],
            [cu.message("all done")],
        ]
        model = cu.ScriptedModel(steps)
        home = cu.codex_home(tmp, model.url)
        cenv = cu.codex_env(tmp, home, url)
        rc, events, stderr = cu.run_codex_exec(codex, ws, cenv, "Work on this repository.")
        outs = model.outputs()
        reproduce = ("XDG_STATE_HOME=%s %s\n  CODEX_HOME=%s CODEX_EXEC_SERVER_URL=<its URL> "
                     "FUSEBOX_SCRIPTED_MODEL_KEY=x %s exec --json --skip-git-repo-check 'Work on this repository.'"
                     " (in %s, with a scripted model at %s)" % (state, " ".join(serve_argv), home, codex, ws,
                                                              model.url))

        def check(cond, what):
            if not cond:
                failures.append(what)

        check(rc == 0, "codex exec exited %d; stderr:\n%s" % (rc, stderr[-4000:]))
        check("No usable execution environment" not in stderr + json.dumps(outs),
              "Codex found no usable execution environment (the handshake failed)")
        messages = cu.agent_messages(events)
        check(messages and messages[-1] == "all done", "the agent did not finish: %s" % messages)

        def out(call_id):
            o = outs.get(call_id)
            check(o is not None, "the model never received the output of %s" % call_id)
            return o or ""

        # 1. Output and exit code come back.
        o = out("c-exit")
        check("hello from the sandbox" in o and "Process exited with code 3" in o, "c-exit: %r" % o)
        # 2. The patch lands on the host.
        o = out("p-add")
        check("Success" in o and "notes.txt" in o, "p-add: %r" % o)
        content = cu.host_text(os.path.join(ws, "notes.txt"))
        check(content == "written by apply_patch\n", "notes.txt on the host: %r" % content)
        # 3. The next command reads it back.
        o = out("c-cat")
        check("written by apply_patch" in o and "Process exited with code 0" in o, "c-cat: %r" % o)
        # 4. The repository is there, read-only.
        o = out("c-git")
        check("?? notes.txt" in o and "the first commit" in o and "Process exited with code 0" in o,
              "c-git: %r" % o)
        # git status tried .git/index.lock, was refused and carried on: a
        # success, not a sandbox denial (the agent's event shows it ran).
        ran = [e["item"] for e in events if e.get("type") == "item.completed" and
               e.get("item", {}).get("type") == "command_execution" and "git status" in e["item"]["command"]]
        check(ran and ran[0].get("exit_code") == 0 and ran[0].get("status") == "completed",
              "git status is not reported as a completed command: %s" % ran)
        # 5. The commit is refused.
        o = out("c-commit")
        check("Read-only file system" in o and "index.lock" in o and "Process exited with code 0" not in o,
              "c-commit: %r" % o)
        log = subprocess.run(git + ["log", "--oneline"], capture_output=True, text=True).stdout.splitlines()
        check(len(log) == 1 and "the first commit" in log[0], "the host repository changed: %s" % log)
        check(not os.path.exists(os.path.join(ws, ".git", "index.lock")), "a .git/index.lock was left")
        # 6. The write outside the workspace is refused.
        o = out("c-outside")
        check("Read-only file system" in o and outside in o, "c-outside: %r" % o)
        with open(outside) as f:
            check(f.read() == "original\n", "%s was changed on the host" % outside)

        # Both refusals are in the access log, with their rule.
        runs = glob.glob(os.path.join(state, "fusebox", "runs", "*", "access.jsonl"))
        records = []
        for path in runs:
            with open(path) as f:
                records += [json.loads(line) for line in f if line.strip()]
        index_lock = os.path.join(ws, ".git", "index.lock")
        check(any(r.get("path") == index_lock and r.get("decision") == "readonly" and r.get("errno") == 30 and
                  r.get("rule") == "protected" for r in records),
              "no readonly record of %s in the access log" % index_lock)
        check(any(r.get("path") == outside and r.get("decision") == "readonly" and r.get("errno") == 30
                  for r in records), "no readonly record of %s in the access log" % outside)
        # The members Codex 0.171 adds are ignored, and said so.
        with open(serve_log) as f:
            debug = f.read()
        check("policyContext" in debug, "serve's debug log does not mention the ignored policyContext")
        if failures:
            print("FAIL with Codex %s:\n  %s\nreproduce:\n  %s" % (version, "\n  ".join(failures), reproduce))
            return 1
        print("ok: Codex %s ran %d tool calls through fusebox serve" % (version, len(outs)))
        return 0
    finally:
        if model is not None:
            model.stop()
        if server is not None:
            status = cu.stop_server(server)
            if status != 0:
                print("fusebox serve exited %s" % status)
        shutil.rmtree(tmp, ignore_errors=True)
        shutil.rmtree(outside_dir, ignore_errors=True)


if __name__ == "__main__":
    sys.exit(main())
