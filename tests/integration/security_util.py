"""What the adversarial tests written in Python share.

- serve: test-security-serve.py as a module, for its servers (Server: a real
  `fusebox serve` with its state in a temporary directory) and its clients
  (Client, start_client, ok): python3-websockets; without it, loading it
  exits 77 (1 with FUSEBOX_TESTS_MUST_RUN=1).
- run(tests, prefix): runs the async tests named on the command line (all
  without), each in a temporary directory of its own, reports each (ok, SKIP
  when it returns "skip", FAIL with the last server it started) and exits
  with 0, 1 or, when one skipped under FUSEBOX_TESTS_MUST_RUN=1, 1.
"""
import asyncio
import importlib.util
import os
import shutil
import tempfile

import runner_util

_spec = importlib.util.spec_from_file_location(
    "security_serve", os.path.join(os.path.dirname(os.path.abspath(__file__)), "test-security-serve.py"))
serve = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(serve)


def run(tests, prefix):
    """TESTS: (name, async function of a directory) pairs."""
    tmp = tempfile.mkdtemp(prefix=prefix)
    try:
        passed, failed, skipped = asyncio.run(runner_util.run_named(
            tests, lambda name, t: t(tempfile.mkdtemp(prefix=name + "-", dir=tmp)),
            lambda: "the last server it started: %s" % serve.Server.last_command))
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    runner_util.finish(passed, failed, skipped)
