#!/usr/bin/env python3
"""Training steps of samples/gpt.mg and samples/mlp.mg written in JAX and
compiled by XLA for the CPU, for timing beside `mgc run` on the same machine
(bench/cpu-vs-references.sh runs both).

The same models and optimizer as the samples: GPT-2 (learned positions,
pre-norm layers, q/k/v matrices with biases on q and v, causal softmax
attention, tanh-GELU MLP, final layernorm, head tied to the token
embedding, mean cross-entropy) with AdamW (lr 6e-4, betas 0.9/0.95, eps
1e-8, weight decay 0.1); the MLP (784 -> 1024 -> 1024 -> 10, ReLU) with
AdamW (lr 1e-3, betas 0.9/0.999, weight decay 0.01). float32; the data is
drawn once (the step's time does not depend on its values). Prints the
median time of the steps after the first `--warmup`, in seconds.

The step is written as a JAX user writes it for speed: one jitted function
for the forward, backward and optimizer update, the batch passed as an
argument, the step count kept in the optimizer state, and the parameters
and optimizer state donated (`donate_argnums`), so that XLA updates them in
place instead of allocating and writing about 1.5 GB of new buffers every
step of GPT-2 124M.

usage: reference_jax.py gpt [--V 50304 --T 64 --D 768 --H 12 --L 12 --B 4]
       reference_jax.py mlp [--B 64 --D 784 --H 1024 --C 10]
       [--steps N] [--warmup W]
"""
import argparse
import functools
import statistics
import time

import jax
import jax.numpy as jnp


def adamw_init(params):
    zeros = lambda: jax.tree_util.tree_map(jnp.zeros_like, params)
    return zeros(), zeros(), jnp.zeros((), jnp.float32)


def adamw(params, grads, state, lr, b1, b2, wd, eps=1e-8):
    m, v, step = state
    step = step + 1
    m = jax.tree_util.tree_map(lambda m, g: b1 * m + (1 - b1) * g, m, grads)
    v = jax.tree_util.tree_map(lambda v, g: b2 * v + (1 - b2) * g * g, v, grads)
    c1, c2 = 1 - b1 ** step, 1 - b2 ** step
    params = jax.tree_util.tree_map(
        lambda p, m, v: p * (1 - lr * wd) - lr * (m / c1) / (jnp.sqrt(v / c2) + eps),
        params, m, v)
    return params, (m, v, step)


def layernorm(x, g, b, eps=1e-5):
    mu = x.mean(-1, keepdims=True)
    var = ((x - mu) ** 2).mean(-1, keepdims=True)
    return (x - mu) / jnp.sqrt(var + eps) * g + b


def gpt(a):
    key = jax.random.PRNGKey(0)
    normal = lambda shape, std: std * jax.random.normal(key, shape, jnp.float32)
    D, H, L = a.D, a.H, a.L
    layer = lambda: {
        "ln1_g": jnp.ones(D), "ln1_b": jnp.zeros(D), "ln2_g": jnp.ones(D), "ln2_b": jnp.zeros(D),
        "w_q": normal((D, D), 0.02), "b_q": jnp.zeros(D), "w_k": normal((D, D), 0.02),
        "w_v": normal((D, D), 0.02), "b_v": jnp.zeros(D), "w_proj": normal((D, D), 0.02),
        "b_proj": jnp.zeros(D), "w_fc": normal((D, 4 * D), 0.02), "b_fc": jnp.zeros(4 * D),
        "w_fc_proj": normal((4 * D, D), 0.02), "b_fc_proj": jnp.zeros(D)}
    params = {"wte": normal((a.V, D), 0.02), "wpe": normal((a.T, D), 0.01),
              "lnf_g": jnp.ones(D), "lnf_b": jnp.zeros(D),
              "layers": [layer() for _ in range(L)]}
    tokens = jax.random.randint(key, (a.B, a.T), 0, 256)
    targets = jax.random.randint(jax.random.PRNGKey(1), (a.B, a.T), 0, 256)
    mask = jnp.tril(jnp.ones((a.T, a.T), bool))

    def loss_fn(p, tokens, targets):
        x = p["wte"][tokens] + p["wpe"][jnp.arange(a.T)]
        for l in p["layers"]:
            h = layernorm(x, l["ln1_g"], l["ln1_b"])
            heads = lambda y: y.reshape(a.B, a.T, H, D // H).transpose(0, 2, 1, 3)
            q = heads(h @ l["w_q"] + l["b_q"])
            k = heads(h @ l["w_k"])
            v = heads(h @ l["w_v"] + l["b_v"])
            s = jnp.where(mask, q @ k.transpose(0, 1, 3, 2) / jnp.sqrt(D // H), -jnp.inf)
            y = (jax.nn.softmax(s, -1) @ v).transpose(0, 2, 1, 3).reshape(a.B, a.T, D)
            x = x + y @ l["w_proj"] + l["b_proj"]
            h = layernorm(x, l["ln2_g"], l["ln2_b"])
            x = x + jax.nn.gelu(h @ l["w_fc"] + l["b_fc"], approximate=True) @ l["w_fc_proj"] + l["b_fc_proj"]
        logits = layernorm(x, p["lnf_g"], p["lnf_b"]) @ p["wte"].T
        logp = jax.nn.log_softmax(logits, -1)
        return -jnp.take_along_axis(logp, targets[..., None], -1).mean()

    return params, loss_fn, (tokens, targets), dict(lr=6e-4, b1=0.9, b2=0.95, wd=0.1)


def mlp(a):
    key = jax.random.PRNGKey(0)
    normal = lambda shape: 0.02 * jax.random.normal(key, shape, jnp.float32)
    params = {"w1": normal((a.D, a.H)), "b1": jnp.zeros(a.H), "w2": normal((a.H, a.H)),
              "b2": jnp.zeros(a.H), "w3": normal((a.H, a.C)), "b3": jnp.zeros(a.C)}
    x = jax.random.normal(key, (a.B, a.D), jnp.float32)
    y = jax.random.randint(key, (a.B,), 0, a.C)

    def loss_fn(p, x, y):
        h = jax.nn.relu(x @ p["w1"] + p["b1"])
        h = jax.nn.relu(h @ p["w2"] + p["b2"])
        logp = jax.nn.log_softmax(h @ p["w3"] + p["b3"], -1)
        return -jnp.take_along_axis(logp, y[:, None], -1).mean()

    return params, loss_fn, (x, y), dict(lr=1e-3, b1=0.9, b2=0.999, wd=0.01)


def main():
    p = argparse.ArgumentParser()
    p.add_argument("model", choices=["gpt", "mlp"])
    p.add_argument("--steps", type=int, default=10)
    p.add_argument("--warmup", type=int, default=3)
    for name, default in [("V", 50304), ("T", 64), ("D", None), ("H", None),
                          ("L", 12), ("B", None), ("C", 10)]:
        p.add_argument("--" + name, type=int, default=default)
    a = p.parse_args()
    if a.model == "gpt":
        a.D, a.H, a.B = a.D or 768, a.H or 12, a.B or 4
        params, loss_fn, batch, opt = gpt(a)
    else:
        a.D, a.H, a.B = a.D or 784, a.H or 1024, a.B or 64
        params, loss_fn, batch, opt = mlp(a)
    state = adamw_init(params)

    @functools.partial(jax.jit, donate_argnums=(0, 1))
    def step(params, state, batch):
        loss, grads = jax.value_and_grad(loss_fn)(params, *batch)
        params, state = adamw(params, grads, state, **opt)
        return params, state, loss

    times = []
    for _ in range(a.steps):
        start = time.perf_counter()
        params, state, loss = jax.block_until_ready(step(params, state, batch))
        times.append(time.perf_counter() - start)
    print("jax %s: median step %.4f s over %d steps (first %.2f s, loss %.4f)" % (
        a.model, statistics.median(times[a.warmup:]), a.steps - a.warmup, times[0], float(loss)))


if __name__ == "__main__":
    main()
