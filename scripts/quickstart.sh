#!/usr/bin/env bash
# The main job: build mgc, then compile the GPT-2 sample (124M at its
# default sizes) to IR and show what mgc made of it.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
build=${MGC_BUILD_DIR:-$root/build}
"$root/scripts/build.sh"
mgc=$build/tools/mgc/mgc
out=$build/gpt.mgir
echo "== mgc compile samples/gpt.mg --emit=ir -o $out"
time "$mgc" compile "$root/samples/gpt.mg" --emit=ir -o "$out"
echo "== $(grep -c '^  param ' "$out") parameters, $(grep -cE '^  %[0-9]+ = ' "$out") ops; first lines:"
head -n 12 "$out"
echo "== the same through canonicalize,cse,dce:"
"$mgc" opt "$out" --passes=canonicalize,cse,dce --time-passes -o "$build/gpt.opt.mgir"
echo "$(grep -cE '^  %[0-9]+ = ' "$build/gpt.opt.mgir") ops after optimisation"
