#!/usr/bin/env python3
"""An independent reference for batch_norm (Ioffe and Szegedy, 2015, with
PyTorch's running statistics): Inputs/bn_cnn.mg written in NumPy (float64)
with its backward by hand, checked against mgc on the same weights and
batch.

  training    y = (x - mu_B) / sqrt(var_B + eps) * gamma + beta per channel,
              mu_B, var_B (biased) over the batch and the pixels; the
              running statistics become (1 - m) r + m s, the variance
              unbiased by n / (n - 1)
  evaluation  the same y with the running statistics

mgc's side: P0 the initial parameters, P1 those after one SGD step at
learning rate LR on (X, Y), LOG that step's --log-json (the loss at P0);
EVAL the output of `mgc eval` of the checkpoint CKPT (trained some steps)
on the same batch (evaluation mode: the running statistics of CKPT).
Checked: the training loss, every gradient ((P0 - P1) / LR), the four
buffers in P1, the evaluation loss and accuracy of CKPT; and the reference's own
backward against finite differences.

usage: bn_reference.py P0 P1 LOG CKPT EVAL X.npy Y.npy --lr LR [--momentum M]
Exit status 0 when everything agrees, 1 otherwise (the line says what).
"""
import argparse
import json
import os
import re
import sys

try:
    import numpy as np
except ImportError:  # the test runner installs it; elsewhere say so
    print("bn reference: skipped (numpy is not installed)")
    sys.exit(0)

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from cnn_reference import conv3x3, conv3x3_back, maxpool2, maxpool2_back  # noqa: E402
from reference_common import check_backward, compare_gradients, read_safetensors  # noqa: E402

EPS = 1e-5


def batch_norm(x, g, b, mean=None, var=None):
    """Training mode when mean and var are None; returns y, the cache and
    the batch statistics."""
    axes = (0, 2, 3)
    if mean is None:
        mean, var = x.mean(axis=axes), x.var(axis=axes)
    shape = (1, -1, 1, 1)
    rstd = 1.0 / np.sqrt(var + EPS)
    xhat = (x - mean.reshape(shape)) * rstd.reshape(shape)
    return xhat * g.reshape(shape) + b.reshape(shape), (xhat, g, rstd), (mean, var)


def batch_norm_back(dy, cache):
    xhat, g, rstd = cache
    axes = (0, 2, 3)
    dg, db = (dy * xhat).sum(axis=axes), dy.sum(axis=axes)
    gy = dy * g.reshape(1, -1, 1, 1)
    dx = rstd.reshape(1, -1, 1, 1) * (
        gy - gy.mean(axis=axes, keepdims=True) - xhat * (gy * xhat).mean(axis=axes, keepdims=True))
    return dx, dg, db


def conv(x, w):
    return conv3x3(x, w, np.zeros((w.shape[0], 1, 1)))


class BnCnn:
    def __init__(self, params):
        self.p = params

    def loss(self, x, y, train=True, want_grads=False):
        p = self.p
        stats = {}

        def bn(h, k):
            if train:
                out, cache, stats[k] = batch_norm(h, p["g" + k], p["b" + k])
            else:
                out, cache, _ = batch_norm(h, p["g" + k], p["b" + k], p["m" + k], p["v" + k])
            return out, cache

        h1, c1 = conv(x, p["w1"])
        n1, cn1 = bn(h1, "1")
        a1 = np.maximum(n1, 0)
        m, cm = maxpool2(a1)
        h2, c2 = conv(m, p["w2"])
        n2, cn2 = bn(h2, "2")
        a2 = np.maximum(n2, 0)
        gp = a2.mean(axis=(2, 3))
        logits = gp @ p["w_out"] + p["b_out"]
        z = logits - logits.max(axis=-1, keepdims=True)
        logp = z - np.log(np.exp(z).sum(axis=-1, keepdims=True))
        loss = -np.mean(logp[np.arange(len(y)), y])
        accuracy = np.mean(logits.argmax(axis=-1) == y)
        if not want_grads:
            return loss, accuracy, stats, None
        grads = {}
        d = np.exp(logp)
        d[np.arange(len(y)), y] -= 1
        d /= len(y)
        grads["w_out"], grads["b_out"] = gp.T @ d, d.sum(axis=0)
        da2 = np.broadcast_to((d @ p["w_out"].T)[:, :, None, None] / (a2.shape[2] * a2.shape[3]), a2.shape)
        dh2, grads["g2"], grads["b2"] = batch_norm_back(da2 * (n2 > 0), cn2)
        dm, grads["w2"], _ = conv3x3_back(dh2, c2)
        dh1, grads["g1"], grads["b1"] = batch_norm_back(maxpool2_back(dm, cm) * (n1 > 0), cn1)
        _, grads["w1"], _ = conv3x3_back(dh1, c1)
        return loss, accuracy, stats, grads


def main():
    ap = argparse.ArgumentParser()
    for name in ("p0", "p1", "log", "ckpt", "eval", "x", "y"):
        ap.add_argument(name)
    ap.add_argument("--lr", type=float, required=True)
    ap.add_argument("--momentum", type=float, default=0.1)
    ap.add_argument("--tolerance", type=float, default=1e-4)
    a = ap.parse_args()

    p0, p1 = read_safetensors(a.p0), read_safetensors(a.p1)
    params = {k: v for k, v in p0.items() if not k.startswith("opt.")}
    x, y = np.load(a.x).astype(np.float64), np.load(a.y)
    with open(a.log) as f:
        mgc_loss = json.loads(f.readline())["loss"]
    with open(a.eval) as f:
        found = re.search(r"loss ([0-9.eE+-]+), accuracy ([0-9.]+)", f.read())
    mgc_eval_loss, mgc_eval_acc = float(found.group(1)), float(found.group(2))

    model = BnCnn(params)
    loss, _, stats, grads = model.loss(x, y, want_grads=True)
    rng = np.random.default_rng(0)
    fd, fd_where = check_backward(params, lambda: model.loss(x, y)[0], grads, rng)
    worst, worst_name = compare_gradients(p0, p1, grads, a.lr)
    loss_err = abs(mgc_loss - loss) / abs(loss)

    # The running statistics after the step, as PyTorch moves them.
    n = x.shape[0] * x.shape[2] * x.shape[3]
    buf_err, buf_name = 0.0, ""
    for k, (mean, var) in stats.items():
        n_k = n // (1 if k == "1" else 4)  # after the 2x2 max pool
        want = {"m" + k: (1 - a.momentum) * p0["m" + k] + a.momentum * mean,
                "v" + k: (1 - a.momentum) * p0["v" + k] + a.momentum * var * n_k / (n_k - 1)}
        for name, w in want.items():
            err = np.abs(p1[name] - w).max()
            if err > buf_err:
                buf_err, buf_name = err, name

    # Evaluation mode on CKPT with its running statistics.
    after = {k: v for k, v in read_safetensors(a.ckpt).items() if not k.startswith("opt.")}
    eval_loss, eval_acc, _, _ = BnCnn(after).loss(x, y, train=False)
    eval_err = abs(mgc_eval_loss - eval_loss) / abs(eval_loss)

    ok = (fd < 1e-5 and loss_err < 1e-6 and worst < a.tolerance and buf_err < 1e-5
          and eval_err < 1e-5 and abs(mgc_eval_acc - eval_acc) < 1e-6)
    print(f"bn reference: loss mgc {mgc_loss:.9f} numpy {loss:.9f} ({loss_err:.2e}); "
          f"largest gradient difference {worst:.2e} ({worst_name}); running "
          f"statistics {buf_err:.2e} ({buf_name}); evaluation loss mgc "
          f"{mgc_eval_loss:.6f} numpy {eval_loss:.6f} ({eval_err:.2e}), accuracy "
          f"{mgc_eval_acc:.4f} and {eval_acc:.4f}; the reference's backward "
          f"against finite differences {fd:.2e} ({fd_where}): " + ("ok" if ok else "FAILED"))
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
