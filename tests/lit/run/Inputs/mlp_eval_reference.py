#!/usr/bin/env python3
"""mlp_eval_reference.py CKPT X.npy Y.npy EVAL.txt: the loss and accuracy
of samples/mlp.mg's parameters in CKPT over every row of (X, Y), in NumPy
(float64), against the "loss L, accuracy A" line of mgc eval's output in
EVAL.txt: the loss within 1e-5 relative, the accuracy exactly. Exit status
1 when they differ."""
import re
import sys

try:
    import numpy as np
except ImportError:
    print("mlp eval reference: skipped (numpy is not installed)")
    sys.exit(0)

from llama_reference import read_safetensors  # beside this file

p = read_safetensors(sys.argv[1])
x, y = np.load(sys.argv[2]).astype(np.float64), np.load(sys.argv[3])
h = np.maximum(x @ p["w1"] + p["b1"], 0)
h = np.maximum(h @ p["w2"] + p["b2"], 0)
logits = h @ p["w3"] + p["b3"]
z = logits - logits.max(axis=1, keepdims=True)
logp = z - np.log(np.exp(z).sum(axis=1, keepdims=True))
loss = -logp[np.arange(len(y)), y].mean()
accuracy = (logits.argmax(axis=1) == y).mean()
m = re.search(r"^loss ([0-9.]+), accuracy ([0-9.]+)$", open(sys.argv[4]).read(), re.M)
ok = m is not None and abs(float(m.group(1)) - loss) <= 1e-5 * loss and \
    float(m.group(2)) == accuracy
print("mlp eval reference: numpy loss %r, accuracy %r; mgc eval %s: %s"
      % (loss, accuracy, m.group(0) if m else "printed no such line",
         "ok" if ok else "FAILED"))
sys.exit(0 if ok else 1)
