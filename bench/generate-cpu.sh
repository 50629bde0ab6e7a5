#!/usr/bin/env bash
# Tokens per second of `mgc generate` on the CPU, one sequence (B=1), with
# the key/value cache and with --no-cache (the whole context's forward
# program per token), for small GPT and LLaMA settings at two context
# lengths. Parameters are the initial ones (speed does not depend on
# training); greedy decoding from a 4-byte prompt until the context is
# full. Prints the summary line mgc generate writes: the prompt and first
# token's time, then the tokens per second of the rest.
#   gpt.mg    V=256 D=128 H=4 L=4
#   llama.mg  V=256 D=128 H=4 Hkv=2 F=344 L=4
# Run after scripts/build.sh:  bench/generate-cpu.sh
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
build=${MGC_BUILD_DIR:-$root/build}
mgc=$build/tools/mgc/mgc

echo "machine: $(nproc) cores, $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | sed 's/^ //')"
gpt=(-D V=256 -D D=128 -D H=4 -D L=4 -D B=1)
llama=(-D V=256 -D D=128 -D H=4 -D Hkv=2 -D F=344 -D L=4 -D B=1)
for T in 64 512; do
  for model in gpt llama; do
    if [ "$model" = gpt ]; then sizes=("${gpt[@]}"); else sizes=("${llama[@]}"); fi
    for cache in "" --no-cache; do
      echo "== $model.mg ${sizes[*]} -D T=$T ${cache:-(key/value cache)}"
      # shellcheck disable=SC2086
      "$mgc" generate "$root/samples/$model.mg" "${sizes[@]}" -D T="$T" \
        --prompt "The " --max-tokens "$T" --temperature 0 $cache 2>&1 >/dev/null |
        grep '^generated'
    done
  done
done
