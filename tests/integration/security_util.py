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
import sys
import tempfile

_spec = importlib.util.spec_from_file_location(
    "security_serve", os.path.join(os.path.dirname(os.path.abspath(__file__)), "test-security-serve.py"))
serve = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(serve)


async def _run_all(tests, tmp):
    only = sys.argv[1:]
    passed = failed = skipped = 0
    for name, t in tests:
        if only and name not in only:
            continue
        d = tempfile.mkdtemp(prefix=name + "-", dir=tmp)
        try:
            if await t(d) == "skip":
                skipped += 1
                print("SKIP", name)
            else:
                passed += 1
                print("ok", name)
        except Exception as e:  # noqa: BLE001 - report and go on
            failed += 1
            print("FAIL %s: %s\n  the last server it started: %s" % (name, e, serve.Server.last_command))
    return passed, failed, skipped


def run(tests, prefix):
    """TESTS: (name, async function of a directory) pairs."""
    tmp = tempfile.mkdtemp(prefix=prefix)
    try:
        passed, failed, skipped = asyncio.run(_run_all(tests, tmp))
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    print("%d passed, %d failed, %d skipped" % (passed, failed, skipped))
    if skipped and serve.MUST_RUN:
        sys.exit(1)
    sys.exit(1 if failed else 0)
