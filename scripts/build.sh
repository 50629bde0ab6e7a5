#!/usr/bin/env bash
# Installs dependencies if needed, configures and builds mgc into build/
# (or $MGC_BUILD_DIR). Extra arguments go to the CMake configure step.
# The CUDA backend is built where CMake finds nvcc (on PATH or at
# /usr/local/cuda/bin/nvcc); MGC_CUDA=ON|OFF overrides. A machine without nvcc builds the CPU
# backend only. MGC_BUILD_TARGETS="mgc ..." builds only those targets (and
# what they need); default: everything.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
build=${MGC_BUILD_DIR:-$root/build}

"$root/scripts/install-deps.sh"
cmake -S "$root" -B "$build" -G Ninja -DCMAKE_BUILD_TYPE=${MGC_BUILD_TYPE:-RelWithDebInfo} \
  ${MGC_CUDA:+-DMGC_CUDA=$MGC_CUDA} "$@" >/dev/null
targets=()
for t in ${MGC_BUILD_TARGETS:-}; do targets+=(--target "$t"); done
cmake --build "$build" "${targets[@]}" -- ${MGC_NINJA_FLAGS:-}
