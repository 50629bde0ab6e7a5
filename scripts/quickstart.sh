#!/usr/bin/env bash
# The main job: build mgc, compile the GPT-2 sample (124M at its default
# sizes) to IR, then differentiate it and build its training step.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
build=${MGC_BUILD_DIR:-$root/build}
"$root/scripts/build.sh"
mgc=$build/tools/mgc/mgc
out=$build/gpt.mgir
echo "== mgc compile samples/gpt.mg --emit=ir -o $out"
"$mgc" compile "$root/samples/gpt.mg" --emit=ir -o "$out"
echo "$(grep -c '^  param ' "$out") parameters, $(grep -cE '^  %[0-9]+ = ' "$out") ops; the first lines:"
head -n 8 "$out"
echo "== mgc opt $out --passes=autodiff,optimizer,canonicalize,cse,dce --time-passes"
"$mgc" opt "$out" --passes=autodiff,optimizer,canonicalize,cse,dce --time-passes -o "$build/gpt.step.mgir"
echo "training step: $(grep -cE '^  %[0-9]+ = ' "$build/gpt.step.mgir") ops, $(grep -c '^  update ' "$build/gpt.step.mgir") updated tensors, written to $build/gpt.step.mgir"
