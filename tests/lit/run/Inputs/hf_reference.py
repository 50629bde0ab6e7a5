#!/usr/bin/env python3
"""Hugging Face's side of the checkpoint tests (tests/lit/run/hf-*.test):
random GPT-2 and LLaMA checkpoints in the names and layouts transformers
writes, and transformers' own models (its Flax classes, which read
torch-format safetensors without torch) computing on them.

  make gpt2|llama DIR          a random tiny checkpoint: DIR/model.safetensors
                               (metadata "format": "pt") and DIR/config.json
  tokens FILE N                N random token ids (u16) below 250
  loss DIR TOKENS T B BATCHES  the mean loss over the first BATCHES batches of
                               B windows of T + 1 tokens (as mgc eval reads
                               --tokens), computed by transformers
  near LOSS_A LOSS_B TOL       |a - b| <= TOL * |b|; an mgc eval output line
                               "loss X" may stand for a number (FILE:eval)
  same-tensors A B [--zeroed NAME:BEGIN:END]...
                               every tensor of A is in B with the same bytes,
                               except the ranges named, which B holds as zeros
  same-logits A B TOKENS T TOL transformers' logits on A and on B agree to TOL
                               of their largest magnitude
"""
import json
import logging
import os
import re
import sys

import numpy as np
from safetensors.numpy import load_file, save_file

VOCAB = 250


def make(kind, folder):
    rng = np.random.default_rng(7 if kind == "gpt2" else 11)
    normal = lambda *shape, std=0.05: (std * rng.standard_normal(shape)).astype(np.float32)
    near_one = lambda n: (1 + 0.1 * rng.standard_normal(n)).astype(np.float32)
    t = {}
    if kind == "gpt2":
        D, L, P = 32, 2, 32
        config = dict(model_type="gpt2", architectures=["GPT2LMHeadModel"],
                      vocab_size=VOCAB, n_positions=P, n_embd=D, n_layer=L,
                      n_head=2, activation_function="gelu_new",
                      layer_norm_epsilon=1e-5)
        # The names of the published gpt2 file: no "transformer." prefix,
        # with the attention's mask buffers.
        t["wte.weight"] = normal(VOCAB, D, std=0.1)
        t["wpe.weight"] = normal(P, D, std=0.1)
        for i in range(L):
            p = f"h.{i}."
            t[p + "ln_1.weight"], t[p + "ln_1.bias"] = near_one(D), normal(D)
            t[p + "attn.c_attn.weight"] = normal(D, 3 * D, std=0.2)
            t[p + "attn.c_attn.bias"] = normal(3 * D, std=0.2)  # a key bias too
            t[p + "attn.c_proj.weight"], t[p + "attn.c_proj.bias"] = normal(D, D), normal(D)
            t[p + "ln_2.weight"], t[p + "ln_2.bias"] = near_one(D), normal(D)
            t[p + "mlp.c_fc.weight"], t[p + "mlp.c_fc.bias"] = normal(D, 4 * D), normal(4 * D)
            t[p + "mlp.c_proj.weight"], t[p + "mlp.c_proj.bias"] = normal(4 * D, D), normal(D)
            t[p + "attn.bias"] = np.tril(np.ones((1, 1, P, P), np.float32))
        t["ln_f.weight"], t["ln_f.bias"] = near_one(D), normal(D)
    else:
        D, H, Hkv, F, L = 32, 4, 2, 64, 2
        Dh = D // H
        config = dict(model_type="llama", architectures=["LlamaForCausalLM"],
                      vocab_size=VOCAB, hidden_size=D, intermediate_size=F,
                      num_hidden_layers=L, num_attention_heads=H,
                      num_key_value_heads=Hkv, max_position_embeddings=64,
                      rope_theta=10000.0, rms_norm_eps=1e-5, hidden_act="silu",
                      tie_word_embeddings=False)
        t["model.embed_tokens.weight"] = normal(VOCAB, D, std=0.5)
        for i in range(L):
            p = f"model.layers.{i}."
            t[p + "input_layernorm.weight"] = near_one(D)
            t[p + "self_attn.q_proj.weight"] = normal(H * Dh, D, std=0.3)
            t[p + "self_attn.k_proj.weight"] = normal(Hkv * Dh, D, std=0.3)
            t[p + "self_attn.v_proj.weight"] = normal(Hkv * Dh, D, std=0.2)
            t[p + "self_attn.o_proj.weight"] = normal(D, H * Dh, std=0.2)
            t[p + "post_attention_layernorm.weight"] = near_one(D)
            t[p + "mlp.gate_proj.weight"] = normal(F, D, std=0.2)
            t[p + "mlp.up_proj.weight"] = normal(F, D, std=0.2)
            t[p + "mlp.down_proj.weight"] = normal(D, F, std=0.2)
        t["model.norm.weight"] = near_one(D)
        t["lm_head.weight"] = normal(VOCAB, D, std=0.3)
    os.makedirs(folder, exist_ok=True)
    save_file(t, os.path.join(folder, "model.safetensors"), metadata={"format": "pt"})
    with open(os.path.join(folder, "config.json"), "w") as f:
        json.dump(config, f, indent=2)


class LoadReport(logging.Handler):
    """Collects transformers' warnings about weights it did not load."""

    def __init__(self):
        super().__init__(logging.WARNING)
        self.problems = []

    def emit(self, record):
        text = record.getMessage()
        # GPT-2's attention mask buffers (h.N.attn.bias) are not weights.
        unused = re.sub(r"\('h', '\d+', 'attn', 'bias'\)(, )?", "", text.split("\n")[0])
        if "not used" in text and unused.rstrip().endswith("{}"):
            return
        if "not initialized" in text or "not used" in text or "newly initialized" in text:
            self.problems.append(text)


def hf_model(folder):
    import transformers
    from transformers import FlaxAutoModelForCausalLM
    transformers.logging.set_verbosity_warning()
    report = LoadReport()
    transformers.logging.get_logger().addHandler(report)
    model = FlaxAutoModelForCausalLM.from_pretrained(folder, from_pt=True)
    transformers.logging.get_logger().removeHandler(report)
    if report.problems:
        sys.exit(f"transformers did not load every weight of {folder}:\n" + "\n".join(report.problems))
    return model


def windows(tokens_file, T, count):
    tokens = np.fromfile(tokens_file, dtype=np.uint16).astype(np.int64)
    starts = [k * T for k in range(count)]
    x = np.stack([tokens[s:s + T] for s in starts])
    y = np.stack([tokens[s + 1:s + T + 1] for s in starts])
    return x.astype(np.int32), y


def logits_of(model, x):
    return np.asarray(model(input_ids=x, position_ids=np.broadcast_to(np.arange(x.shape[1]), x.shape)).logits, np.float64)


def loss(folder, tokens_file, T, B, batches):
    model = hf_model(folder)
    x, y = windows(tokens_file, T, B * batches)
    logits = logits_of(model, x)
    logp = logits - logits.max(-1, keepdims=True)
    logp -= np.log(np.exp(logp).sum(-1, keepdims=True))
    nll = -np.take_along_axis(logp, y[..., None], -1)[..., 0]
    per_batch = nll.reshape(batches, B * T).mean(-1)
    print(repr(float(per_batch.mean())))


def number(text):
    if ":" in text and os.path.exists(text.split(":")[0]):
        for line in open(text.split(":")[0]):
            if line.startswith("loss "):
                return float(line.split()[1].rstrip(","))
        sys.exit(f"no 'loss' line in {text}")
    if os.path.exists(text):
        return float(open(text).read().split()[0])
    return float(text)


def near(a, b, tol):
    a, b, tol = number(a), number(b), float(tol)
    ok = abs(a - b) <= tol * abs(b)
    print(f"{'near' if ok else 'FAR'}: {a!r} against {b!r} (relative {abs(a - b) / abs(b):.3g}, allowed {tol:g})")
    sys.exit(0 if ok else 1)


def same_tensors(a, b, zeroed):
    ta, tb = load_file(os.path.join(a, "model.safetensors")), load_file(os.path.join(b, "model.safetensors"))
    # Names may carry the "transformer." prefix in one file and not the other.
    strip = lambda n: n[len("transformer."):] if n.startswith("transformer.") else n
    tb = {strip(n): v for n, v in tb.items()}
    bad = []
    checked = 0
    for name, va in ta.items():
        name = strip(name)
        if name.endswith(".attn.bias") and name.startswith("h."):
            continue  # the attention mask buffer: not a weight
        if name not in tb:
            bad.append(f"{name}: missing")
            continue
        vb, va = tb[name], va.copy()
        for z in zeroed:
            zname, begin, end = z.split(":")
            if zname == name:
                if np.any(vb[int(begin):int(end)] != 0):
                    bad.append(f"{name}[{begin}:{end}]: not zeros")
                va[int(begin):int(end)] = 0
        if va.shape != vb.shape or va.dtype != vb.dtype or va.tobytes() != vb.tobytes():
            bad.append(f"{name}: {va.dtype}{list(va.shape)} against {vb.dtype}{list(vb.shape)}, differ")
        checked += 1
    if bad:
        sys.exit("tensors differ:\n" + "\n".join(bad))
    print(f"{checked} tensors the same")


def same_logits(a, b, tokens_file, T, tol):
    x, _ = windows(tokens_file, T, 2)
    la, lb = logits_of(hf_model(a), x), logits_of(hf_model(b), x)
    if la.shape != lb.shape:
        sys.exit(f"logits of shape {la.shape} against {lb.shape}")
    err = np.abs(la - lb).max() / np.abs(la).max()
    ok = err <= float(tol)
    print(f"logits {'the same' if ok else 'DIFFER'}: largest difference {err:.3g} of the largest logit (allowed {float(tol):g})")
    sys.exit(0 if ok else 1)


def main(argv):
    cmd = argv[1]
    if cmd == "make":
        make(argv[2], argv[3])
    elif cmd == "tokens":
        np.random.default_rng(3).integers(0, VOCAB, int(argv[3])).astype(np.uint16).tofile(argv[2])
    elif cmd == "loss":
        loss(argv[2], argv[3], int(argv[4]), int(argv[5]), int(argv[6]))
    elif cmd == "near":
        near(argv[2], argv[3], argv[4])
    elif cmd == "same-tensors":
        zeroed = [argv[i + 1] for i in range(4, len(argv) - 1) if argv[i] == "--zeroed"]
        same_tensors(argv[2], argv[3], zeroed)
    elif cmd == "same-logits":
        same_logits(argv[2], argv[3], argv[4], int(argv[5]), argv[6])
    else:
        sys.exit(__doc__)


if __name__ == "__main__":
    main(sys.argv)
