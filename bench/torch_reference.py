"""The PyTorch side of the GPU benchmarks: the same two models as mgc's
samples/gpt.mg (GPT-2 124M as written there: separate q/k/v matrices, no
key bias, tied LM head, tanh GELU, pre-norm) and bench/mlp8.mg (8 layers of
4096 x 4096, ReLU, MSE, SGD), trained in bf16 autocast with fp32 master
weights, eager and with torch.compile. Prints one line per run:

  torch gpt eager: 47.10 ms/step, 347.8k tok/s, 201.3 TFLOP/s

Usage: python3 bench/torch_reference.py [gpt|mlp|all] [--steps N]
       [--warmup N] [--no-compile]
"""
import argparse
import time

import torch
import torch.nn as nn
import torch.nn.functional as F


class Attention(nn.Module):
    def __init__(self, d, h):
        super().__init__()
        self.h = h
        self.q = nn.Linear(d, d)
        self.k = nn.Linear(d, d, bias=False)
        self.v = nn.Linear(d, d)
        self.proj = nn.Linear(d, d)

    def forward(self, x):
        b, t, d = x.shape
        split = lambda y: y.view(b, t, self.h, d // self.h).transpose(1, 2)
        y = F.scaled_dot_product_attention(
            split(self.q(x)), split(self.k(x)), split(self.v(x)), is_causal=True)
        return self.proj(y.transpose(1, 2).reshape(b, t, d))


class Layer(nn.Module):
    def __init__(self, d, h):
        super().__init__()
        self.ln1 = nn.LayerNorm(d)
        self.attn = Attention(d, h)
        self.ln2 = nn.LayerNorm(d)
        self.fc = nn.Linear(d, 4 * d)
        self.proj = nn.Linear(4 * d, d)

    def forward(self, x):
        x = x + self.attn(self.ln1(x))
        return x + self.proj(F.gelu(self.fc(self.ln2(x)), approximate="tanh"))


class GPT(nn.Module):
    def __init__(self, v=50304, t=1024, d=768, h=12, layers=12):
        super().__init__()
        self.wte = nn.Embedding(v, d)
        self.wpe = nn.Embedding(t, d)
        self.layers = nn.ModuleList(Layer(d, h) for _ in range(layers))
        self.lnf = nn.LayerNorm(d)
        for p in self.parameters():
            if p.dim() == 2:
                nn.init.normal_(p, 0, 0.02)

    def forward(self, tokens, targets):
        pos = torch.arange(tokens.shape[1], device=tokens.device)
        x = self.wte(tokens) + self.wpe(pos)
        for layer in self.layers:
            x = layer(x)
        logits = self.lnf(x) @ self.wte.weight.t()
        return F.cross_entropy(logits.float().view(-1, logits.shape[-1]),
                               targets.view(-1))


class Mlp8(nn.Module):
    def __init__(self, w=4096, layers=8):
        super().__init__()
        self.layers = nn.ModuleList(nn.Linear(w, w) for _ in range(layers))

    def forward(self, x, y):
        for i, layer in enumerate(self.layers):
            x = layer(x)
            if i + 1 < len(self.layers):
                x = F.relu(x)
        return F.mse_loss(x.float(), y)


def bench(name, model, batch, optimizer, flops, tokens, steps, warmup):
    def step():
        optimizer.zero_grad(set_to_none=True)
        with torch.autocast("cuda", dtype=torch.bfloat16):
            loss = model(*batch)
        loss.backward()
        optimizer.step()
        return loss

    for _ in range(warmup):
        step()
    torch.cuda.synchronize()
    start = time.perf_counter()
    for _ in range(steps):
        loss = step()
    torch.cuda.synchronize()
    ms = (time.perf_counter() - start) * 1e3 / steps
    rate = "%.1fk tok/s" % (tokens / ms) if tokens else \
        "%.0f samples/s" % (batch[0].shape[0] * 1e3 / ms)
    print("torch %s: %.2f ms/step, %s, %.1f TFLOP/s, loss %.4f"
          % (name, ms, rate, flops / ms / 1e9, loss.item()), flush=True)


def gpt_runs(args, compile_modes):
    b, t, v = 16, 1024, 50304
    torch.manual_seed(0)
    model = GPT().cuda()
    n = sum(p.numel() for p in model.parameters())
    # nanoGPT's estimate: 6 N per token, plus attention's 12 L T D.
    flops = (6 * n + 12 * 12 * t * 768) * b * t
    tokens = torch.randint(0, v, (b, t), device="cuda")
    targets = torch.randint(0, v, (b, t), device="cuda")
    for mode in compile_modes:
        m = torch.compile(model) if mode == "compile" else model
        opt = torch.optim.AdamW(model.parameters(), lr=6e-4,
                                betas=(0.9, 0.95), weight_decay=0.1,
                                fused=True)
        bench("gpt " + mode, m, (tokens, targets), opt, flops, b * t,
              args.steps, args.warmup)


def mlp_runs(args, compile_modes):
    b, w = 16384, 4096
    torch.manual_seed(0)
    model = Mlp8(w).cuda()
    flops = 6 * b * 8 * w * w
    x = torch.randn(b, w, device="cuda")
    y = torch.randn(b, w, device="cuda")
    for mode in compile_modes:
        m = torch.compile(model) if mode == "compile" else model
        opt = torch.optim.SGD(model.parameters(), lr=1e-3)
        bench("mlp8 " + mode, m, (x, y), opt, flops, 0, args.steps,
              args.warmup)


def main():
    p = argparse.ArgumentParser()
    p.add_argument("which", nargs="?", default="all",
                   choices=["gpt", "mlp", "all"])
    p.add_argument("--steps", type=int, default=20)
    p.add_argument("--warmup", type=int, default=5)
    p.add_argument("--no-compile", action="store_true")
    args = p.parse_args()
    if not torch.cuda.is_available():
        print("torch: no CUDA device; nothing measured")
        return
    torch.backends.cuda.matmul.allow_tf32 = True
    print("torch %s on %s" % (torch.__version__,
                              torch.cuda.get_device_name()), flush=True)
    modes = ["eager"] + ([] if args.no_compile else ["compile"])
    if args.which in ("gpt", "all"):
        gpt_runs(args, modes)
    if args.which in ("mlp", "all"):
        mlp_runs(args, modes)


if __name__ == "__main__":
    main()
