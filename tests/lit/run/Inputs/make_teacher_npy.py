#!/usr/bin/env python3
"""Writes a learnable classification task as .npy files, without NumPy.

Inputs x ~ normal(0, 1) of shape [N, D] (float32); labels y (int32) are the
argmax of a fixed random linear teacher W x, W of shape [C, D]. The task is
linearly separable, so a small MLP can fit it to a low loss.

usage: make_teacher_npy.py OUT_X.npy OUT_Y.npy N D C [SEED [SKIP]]

SKIP draws and drops that many samples first: with the same SEED, a
held-out set of the same teacher.
"""
import random
import struct
import sys


def write_npy(path, descr, shape, fmt, values):
    header = "{'descr': '%s', 'fortran_order': False, 'shape': (%s), }" % (
        descr, ", ".join("%d" % s for s in shape) + ("," if len(shape) == 1 else ""))
    # Pad so that the data starts at a multiple of 64 bytes, as NumPy does.
    total = 10 + len(header) + 1
    header += " " * ((64 - total % 64) % 64) + "\n"
    with open(path, "wb") as f:
        f.write(b"\x93NUMPY\x01\x00")
        f.write(struct.pack("<H", len(header)))
        f.write(header.encode("latin1"))
        f.write(struct.pack("<%d%s" % (len(values), fmt), *values))


def main():
    out_x, out_y = sys.argv[1], sys.argv[2]
    n, d, c = (int(a) for a in sys.argv[3:6])
    rng = random.Random(int(sys.argv[6]) if len(sys.argv) > 6 else 1)
    teacher = [[rng.gauss(0, 1) for _ in range(d)] for _ in range(c)]
    skip = int(sys.argv[7]) if len(sys.argv) > 7 else 0
    xs, ys = [], []
    for _ in range(skip):
        [rng.gauss(0, 1) for _ in range(d)]
    for _ in range(n):
        x = [rng.gauss(0, 1) for _ in range(d)]
        scores = [sum(w * v for w, v in zip(row, x)) for row in teacher]
        xs.extend(x)
        ys.append(max(range(c), key=lambda k: scores[k]))
    write_npy(out_x, "<f4", (n, d), "f", xs)
    write_npy(out_y, "<i4", (n,), "i", ys)


if __name__ == "__main__":
    main()
