#!/usr/bin/env bash
# Training throughput of `mgc run` on the CPU: steps/s and samples or tokens
# per second for the MLP (samples/mlp.mg at its default size, B=64, 784 ->
# 1024 -> 1024 -> 10) and a small GPT (samples/gpt.mg with V=256 T=64 D=128
# H=4 L=4 B=8 on a text file), the arena peak of each training step, and the
# same MLP step in NumPy (bench/reference_numpy.py; NumPy is installed into
# a virtual environment under the build folder if it is missing).
# Run after scripts/build.sh:  bench/train-cpu.sh [STEPS]
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
build=${MGC_BUILD_DIR:-$root/build}
mgc=$build/tools/mgc/mgc
steps=${1:-100}
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT

peak() { # MODEL DEFINES...: the arena peak of the training step, in MiB
  local model=$1; shift
  "$mgc" compile "$model" "$@" --passes=autodiff,optimizer -o "$work/step.mgx"
  awk '/^section plan/ { getline; printf "%.1f MiB", $1 / 1048576; exit }' "$work/step.mgx"
}

echo "machine: $(nproc) cores, $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | sed 's/^ //')"

mlp=(-D B=64 -D D=784 -D H=1024 -D C=10)
echo "== mgc run samples/mlp.mg ${mlp[*]} --steps $steps (synthetic data)"
"$mgc" run "$root/samples/mlp.mg" "${mlp[@]}" --steps "$steps" | tail -n 1
echo "   arena peak of the training step: $(peak "$root/samples/mlp.mg" "${mlp[@]}")"

gpt=(-D V=256 -D T=64 -D D=128 -D H=4 -D L=4 -D B=8)
for _ in $(seq 40); do cat "$root/README.md" "$root"/docs/*.md; done > "$work/corpus.txt"
echo "== mgc run samples/gpt.mg ${gpt[*]} --steps $steps --text (docs, $(du -h "$work/corpus.txt" | cut -f1))"
"$mgc" run "$root/samples/gpt.mg" "${gpt[@]}" --steps "$steps" --text "$work/corpus.txt" | tail -n 1
echo "   arena peak of the training step: $(peak "$root/samples/gpt.mg" "${gpt[@]}")"

echo "== NumPy reference: the same MLP step"
py=python3
if ! python3 -c 'import numpy' 2>/dev/null; then
  venv=$build/bench-venv
  [ -x "$venv/bin/python" ] || python3 -m venv "$venv"
  "$venv/bin/pip" install -q numpy
  py=$venv/bin/python
fi
"$py" "$root/bench/reference_numpy.py" --steps "$steps" --B 64 --D 784 --H 1024 --C 10
