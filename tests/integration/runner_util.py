"""How every Python test program here runs its tests and ends.

- run_named(tests, call, reproduce): runs the tests named on the command
  line (all without), each through `await call(test)`, and reports each: ok,
  SKIP when it returns "skip", FAIL with the exception and reproduce(), a
  line that says how to reproduce it.  Returns (passed, failed, skipped).
- finish(passed, failed, skipped): prints the counts and exits 0, or 1 when
  one failed or, under FUSEBOX_TESTS_MUST_RUN=1, one skipped.
"""
import os
import sys


async def run_named(tests, call, reproduce):
    only = sys.argv[1:]
    passed = failed = skipped = 0
    for name, t in tests:
        if only and name not in only:
            continue
        try:
            if await call(name, t) == "skip":
                skipped += 1
                print("SKIP", name)
            else:
                passed += 1
                print("ok", name)
        except Exception as e:  # noqa: BLE001 - report and go on
            failed += 1
            print("FAIL %s: %r\n  %s" % (name, e, reproduce()))
    return passed, failed, skipped


def finish(passed, failed, skipped):
    print("%d passed, %d failed, %d skipped" % (passed, failed, skipped))
    if skipped and os.environ.get("FUSEBOX_TESTS_MUST_RUN") == "1":
        sys.exit(1)
    sys.exit(1 if failed else 0)
