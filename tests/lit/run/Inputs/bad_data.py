#!/usr/bin/env python3
"""Writes data files with one bad value each, for the checks at start-up.

usage: bad_data.py OUT_DIR

  x.npy, y.npy         f32[64, 16] inputs and i32[64] labels in [0, 4)
  x_nan.npy            x with a NaN in row 37
  y_big.npy            y with the label 9 in row 50
  tokens.bin, bad.bin  u16 tokens in [0, 32), bad.bin with 40 at position 300
  rx.npy, ry.npy       f32[8, 3] inputs and targets for Inputs/ratio.mg
  rz.npy               all-zero targets: ratio.mg's loss is not finite on them
"""
import os
import struct
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from make_teacher_npy import write_npy  # noqa: E402


def main():
    out = sys.argv[1]
    x = [((i * 37) % 101) / 50.0 - 1.0 for i in range(64 * 16)]
    y = [i % 4 for i in range(64)]
    write_npy(os.path.join(out, "x.npy"), "<f4", (64, 16), "f", x)
    write_npy(os.path.join(out, "y.npy"), "<i4", (64,), "i", y)
    x_nan = list(x)
    x_nan[37 * 16 + 5] = float("nan")
    write_npy(os.path.join(out, "x_nan.npy"), "<f4", (64, 16), "f", x_nan)
    y_big = list(y)
    y_big[50] = 9
    write_npy(os.path.join(out, "y_big.npy"), "<i4", (64,), "i", y_big)
    tokens = [i % 32 for i in range(400)]
    with open(os.path.join(out, "tokens.bin"), "wb") as f:
        f.write(struct.pack("<400H", *tokens))
    tokens[300] = 40
    with open(os.path.join(out, "bad.bin"), "wb") as f:
        f.write(struct.pack("<400H", *tokens))
    write_npy(os.path.join(out, "rx.npy"), "<f4", (8, 3), "f", [0.5] * 24)
    write_npy(os.path.join(out, "ry.npy"), "<f4", (8, 3), "f", [1.0] * 24)
    write_npy(os.path.join(out, "rz.npy"), "<f4", (8, 3), "f", [0.0] * 24)


if __name__ == "__main__":
    main()
