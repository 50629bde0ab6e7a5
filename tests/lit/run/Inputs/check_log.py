#!/usr/bin/env python3
"""Checks mgc run's --log-json files.

  check_log.py fields LOG FIRST LAST UNITS
      every line is a JSON object with step, loss, lr, grad_norm, time,
      step_time and UNITS_per_s, and h2d_bytes and d2h_bytes of 0 (the
      CPU backend: the host is the device); steps run FIRST..LAST in order.
  check_log.py same LOG_A LOG_B FIRST LAST
      the lines for steps FIRST..LAST agree exactly in step, loss, lr and
      grad_norm (timings differ from run to run).
  check_log.py below LOG VALUE
      the last loss is below VALUE and below the first loss.
"""
import json
import math
import sys


def load(path):
    with open(path) as f:
        return [json.loads(line) for line in f if line.strip()]


def fail(msg):
    print("FAIL: " + msg)
    sys.exit(1)


def main():
    mode = sys.argv[1]
    if mode == "fields":
        rows = load(sys.argv[2])
        first, last, units = int(sys.argv[3]), int(sys.argv[4]), sys.argv[5]
        steps = [r["step"] for r in rows]
        if steps != list(range(first, last + 1)):
            fail("steps %s, expected %d..%d" % (steps, first, last))
        for r in rows:
            for key in ("loss", "lr", "grad_norm", "time", "step_time", units + "_per_s"):
                if not isinstance(r.get(key), (int, float)) or not math.isfinite(r[key]):
                    fail("step %d: bad %s: %r" % (r["step"], key, r.get(key)))
            for key in ("h2d_bytes", "d2h_bytes"):
                if r.get(key) != 0:
                    fail("step %d: %s is %r, expected 0" % (r["step"], key, r.get(key)))
        print("OK %d lines" % len(rows))
    elif mode == "same":
        a, b = load(sys.argv[2]), load(sys.argv[3])
        first, last = int(sys.argv[4]), int(sys.argv[5])
        keys = ("step", "loss", "lr", "grad_norm")
        pick = lambda rows: [tuple(r[k] for k in keys) for r in rows if first <= r["step"] <= last]
        pa, pb = pick(a), pick(b)
        if len(pa) != last - first + 1 or pa != pb:
            fail("logs differ:\n%s\n%s" % (pa, pb))
        print("SAME %d steps" % len(pa))
    elif mode == "below":
        rows = load(sys.argv[2])
        value = float(sys.argv[3])
        first, final = rows[0]["loss"], rows[-1]["loss"]
        if not (final < value and final < first):
            fail("loss %.4f -> %.4f, expected below %g" % (first, final, value))
        print("LEARNED %.4f -> %.4f < %g" % (first, final, value))
    else:
        fail("unknown mode " + mode)


if __name__ == "__main__":
    main()
