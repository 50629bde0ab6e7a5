#!/usr/bin/env python3
"""token_rows_npy.py TEXT ROWS T TOKENS.npy TARGETS.npy: the first ROWS
windows of T + 1 bytes of TEXT (one every T bytes) as int32 .npy arrays of
tokens [ROWS, T] and next tokens [ROWS, T], written without NumPy."""
import struct
import sys


def write_npy(path, rows):
    header = "{'descr': '<i4', 'fortran_order': False, 'shape': (%d, %d), }" % (
        len(rows), len(rows[0]))
    header += " " * (63 - (10 + len(header)) % 64) + "\n"  # 64-byte aligned
    with open(path, "wb") as f:
        f.write(b"\x93NUMPY\x01\x00" + struct.pack("<H", len(header)))
        f.write(header.encode("latin1"))
        for row in rows:
            f.write(struct.pack("<%di" % len(row), *row))


def main(text, rows, t, tokens_path, targets_path):
    data = open(text, "rb").read()
    rows, t = int(rows), int(t)
    windows = [data[r * t:r * t + t + 1] for r in range(rows)]
    write_npy(tokens_path, [list(w[:t]) for w in windows])
    write_npy(targets_path, [list(w[1:]) for w in windows])


if __name__ == "__main__":
    main(*sys.argv[1:])
