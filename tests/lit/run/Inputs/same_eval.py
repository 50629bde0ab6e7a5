"""The eval_loss (and eval_accuracy) that mgc run's JSON log has for step
STEP against the 'loss X, accuracy Y' line of mgc eval on that step's
checkpoint; equal to float32 rounding.
usage: same_eval.py LOG.jsonl STEP EVAL.txt"""
import json
import re
import sys

log, step, text = sys.argv[1], int(sys.argv[2]), open(sys.argv[3]).read()
entry = [e for e in map(json.loads, open(log)) if e.get("step") == step and "eval_loss" in e]
assert len(entry) == 1, entry
m = re.search(r"^loss ([0-9.]+)(?:, accuracy ([0-9.]+))?$", text, re.M)
assert m, text
assert abs(entry[0]["eval_loss"] - float(m.group(1))) <= 2e-6 * max(1, abs(float(m.group(1)))), (entry, text)
if m.group(2):
    assert abs(entry[0]["eval_accuracy"] - float(m.group(2))) <= 1e-4, (entry, text)
print("eval at step %d matches mgc eval" % step)
