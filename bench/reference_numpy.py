#!/usr/bin/env python3
"""The MLP training step of samples/mlp.mg in NumPy, for comparison with
`mgc run` on the same machine (bench/train-cpu.sh runs both).

Same model (x @ w1 + b1 -> relu -> @ w2 + b2 -> relu -> @ w3 + b3,
cross-entropy on integer labels), same optimizer (AdamW, lr 1e-3,
betas 0.9/0.999, eps 1e-8, weight decay 0.01), float32, synthetic data
drawn fresh every step as mgc's synthetic source does.

Written as a NumPy user writes a step for speed: the batch, the gradients
and the optimizer's scratch arrays are allocated once and written in place
(`out=` and the in-place operators), so that a step allocates only the
small activations of the forward and backward. The same operations in the
same order as the plain form, so the same float32 results. Prints the
total and the median time of the steps after the first (untimed) one.

usage: reference_numpy.py [--steps N] [--B 64] [--D 784] [--H 1024] [--C 10]
"""
import argparse
import statistics
import time

import numpy as np


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--steps", type=int, default=100)
    p.add_argument("--B", type=int, default=64)
    p.add_argument("--D", type=int, default=784)
    p.add_argument("--H", type=int, default=1024)
    p.add_argument("--C", type=int, default=10)
    a = p.parse_args()
    rng = np.random.default_rng(0)
    f32 = np.float32
    params = {
        "w1": rng.normal(0, 0.02, (a.D, a.H)).astype(f32), "b1": np.zeros(a.H, f32),
        "w2": rng.normal(0, 0.02, (a.H, a.H)).astype(f32), "b2": np.zeros(a.H, f32),
        "w3": rng.normal(0, 0.02, (a.H, a.C)).astype(f32), "b3": np.zeros(a.C, f32),
    }
    m = {k: np.zeros_like(v) for k, v in params.items()}
    v = {k: np.zeros_like(v) for k, v in params.items()}
    g = {k: np.empty_like(v) for k, v in params.items()}
    num = {k: np.empty_like(v) for k, v in params.items()}
    den = {k: np.empty_like(v) for k, v in params.items()}
    lr, b1, b2, eps, wd = 1e-3, 0.9, 0.999, 1e-8, 0.01
    rows = np.arange(a.B)

    def step(t, x, y):
        P = params
        h1p = x @ P["w1"]; h1p += P["b1"]; h1 = np.maximum(h1p, 0)
        h2p = h1 @ P["w2"]; h2p += P["b2"]; h2 = np.maximum(h2p, 0)
        logits = h2 @ P["w3"]; logits += P["b3"]
        z = logits; z -= logits.max(axis=1, keepdims=True)
        e = np.exp(z); s = e.sum(axis=1, keepdims=True)
        loss = float(np.mean(np.log(s[:, 0]) - z[rows, y]))
        dl = e; dl /= s; dl[rows, y] -= 1; dl /= a.B
        np.matmul(h2.T, dl, out=g["w3"]); dl.sum(0, out=g["b3"])
        dh2 = dl @ P["w3"].T; dh2 *= h2p > 0
        np.matmul(h1.T, dh2, out=g["w2"]); dh2.sum(0, out=g["b2"])
        dh1 = dh2 @ P["w2"].T; dh1 *= h1p > 0
        np.matmul(x.T, dh1, out=g["w1"]); dh1.sum(0, out=g["b1"])
        c1, c2 = 1 - b1 ** t, 1 - b2 ** t
        for k in P:
            # m = b1 m + (1 - b1) g; v = b2 v + (1 - b2) g g;
            # p = p (1 - lr wd) - lr (m / c1) / (sqrt(v / c2) + eps)
            pk, gk, mk, vk, n, d = P[k], g[k], m[k], v[k], num[k], den[k]
            mk *= b1; np.multiply(gk, 1 - b1, out=n); mk += n
            vk *= b2; np.multiply(gk, 1 - b2, out=d); d *= gk; vk += d
            np.divide(vk, c2, out=d); np.sqrt(d, out=d); d += eps
            np.divide(mk, c1, out=n); n *= lr; n /= d
            pk *= 1 - lr * wd; pk -= n
        return loss

    x = np.empty((a.B, a.D), f32)

    def batch():
        rng.standard_normal(dtype=f32, out=x)
        return x, rng.integers(0, a.C, a.B).astype(np.int32)

    step(1, *batch())  # warm-up, not timed
    times = []
    for t in range(2, a.steps + 2):
        start = time.perf_counter()
        loss = step(t, *batch())
        times.append(time.perf_counter() - start)
    secs = sum(times)
    print("numpy %s MLP B=%d D=%d H=%d C=%d: %d steps in %.2fs, %.2f steps/s, "
          "%.0f samples/s, median step %.4f s, last loss %.4f" % (
              np.__version__, a.B, a.D, a.H, a.C, a.steps, secs, a.steps / secs,
              a.steps * a.B / secs, statistics.median(times), loss))


if __name__ == "__main__":
    main()
