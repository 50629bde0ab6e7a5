"""What the NumPy references of tests/lit/run share: reading mgc's
checkpoints, checking a hand-written backward by finite differences, and
comparing it with mgc's gradient read from one SGD step."""
import json
import struct

import numpy as np


def read_safetensors(path):
    """The float32 tensors of a safetensors file, by name, as float64."""
    with open(path, "rb") as f:
        data = f.read()
    (n,) = struct.unpack_from("<Q", data, 0)
    header = json.loads(data[8:8 + n])
    out = {}
    for name, info in header.items():
        if name == "__metadata__" or info["dtype"] != "F32":
            continue
        begin, end = info["data_offsets"]
        raw = np.frombuffer(data[8 + n + begin:8 + n + end], dtype="<f4")
        out[name] = raw.reshape(info["shape"]).astype(np.float64)
    return out


def check_backward(params, loss, grads, rng, per_tensor=3, h=1e-5):
    """Central differences of the float64 forward `loss()` (of `params`,
    changed in place) on a few entries of each tensor: the largest relative
    error of the hand-written backward `grads`."""
    worst, where = 0.0, ""
    for name, g in grads.items():
        w = params[name]
        scale = max(np.abs(g).max(), 1e-12)
        for flat in rng.choice(w.size, size=min(per_tensor, w.size), replace=False):
            idx = np.unravel_index(flat, w.shape)
            old = w[idx]
            w[idx] = old + h
            up = loss()
            w[idx] = old - h
            down = loss()
            w[idx] = old
            err = abs((up - down) / (2 * h) - g[idx]) / scale
            if err > worst:
                worst, where = err, name
    return worst, where


def compare_gradients(p0, p1, grads, lr):
    """mgc's gradient is (P0 - P1) / lr after one SGD step: the largest
    difference from `grads`, relative to each tensor's largest element, and
    the tensor where it is."""
    worst, worst_name = 0.0, ""
    for name, g in grads.items():
        mgc_grad = (p0[name] - p1[name]) / lr
        err = np.abs(mgc_grad - g).max() / max(np.abs(g).max(), 1e-30)
        if err > worst:
            worst, worst_name = err, name
    return worst, worst_name
