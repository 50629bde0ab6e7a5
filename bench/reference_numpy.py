#!/usr/bin/env python3
"""The MLP training step of samples/mlp.mg in NumPy, for comparison with
`mgc run` on the same machine (bench/train-cpu.sh runs both).

Same model (x @ w1 + b1 -> relu -> @ w2 + b2 -> relu -> @ w3 + b3,
cross-entropy on integer labels), same optimizer (AdamW, lr 1e-3,
betas 0.9/0.999, eps 1e-8, weight decay 0.01), float32, synthetic data
drawn fresh every step as mgc's synthetic source does.

usage: reference_numpy.py [--steps N] [--B 64] [--D 784] [--H 1024] [--C 10]
"""
import argparse
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
    lr, b1, b2, eps, wd = 1e-3, 0.9, 0.999, 1e-8, 0.01

    def step(t, x, y):
        P = params
        h1p = x @ P["w1"] + P["b1"]; h1 = np.maximum(h1p, 0)
        h2p = h1 @ P["w2"] + P["b2"]; h2 = np.maximum(h2p, 0)
        logits = h2 @ P["w3"] + P["b3"]
        z = logits - logits.max(axis=1, keepdims=True)
        e = np.exp(z); s = e.sum(axis=1, keepdims=True)
        loss = float(np.mean(np.log(s[:, 0]) - z[np.arange(a.B), y]))
        dl = e / s; dl[np.arange(a.B), y] -= 1; dl /= a.B
        g = {"w3": h2.T @ dl, "b3": dl.sum(0)}
        dh2 = (dl @ P["w3"].T) * (h2p > 0)
        g["w2"] = h1.T @ dh2; g["b2"] = dh2.sum(0)
        dh1 = (dh2 @ P["w2"].T) * (h1p > 0)
        g["w1"] = x.T @ dh1; g["b1"] = dh1.sum(0)
        for k in P:
            m[k] = b1 * m[k] + (1 - b1) * g[k]
            v[k] = b2 * v[k] + (1 - b2) * g[k] * g[k]
            mh = m[k] / (1 - b1 ** t); vh = v[k] / (1 - b2 ** t)
            P[k] = (P[k] * (1 - lr * wd) - lr * mh / (np.sqrt(vh) + eps)).astype(f32)
        return loss

    def batch():
        return (rng.standard_normal((a.B, a.D), dtype=f32),
                rng.integers(0, a.C, a.B).astype(np.int32))

    step(1, *batch())  # warm-up, not timed
    start = time.perf_counter()
    for t in range(2, a.steps + 2):
        loss = step(t, *batch())
    secs = time.perf_counter() - start
    print("numpy %s MLP B=%d D=%d H=%d C=%d: %d steps in %.2fs, %.2f steps/s, "
          "%.0f samples/s, last loss %.4f" % (
              np.__version__, a.B, a.D, a.H, a.C, a.steps, secs, a.steps / secs,
              a.steps * a.B / secs, loss))


if __name__ == "__main__":
    main()
