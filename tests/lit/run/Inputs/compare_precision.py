#!/usr/bin/env python3
"""Compares the --log-json files of an f32 and a bf16 run of one model.

  compare_precision.py LOG_F32 LOG_BF16 TOLERANCE
      both runs have the same steps; at every step the bf16 loss is within
      TOLERANCE (relative) of the f32 loss; the bf16 loss falls (the last
      below the first); and the runs differ (the bf16 run is not f32).
  compare_precision.py dtypes CHECKPOINT
      prints the element type of every tensor of a safetensors checkpoint.
"""
import json
import struct
import sys


def load(path):
    with open(path) as f:
        return [json.loads(line) for line in f if line.strip()]


def fail(msg):
    print("FAIL: " + msg)
    sys.exit(1)


def dtypes(path):
    with open(path, "rb") as f:
        n = struct.unpack("<Q", f.read(8))[0]
        header = json.loads(f.read(n))
    kinds = sorted({v["dtype"] for k, v in header.items() if k != "__metadata__"})
    count = sum(1 for k in header if k != "__metadata__")
    print("TENSORS %d DTYPES %s" % (count, ",".join(kinds)))


def main():
    if sys.argv[1] == "dtypes":
        dtypes(sys.argv[2])
        return
    a, b, tol = load(sys.argv[1]), load(sys.argv[2]), float(sys.argv[3])
    if [r["step"] for r in a] != [r["step"] for r in b] or not a:
        fail("the runs have different steps")
    worst = 0.0
    for x, y in zip(a, b):
        d = abs(y["loss"] - x["loss"]) / abs(x["loss"])
        if d > tol:
            fail("step %d: f32 loss %.6g, bf16 loss %.6g (relative %.3g > %g)"
                 % (x["step"], x["loss"], y["loss"], d, tol))
        worst = max(worst, d)
    if not b[-1]["loss"] < b[0]["loss"]:
        fail("the bf16 loss does not fall: %.6g -> %.6g" % (b[0]["loss"], b[-1]["loss"]))
    if worst == 0:
        fail("the bf16 run equals the f32 run")
    print("CLOSE %d steps, bf16 loss %.4f -> %.4f, f32 %.4f -> %.4f, largest relative difference %.2g"
          % (len(a), b[0]["loss"], b[-1]["loss"], a[0]["loss"], a[-1]["loss"], worst))


if __name__ == "__main__":
    main()
