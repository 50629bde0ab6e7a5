#!/usr/bin/env bash
# Step time of the LLaMA and ResNet samples at small settings on the CPU,
# on one device and on simulated meshes (dp=2, dp=2 x tp=2: the devices
# share this machine's cores, so a mesh shows the partitioned step's
# overhead, not a speed-up): whole-process `mgc run` wall time and the
# throughput line it prints.
#   llama.mg   V=256 T=64 D=128 H=4 Hkv=2 F=344 L=4 B=8, on text
#   resnet.mg  B=16 W=16 HW=32 (ResNet-18 at a quarter of the width, CIFAR
#              image size), synthetic images
# Run after scripts/build.sh:  bench/models-cpu.sh [STEPS]
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
build=${MGC_BUILD_DIR:-$root/build}
mgc=$build/tools/mgc/mgc
steps=${1:-20}
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT

echo "machine: $(nproc) cores, $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | sed 's/^ //')"
for _ in $(seq 40); do cat "$root/README.md" "$root"/docs/*.md; done > "$work/corpus.txt"

llama=(-D V=256 -D T=64 -D D=128 -D H=4 -D Hkv=2 -D F=344 -D L=4 -D B=8)
resnet=(-D B=16 -D W=16 -D HW=32)
for mesh in "" "--mesh dp=2" "--mesh dp=2,tp=2"; do
  echo "== llama.mg ${llama[*]} --steps $steps ${mesh:-(one device)}"
  # shellcheck disable=SC2086
  "$mgc" run "$root/samples/llama.mg" "${llama[@]}" --steps "$steps" \
    --text "$work/corpus.txt" $mesh | grep '^done'
  echo "== resnet.mg ${resnet[*]} --steps $steps ${mesh:-(one device)}"
  # shellcheck disable=SC2086
  "$mgc" run "$root/samples/resnet.mg" "${resnet[@]}" --steps "$steps" \
    --int-range y=10 $mesh | grep '^done'
done
