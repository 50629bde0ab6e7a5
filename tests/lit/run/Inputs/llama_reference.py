#!/usr/bin/env python3
"""An independent reference for samples/llama.mg: the LLaMA decoder written
in NumPy (float64) from the papers, with its backward written by hand, and
checked against mgc's loss and gradients on the same weights and batch.

  RMSNorm    Zhang and Sennrich, "Root Mean Square Layer Normalization", 2019
  RoPE       Su et al., "RoFormer", 2021, in the rotate-half layout of
             Hugging Face's LLaMA (the two halves of a head form the pairs)
  GQA        Ainslie et al., "GQA", 2023: query head h reads key/value head
             h // (H / Hkv) (repeat_interleave of the keys and values)
  SwiGLU     Shazeer, "GLU Variants Improve Transformer", 2020

mgc's side: P0 holds the initial parameters; P1 the parameters after one
step of SGD (no momentum, no weight decay, no clipping) at learning rate
LR on the batch (TOKENS, TARGETS), so mgc's gradient is (P0 - P1) / LR;
LOG is that run's --log-json, whose first line holds the loss at P0.

The hand-written backward is itself checked against central finite
differences of the float64 forward on a few entries of every tensor.

usage: llama_reference.py P0 P1 LOG TOKENS.npy TARGETS.npy --lr LR
       --heads H --kv-heads HKV [--theta 10000] [--eps 1e-5]
Exit status 0 when everything agrees, 1 otherwise (the line says what).
"""
import argparse
import json
import os
import sys

try:
    import numpy as np
except ImportError:  # the test runner installs it; elsewhere say so
    print("llama reference: skipped (numpy is not installed)")
    sys.exit(0)

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from reference_common import check_backward, compare_gradients, read_safetensors  # noqa: E402


# ---- the pieces, forward and backward ------------------------------------

def rmsnorm(x, g, eps):
    rstd = 1.0 / np.sqrt(np.mean(x * x, axis=-1, keepdims=True) + eps)
    return x * rstd * g, (x, g, rstd)


def rmsnorm_back(dy, cache):
    x, g, rstd = cache
    xhat = x * rstd
    dg = np.sum(dy * xhat, axis=tuple(range(dy.ndim - 1)))
    gy = dy * g
    dx = rstd * (gy - xhat * np.mean(gy * xhat, axis=-1, keepdims=True))
    return dx, dg


def rope_angles(t, dh, theta):
    half = dh // 2
    inv_freq = theta ** (-np.arange(half) / half)
    a = np.arange(t)[:, None] * inv_freq[None, :]  # [T, Dh/2]
    return np.cos(a), np.sin(a)


def rope(x, cos, sin, sign=1.0):
    """Rotates the pairs (x_i, x_{i+Dh/2}) of x[..., T, Dh] by sign * angle;
    sign = -1 is the inverse rotation, which is the gradient."""
    half = x.shape[-1] // 2
    x1, x2 = x[..., :half], x[..., half:]
    s = sign * sin
    return np.concatenate([x1 * cos - x2 * s, x2 * cos + x1 * s], axis=-1)


def sigmoid(x):
    return 1.0 / (1.0 + np.exp(-x))


def heads(x, n):  # [B, T, n * Dh] -> [B, n, T, Dh]
    b, t, d = x.shape
    return x.reshape(b, t, n, d // n).transpose(0, 2, 1, 3)


def merge(x):  # [B, n, T, Dh] -> [B, T, n * Dh]
    b, n, t, dh = x.shape
    return x.transpose(0, 2, 1, 3).reshape(b, t, n * dh)


class Llama:
    def __init__(self, params, n_heads, n_kv_heads, theta, eps):
        self.p = params
        self.h, self.hkv, self.theta, self.eps = n_heads, n_kv_heads, theta, eps
        self.layers = sorted({int(k.split(".")[1]) for k in params
                              if k.startswith("blocks.")})

    def attention(self, x, pre):
        p, h, hkv = self.p, self.h, self.hkv
        group = h // hkv
        b, t, d = x.shape
        dh = d // h
        cos, sin = rope_angles(t, dh, self.theta)
        q = rope(heads(x @ p[pre + "w_q"], h), cos, sin)
        k = rope(heads(x @ p[pre + "w_k"], hkv), cos, sin)
        v = heads(x @ p[pre + "w_v"], hkv)
        ke, ve = np.repeat(k, group, axis=1), np.repeat(v, group, axis=1)
        s = q @ ke.transpose(0, 1, 3, 2) / np.sqrt(dh)
        s = np.where(np.tril(np.ones((t, t), bool)), s, -np.inf)  # causal
        pr = np.exp(s - s.max(axis=-1, keepdims=True))
        pr /= pr.sum(axis=-1, keepdims=True)
        y = merge(pr @ ve)
        cache = (x, q, ke, ve, pr, y, cos, sin, pre)
        return y @ p[pre + "w_o"], cache

    def attention_back(self, do, cache, grads):
        p, h, hkv = self.p, self.h, self.hkv
        x, q, ke, ve, pr, y, cos, sin, pre = cache
        b, t, d = x.shape
        dh, group = d // h, h // hkv
        grads[pre + "w_o"] = merge_rows(y).T @ merge_rows(do)
        dy = heads(do @ p[pre + "w_o"].T, h)
        dpr = dy @ ve.transpose(0, 1, 3, 2)
        dve = pr.transpose(0, 1, 3, 2) @ dy
        ds = pr * (dpr - np.sum(dpr * pr, axis=-1, keepdims=True)) / np.sqrt(dh)
        dq = ds @ ke
        dke = ds.transpose(0, 1, 3, 2) @ q
        # A key/value head's gradient sums its group of query heads.
        dk = dke.reshape(b, hkv, group, t, dh).sum(axis=2)
        dv = dve.reshape(b, hkv, group, t, dh).sum(axis=2)
        dq = merge(rope(dq, cos, sin, -1.0))
        dk = merge(rope(dk, cos, sin, -1.0))
        dv = merge(dv)
        dx = 0
        for name, dproj in (("w_q", dq), ("w_k", dk), ("w_v", dv)):
            grads[pre + name] = merge_rows(x).T @ merge_rows(dproj)
            dx = dx + dproj @ p[pre + name].T
        return dx

    def mlp(self, x, pre):
        p = self.p
        gate, up = x @ p[pre + "w_gate"], x @ p[pre + "w_up"]
        act = gate * sigmoid(gate)  # silu
        m = act * up
        return m @ p[pre + "w_down"], (x, gate, up, act, m, pre)

    def mlp_back(self, dout, cache, grads):
        p = self.p
        x, gate, up, act, m, pre = cache
        grads[pre + "w_down"] = merge_rows(m).T @ merge_rows(dout)
        dm = dout @ p[pre + "w_down"].T
        sg = sigmoid(gate)
        dgate = dm * up * sg * (1 + gate * (1 - sg))
        dup = dm * act
        grads[pre + "w_gate"] = merge_rows(x).T @ merge_rows(dgate)
        grads[pre + "w_up"] = merge_rows(x).T @ merge_rows(dup)
        return dgate @ p[pre + "w_gate"].T + dup @ p[pre + "w_up"].T

    def loss(self, tokens, targets, want_grads=False):
        p, eps = self.p, self.eps
        x = p["embed"][tokens]
        caches = []
        for l in self.layers:
            pre = f"blocks.{l}."
            a, c1 = rmsnorm(x, p[pre + "attn_norm"], eps)
            o, c2 = self.attention(a, pre + "attn.")
            x = x + o
            bn, c3 = rmsnorm(x, p[pre + "mlp_norm"], eps)
            o, c4 = self.mlp(bn, pre + "mlp.")
            x = x + o
            caches.append((pre, c1, c2, c3, c4))
        n, cn = rmsnorm(x, p["norm"], eps)
        logits = n @ p["lm_head"]
        z = logits - logits.max(axis=-1, keepdims=True)
        logp = z - np.log(np.sum(np.exp(z), axis=-1, keepdims=True))
        positions = tokens.size
        loss = -np.sum(np.take_along_axis(logp, targets[..., None], -1)) / positions
        if not want_grads:
            return loss, None
        grads = {}
        dlogits = np.exp(logp)
        np.put_along_axis(dlogits, targets[..., None],
                          np.take_along_axis(dlogits, targets[..., None], -1) - 1, -1)
        dlogits /= positions
        grads["lm_head"] = merge_rows(n).T @ merge_rows(dlogits)
        dx, grads["norm"] = rmsnorm_back(dlogits @ p["lm_head"].T, cn)
        for pre, c1, c2, c3, c4 in reversed(caches):
            dbn = self.mlp_back(dx, c4, grads)
            d, grads[pre + "mlp_norm"] = rmsnorm_back(dbn, c3)
            dx = dx + d
            da = self.attention_back(dx, c2, grads)
            d, grads[pre + "attn_norm"] = rmsnorm_back(da, c1)
            dx = dx + d
        demb = np.zeros_like(p["embed"])
        np.add.at(demb, tokens.reshape(-1), dx.reshape(-1, dx.shape[-1]))
        grads["embed"] = demb
        return loss, grads


def merge_rows(x):  # [..., n] -> [rows, n]
    return x.reshape(-1, x.shape[-1])


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("p0")
    ap.add_argument("p1")
    ap.add_argument("log")
    ap.add_argument("tokens")
    ap.add_argument("targets")
    ap.add_argument("--lr", type=float, required=True)
    ap.add_argument("--heads", type=int, required=True)
    ap.add_argument("--kv-heads", type=int, required=True)
    ap.add_argument("--theta", type=float, default=10000.0)
    ap.add_argument("--eps", type=float, default=1e-5)
    ap.add_argument("--tolerance", type=float, default=1e-4,
                    help="relative to each gradient's largest element")
    a = ap.parse_args()

    p0, p1 = read_safetensors(a.p0), read_safetensors(a.p1)
    params = {k: v for k, v in p0.items() if not k.startswith("opt.")}
    tokens, targets = np.load(a.tokens), np.load(a.targets)
    with open(a.log) as f:
        mgc_loss = json.loads(f.readline())["loss"]

    model = Llama(params, a.heads, a.kv_heads, a.theta, a.eps)
    loss, grads = model.loss(tokens, targets, want_grads=True)
    fd, fd_where = check_backward(
        model.p, lambda: model.loss(tokens, targets)[0], grads,
        np.random.default_rng(0))

    worst, worst_name = compare_gradients(p0, p1, grads, a.lr)
    loss_err = abs(mgc_loss - loss) / abs(loss)

    ok = fd < 1e-5 and loss_err < 1e-6 and worst < a.tolerance
    missing = sorted(set(params) - set(grads))
    ok = ok and not missing
    print(f"llama reference: {len(grads)} tensors; loss mgc {mgc_loss:.9f} "
          f"numpy {loss:.9f} (relative difference {loss_err:.2e}); largest "
          f"gradient difference {worst:.2e} ({worst_name}), relative to the "
          f"tensor's largest element; the reference's backward against "
          f"finite differences {fd:.2e} ({fd_where}): "
          + ("ok" if ok else "FAILED" + (f", no gradient for {missing}" if missing else "")))
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
