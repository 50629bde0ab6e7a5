#!/usr/bin/env bash
# Builds the libFuzzer targets with clang-14 + ASan/UBSan and runs one.
#   scripts/fuzz.sh [frontend|ir_text] [SECONDS]   (default: frontend 600)
# The corpus is seeded from the samples and the test inputs; crashes are
# written to fuzz/crashes/ (turn each into a regression test).
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
target=${1:-frontend}
seconds=${2:-600}
build=$root/build-fuzz
"$root/scripts/install-deps.sh"
CC=clang-14 CXX=clang++-14 cmake -S "$root" -B "$build" -G Ninja \
  -DCMAKE_BUILD_TYPE=RelWithDebInfo -DMGC_BUILD_FUZZERS=ON -DMGC_BUILD_TESTS=OFF >/dev/null
cmake --build "$build" --target "fuzz_$target"

corpus=$build/corpus-$target
mkdir -p "$corpus" "$root/fuzz/crashes"
# Seeds are named by their path: several test files share a base name.
seed() {
  find "$@" | while read -r f; do
    rel=${f#"$root"/}
    cp "$f" "$corpus/${rel//\//_}"
  done
}
case $target in
  frontend) seed "$root/samples" "$root/tests/lit" -name '*.mg' ;;
  ir_text) seed "$root/tests/lit" -name '*.mgir' ;;
esac
dict=()
[ -f "$root/fuzz/$target.dict" ] && dict=(-dict="$root/fuzz/$target.dict")
"$build/fuzz/fuzz_$target" "$corpus" "${dict[@]}" -max_total_time="$seconds" \
  -max_len=4096 -timeout=10 -rss_limit_mb=4096 -print_final_stats=1 \
  -artifact_prefix="$root/fuzz/crashes/"
