#!/usr/bin/env bash
# Pipelines on simulated CPU devices: for each schedule, the bubble the run
# measures (1 - time the devices computed / (devices x time of the
# micro-batches)) beside the one the schedule's simulation predicts from
# the stages' FLOPs, and the step time; against the same step as gradient
# accumulation on one device (the pipeline's step, bit for bit, without
# the stages running side by side) and without accumulation. A small GPT
# (samples/gpt.mg with V=512 T=64 D=256 H=4 L=4 B=16), 8 micro-batches,
# every device on one thread. Also the time of planning GPT-2 124M on
# pp=2,dp=2,tp=2 (`mgc compile --emit=plan`).
# Run after scripts/build.sh:  bench/pipeline.sh [STEPS]
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
build=${MGC_BUILD_DIR:-$root/build}
mgc=$build/tools/mgc/mgc
steps=${1:-10}

echo "machine: $(nproc) cores, $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | sed 's/^ //')"

echo "== mgc compile samples/gpt.mg --mesh pp=2,dp=2,tp=2 --microbatches 4 --emit=plan (124M), 3 runs"
for _ in 1 2 3; do
  start=$(date +%s%N)
  "$mgc" compile "$root/samples/gpt.mg" --mesh pp=2,dp=2,tp=2 --microbatches 4 \
    --emit=plan > /dev/null
  end=$(date +%s%N)
  echo "   $(( (end - start) / 1000000 )) ms"
done

gpt=(-D V=512 -D T=64 -D D=256 -D H=4 -D L=4 -D B=16)
run() {
  echo "== mgc run samples/gpt.mg ${gpt[*]} --steps $steps $*"
  # shellcheck disable=SC2068
  "$mgc" run "$root/samples/gpt.mg" "${gpt[@]}" --steps "$steps" $@ |
    grep -E '^(done|pipeline):' | sed 's/^/   /'
}
for schedule in gpipe 1f1b zb-h1; do
  run --mesh pp=2 --microbatches 8 --pipeline-schedule "$schedule"
done
run --mesh pp=2 --microbatches 8 --pipeline-schedule interleaved --virtual-stages 2
run --mesh pp=4 --microbatches 8 --pipeline-schedule 1f1b
run --mesh pp=4 --microbatches 8 --pipeline-schedule zb-h1
run --accumulate 8 --threads 1
run --accumulate 8
run
