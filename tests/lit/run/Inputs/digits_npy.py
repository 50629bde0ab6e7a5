"""Writes scikit-learn's 8x8 digits (shipped inside the package, no
download) as .npy arrays for samples/digits_cnn.mg: images f32[N, 1, 8, 8]
scaled to [0, 1] and labels i32[N], split by a fixed permutation into the
first 1437 rows for training and the last 360 held out.

usage: digits_npy.py OUTDIR
Writes OUTDIR/{train,test}_{x,y}.npy; prints "skipped" (and writes
nothing) where scikit-learn is not installed.
"""
import os
import sys

import numpy as np

try:
    from sklearn.datasets import load_digits
except ImportError:
    print("digits: skipped (scikit-learn is not installed)")
    sys.exit(0)

out = sys.argv[1]
digits = load_digits()
x = (digits.images / 16.0).astype(np.float32)[:, None, :, :]
y = digits.target.astype(np.int32)
order = np.random.default_rng(0).permutation(len(y))
x, y = x[order], y[order]
train = 1437
for name, rows in (("train", slice(0, train)), ("test", slice(train, None))):
    np.save(os.path.join(out, name + "_x.npy"), np.ascontiguousarray(x[rows]))
    np.save(os.path.join(out, name + "_y.npy"), np.ascontiguousarray(y[rows]))
print("digits: %d training and %d held-out images" % (train, len(y) - train))
