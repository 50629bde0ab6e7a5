#!/usr/bin/env bash
# Installs dependencies if needed, configures and builds mgc into build/
# (or $MGC_BUILD_DIR). Extra arguments go to the CMake configure step.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
build=${MGC_BUILD_DIR:-$root/build}

"$root/scripts/install-deps.sh"
cmake -S "$root" -B "$build" -G Ninja -DCMAKE_BUILD_TYPE=${MGC_BUILD_TYPE:-RelWithDebInfo} "$@" >/dev/null
cmake --build "$build" -- ${MGC_NINJA_FLAGS:-}
