#!/usr/bin/env python3
"""fails-within.py SECONDS CMD...: runs CMD and checks that it fails (a
non-zero exit) within SECONDS; prints its stderr and then one line,
"failed with exit N within the bound", or says why not and exits 1. A
command still running at the bound is killed (so a hang fails the test
rather than the test run)."""
import subprocess, sys, time

bound = float(sys.argv[1])
start = time.monotonic()
try:
    p = subprocess.run(sys.argv[2:], stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, timeout=bound)
except subprocess.TimeoutExpired as e:
    sys.stdout.write((e.stderr or b"").decode(errors="replace"))
    print("still running after %g s: a hang" % bound)
    sys.exit(1)
sys.stdout.write(p.stderr.decode(errors="replace"))
if p.returncode == 0:
    print("succeeded, but a failure was expected")
    sys.exit(1)
print("failed with exit %d within the bound (%.0f s of %g)" % (p.returncode, time.monotonic() - start, bound))
