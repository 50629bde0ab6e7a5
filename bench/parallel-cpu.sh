#!/usr/bin/env bash
# Data and tensor parallelism on simulated CPU devices: the time of
# planning GPT-2 124M on dp=2,tp=4 (`mgc compile --emit=plan`), and the
# step time of a small GPT (samples/gpt.mg with V=256 T=64 D=128 H=4 L=4
# B=8) on 1, 2 and 4 simulated devices (data parallel), on tp=2 and on
# dp=2,tp=2, and with the batch run as 4 micro-batches (gradient
# accumulation) on one device and on dp=2. The simulated devices share this machine's cores, so more
# devices do not make a step faster here: the figures show what the
# partitioning and the in-process communication cost.
# Run after scripts/build.sh:  bench/parallel-cpu.sh [STEPS]
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
build=${MGC_BUILD_DIR:-$root/build}
mgc=$build/tools/mgc/mgc
steps=${1:-50}
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT

echo "machine: $(nproc) cores, $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | sed 's/^ //')"

echo "== mgc compile samples/gpt.mg --mesh dp=2,tp=4 --emit=plan (124M), 5 runs"
for _ in 1 2 3 4 5; do
  start=$(date +%s%N)
  "$mgc" compile "$root/samples/gpt.mg" --mesh dp=2,tp=4 --emit=plan > "$work/plan.txt"
  end=$(date +%s%N)
  echo "   $(( (end - start) / 1000000 )) ms"
done
grep '^Summary' "$work/plan.txt" | sed 's/^/   /'
echo "== the same with --accumulate 4 (micro-batch part, then apply part)"
"$mgc" compile "$root/samples/gpt.mg" --mesh dp=2,tp=4 --accumulate 4 --emit=plan |
  grep '^Summary' | sed 's/^/   /'

gpt=(-D V=256 -D T=64 -D D=128 -D H=4 -D L=4 -D B=8)
for _ in $(seq 40); do cat "$root/README.md" "$root"/docs/*.md; done > "$work/corpus.txt"
for mesh in "" "--devices 2" "--devices 4" "--mesh tp=2" "--mesh dp=2,tp=2" \
  "--accumulate 4" "--devices 2 --accumulate 2"; do
  echo "== mgc run samples/gpt.mg ${gpt[*]} --steps $steps ${mesh:-(one device)}"
  # shellcheck disable=SC2086
  "$mgc" run "$root/samples/gpt.mg" "${gpt[@]}" --steps "$steps" \
    --text "$work/corpus.txt" --threads 1 $mesh | tail -n 1
done
