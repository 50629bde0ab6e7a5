#!/usr/bin/env bash
# The CPU backend beside the references, in one run on one machine:
#   - GPT-2 124M (samples/gpt.mg at its defaults, B=4 T=64, AdamW) in mgc
#     and in JAX (XLA's CPU backend; bench/reference_jax.py), and mgc's
#     start-up: a one-step run's whole process (median of three) less one
#     step;
#   - the MLP (samples/mlp.mg, B=64 784-1024-1024-10, AdamW) in mgc, in
#     JAX and in NumPy (bench/reference_numpy.py);
#   - the small GPT (V=256 T=64 D=128 H=4 L=4 B=8) in mgc on one device
#     and on dp=2 (two simulated devices on the same cores).
# Each figure is the median step time after the first steps (mgc: from
# --log-json; the references time themselves the same way), and the ratios
# mgc / reference (below 1: mgc is faster). Each reference is written as its
# own users write a step for speed: the JAX step is jitted whole with the
# parameters and optimizer state donated, the NumPy step updates its arrays
# in place. JAX and NumPy are pip-installed into a virtual environment
# under the build folder the first time.
# llm.c's CPU trainer (train_gpt2.c, whose B=4 T=64 are these) runs too
# when it is built beside this checkout, in ../llm.c (or $LLMC_DIR): clone
# https://github.com/karpathy/llm.c there, run its dev/download_starter_pack.sh
# (the GPT-2 weights and tokens it reads) and `make train_gpt2`; its median
# "took" time after the first steps is compared with mgc's. It trains its
# own 40 steps (with validation and sampling), a few minutes here.
# Run after scripts/build.sh:  bench/cpu-vs-references.sh [GPT_STEPS]
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
build=${MGC_BUILD_DIR:-$root/build}
mgc=$build/tools/mgc/mgc
steps=${1:-8}
warmup=3
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT

venv=$build/bench-venv-jax
if ! "$venv/bin/python" -c 'import jax, numpy' 2>/dev/null; then
  python3 -m venv "$venv"
  "$venv/bin/pip" install -q jax numpy
fi
py=$venv/bin/python

echo "machine: $(nproc) cores, $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | sed 's/^ //')"
echo "jax $("$py" -c 'import jax; print(jax.__version__)'), numpy $("$py" -c 'import numpy; print(numpy.__version__)')"
for _ in $(seq 40); do cat "$root/README.md" "$root"/docs/*.md; done > "$work/corpus.txt"

# The median step_time of a --log-json log after the first $warmup steps.
median() {
  python3 -c "import json, statistics, sys
t = [json.loads(l)['step_time'] for l in open(sys.argv[1]) if 'step_time' in l]
print('%.4f' % statistics.median(t[int(sys.argv[2]):]))" "$1" "$warmup"
}
ratio() { python3 -c "import sys; print('%.2f' % (float(sys.argv[1]) / float(sys.argv[2])))" "$1" "$2"; }
minus() { python3 -c "import sys; print('%.2f' % (float(sys.argv[1]) - float(sys.argv[2])))" "$1" "$2"; }

echo "== GPT-2 124M, B=4 T=64, $steps steps"
"$mgc" run "$root/samples/gpt.mg" -D B=4 -D T=64 --text "$work/corpus.txt" \
  --steps "$steps" --log-json "$work/gpt.jsonl" > /dev/null
mgc_gpt=$(median "$work/gpt.jsonl")
jax_gpt=$("$py" "$root/bench/reference_jax.py" gpt --B 4 --T 64 --steps "$steps" \
  --warmup "$warmup" 2>/dev/null | sed -E 's/.*median step ([0-9.]+) s.*/\1/')
echo "mgc ${mgc_gpt} s, jax ${jax_gpt} s: mgc / jax = $(ratio "$mgc_gpt" "$jax_gpt")"
llmc=${LLMC_DIR:-$root/../llm.c}
if [ -x "$llmc/train_gpt2" ]; then
  # "step 3: train loss 4.37 (took 3252.1 ms)": the median of the steps
  # after the first $warmup, in seconds.
  llmc_gpt=$( (cd "$llmc" && OMP_NUM_THREADS=$(nproc) timeout 1200 ./train_gpt2) |
    python3 -c "import re, statistics, sys
t = [float(m.group(1)) / 1000 for m in re.finditer(r'took ([0-9.]+) ms', sys.stdin.read())]
print('%.4f' % statistics.median(t[int(sys.argv[1]):]) if len(t) > int(sys.argv[1]) else 'none')" "$warmup")
  if [ "$llmc_gpt" = none ]; then
    echo "llm.c in $llmc printed no step times"
  else
    echo "llm.c ${llmc_gpt} s: mgc / llm.c = $(ratio "$mgc_gpt" "$llmc_gpt")"
  fi
else
  echo "llm.c: not built in $llmc (see the top of this script)"
fi
# Start-up: the whole process of a one-step run (compile, initialisation,
# the first step), the median of three, less one step of the run above.
wholes=()
for _ in 1 2 3; do
  start=$(date +%s.%N)
  "$mgc" run "$root/samples/gpt.mg" -D B=4 -D T=64 --text "$work/corpus.txt" \
    --steps 1 > /dev/null
  wholes+=("$(minus "$(date +%s.%N)" "$start")")
done
whole=$(printf '%s\n' "${wholes[@]}" | sort -n | sed -n 2p)
echo "mgc start-up and first step ${whole} s (of ${wholes[*]}):" \
  "$(minus "$whole" "$mgc_gpt") s beyond one step"

echo "== MLP, B=64 784-1024-1024-10, 60 steps"
"$mgc" run "$root/samples/mlp.mg" -D B=64 --steps 60 --log-json "$work/mlp.jsonl" > /dev/null
mgc_mlp=$(median "$work/mlp.jsonl")
jax_mlp=$("$py" "$root/bench/reference_jax.py" mlp --steps 60 --warmup "$warmup" \
  2>/dev/null | sed -E 's/.*median step ([0-9.]+) s.*/\1/')
numpy_mlp=$("$py" "$root/bench/reference_numpy.py" --steps 60 |
  sed -E 's/.*median step ([0-9.]+) s.*/\1/')
echo "mgc ${mgc_mlp} s, jax ${jax_mlp} s, numpy ${numpy_mlp} s:" \
  "mgc / jax = $(ratio "$mgc_mlp" "$jax_mlp"), mgc / numpy = $(ratio "$mgc_mlp" "$numpy_mlp")"

echo "== small GPT, V=256 T=64 D=128 H=4 L=4 B=8, 40 steps"
small=(-D V=256 -D T=64 -D D=128 -D H=4 -D L=4 -D B=8)
"$mgc" run "$root/samples/gpt.mg" "${small[@]}" --text "$work/corpus.txt" --steps 40 \
  --log-json "$work/one.jsonl" > /dev/null
"$mgc" run "$root/samples/gpt.mg" "${small[@]}" --text "$work/corpus.txt" --steps 40 \
  --mesh dp=2 --log-json "$work/dp2.jsonl" > /dev/null
one=$(median "$work/one.jsonl")
dp2=$(median "$work/dp2.jsonl")
echo "one device ${one} s, dp=2 ${dp2} s: dp=2 / one = $(ratio "$dp2" "$one")"
