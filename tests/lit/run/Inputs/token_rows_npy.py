#!/usr/bin/env python3
"""token_rows_npy.py TEXT ROWS T TOKENS.npy TARGETS.npy: the first ROWS
windows of T + 1 bytes of TEXT (one every T bytes) as int32 .npy arrays of
tokens [ROWS, T] and next tokens [ROWS, T], written without NumPy."""
import sys

from make_teacher_npy import write_npy  # beside this file


def main(text, rows, t, tokens_path, targets_path):
    data = open(text, "rb").read()
    rows, t = int(rows), int(t)
    windows = [data[r * t:r * t + t + 1] for r in range(rows)]
    for path, part in ((tokens_path, slice(0, t)), (targets_path, slice(1, t + 1))):
        write_npy(path, "<i4", (rows, t), "i", [b for w in windows for b in w[part]])


if __name__ == "__main__":
    main(*sys.argv[1:])
