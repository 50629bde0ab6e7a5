#!/usr/bin/env python3
"""An independent reference for samples/digits_cnn.mg: the network written
in NumPy (float64) from the definitions, with its backward written by hand,
and checked against mgc's loss and gradients on the same weights and batch.

  conv2d       cross-correlation of a zero-padded image (torch's conv2d):
               y[n, k] = sum_c,i,j xpad[n, c, oy + i, ox + j] * w[k, c, i, j]
  max_pool2d   2x2 windows, stride 2; the gradient goes to each window's
               maximum
  global pool  the mean over the 4x4 pixels

mgc's side: P0 holds the initial parameters, P1 those after one step of SGD
at learning rate LR on the batch (X, Y), so mgc's gradient is
(P0 - P1) / LR; LOG is that run's --log-json, whose first line holds the
loss at P0. The hand-written backward is checked against central finite
differences of the float64 forward on a few entries of every tensor.

usage: cnn_reference.py P0 P1 LOG X.npy Y.npy --lr LR
Exit status 0 when everything agrees, 1 otherwise (the line says what).
"""
import argparse
import json
import os
import sys

try:
    import numpy as np
except ImportError:  # the test runner installs it; elsewhere say so
    print("cnn reference: skipped (numpy is not installed)")
    sys.exit(0)

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from reference_common import check_backward, compare_gradients, read_safetensors  # noqa: E402


def conv3x3(x, w, b):
    """x[N, C, H, W], w[K, C, 3, 3], b[K, 1, 1], padding 1 -> [N, K, H, W]."""
    h, wd = x.shape[2:]
    xp = np.pad(x, ((0, 0), (0, 0), (1, 1), (1, 1)))
    y = np.zeros((x.shape[0], w.shape[0], h, wd))
    for i in range(3):
        for j in range(3):
            y += np.einsum("nchw,kc->nkhw", xp[:, :, i:i + h, j:j + wd], w[:, :, i, j])
    return y + b, (xp, w)


def conv3x3_back(dy, cache):
    xp, w = cache
    h, wd = dy.shape[2:]
    dxp = np.zeros_like(xp)
    dw = np.zeros_like(w)
    for i in range(3):
        for j in range(3):
            dw[:, :, i, j] = np.einsum("nkhw,nchw->kc", dy, xp[:, :, i:i + h, j:j + wd])
            dxp[:, :, i:i + h, j:j + wd] += np.einsum("nkhw,kc->nchw", dy, w[:, :, i, j])
    db = dy.sum(axis=(0, 2, 3))[:, None, None]
    return dxp[:, :, 1:-1, 1:-1], dw, db


def maxpool2(x):
    n, c, h, w = x.shape
    win = x.reshape(n, c, h // 2, 2, w // 2, 2).transpose(0, 1, 2, 4, 3, 5)
    win = win.reshape(n, c, h // 2, w // 2, 4)
    pick = win.argmax(axis=-1)  # the first maximum of each window
    return np.take_along_axis(win, pick[..., None], -1)[..., 0], (x.shape, pick)


def maxpool2_back(dy, cache):
    (n, c, h, w), pick = cache
    win = np.zeros((n, c, h // 2, w // 2, 4))
    np.put_along_axis(win, pick[..., None], dy[..., None], -1)
    win = win.reshape(n, c, h // 2, w // 2, 2, 2).transpose(0, 1, 2, 4, 3, 5)
    return win.reshape(n, c, h, w)


class Cnn:
    def __init__(self, params):
        self.p = params

    def loss(self, x, y, want_grads=False):
        p = self.p
        h1, c1 = conv3x3(x, p["w1"], p["b1"])
        a1 = np.maximum(h1, 0)
        h2, c2 = conv3x3(a1, p["w2"], p["b2"])
        a2 = np.maximum(h2, 0)
        m, cm = maxpool2(a2)
        h3, c3 = conv3x3(m, p["w3"], p["b3"])
        a3 = np.maximum(h3, 0)
        g = a3.mean(axis=(2, 3))
        logits = g @ p["w_out"] + p["b_out"]
        z = logits - logits.max(axis=-1, keepdims=True)
        logp = z - np.log(np.exp(z).sum(axis=-1, keepdims=True))
        loss = -np.mean(logp[np.arange(len(y)), y])
        if not want_grads:
            return loss, None
        grads = {}
        dlogits = np.exp(logp)
        dlogits[np.arange(len(y)), y] -= 1
        dlogits /= len(y)
        grads["w_out"] = g.T @ dlogits
        grads["b_out"] = dlogits.sum(axis=0)
        dg = dlogits @ p["w_out"].T
        da3 = np.broadcast_to(dg[:, :, None, None] / 16.0, a3.shape)
        dm, grads["w3"], grads["b3"] = conv3x3_back(da3 * (h3 > 0), c3)
        da2 = maxpool2_back(dm, cm)
        da1, grads["w2"], grads["b2"] = conv3x3_back(da2 * (h2 > 0), c2)
        _, grads["w1"], grads["b1"] = conv3x3_back(da1 * (h1 > 0), c1)
        return loss, grads


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("p0")
    ap.add_argument("p1")
    ap.add_argument("log")
    ap.add_argument("x")
    ap.add_argument("y")
    ap.add_argument("--lr", type=float, required=True)
    ap.add_argument("--tolerance", type=float, default=1e-4,
                    help="relative to each gradient's largest element")
    a = ap.parse_args()

    p0, p1 = read_safetensors(a.p0), read_safetensors(a.p1)
    params = {k: v for k, v in p0.items() if not k.startswith("opt.")}
    x, y = np.load(a.x).astype(np.float64), np.load(a.y)
    with open(a.log) as f:
        mgc_loss = json.loads(f.readline())["loss"]

    model = Cnn(params)
    loss, grads = model.loss(x, y, want_grads=True)
    # The backward is checked at a nearby point: at zero biases a blank
    # patch of a digit (many pixels are 0) sits exactly on ReLU's kink,
    # where finite differences see a slope of 1/2.
    rng = np.random.default_rng(0)
    near = Cnn({k: v + rng.normal(0, 0.05, v.shape) for k, v in params.items()})
    _, near_grads = near.loss(x, y, want_grads=True)
    fd, fd_where = check_backward(near.p, lambda: near.loss(x, y)[0],
                                  near_grads, rng)
    worst, worst_name = compare_gradients(p0, p1, grads, a.lr)
    loss_err = abs(mgc_loss - loss) / abs(loss)

    missing = sorted(set(params) - set(grads))
    ok = fd < 1e-5 and loss_err < 1e-6 and worst < a.tolerance and not missing
    print(f"cnn reference: {len(grads)} tensors; loss mgc {mgc_loss:.9f} "
          f"numpy {loss:.9f} (relative difference {loss_err:.2e}); largest "
          f"gradient difference {worst:.2e} ({worst_name}), relative to the "
          f"tensor's largest element; the reference's backward against "
          f"finite differences {fd:.2e} ({fd_where}): "
          + ("ok" if ok else "FAILED" + (f", no gradient for {missing}" if missing else "")))
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
