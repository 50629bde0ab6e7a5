#!/usr/bin/env bash
# Builds the libFuzzer targets with clang-14 + ASan/UBSan and runs one.
#   scripts/fuzz.sh [frontend|ir_text|safetensors|npy|executable|cli_lists] [SECONDS]
#   (default: frontend 600)
# The corpus is seeded from the samples and the test inputs (for the file
# formats: files written by mgc itself); crashes are written to
# fuzz/crashes/ (turn each into a regression test).
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
# Small files of each format, made by the ordinary build of mgc (build/,
# made by scripts/build.sh when it is missing).
make_seeds() {
  local mgc=$root/build/tools/mgc/mgc tmp
  [ -x "$mgc" ] || MGC_BUILD_DIR=$root/build "$root/scripts/build.sh"
  tmp=$(mktemp -d)
  "$mgc" run "$root/samples/mlp.mg" -D B=4 -D D=3 -D H=2 -D C=2 --steps 1 \
    --save "$corpus/mlp.safetensors" >/dev/null
  "$mgc" compile "$root/samples/mlp.mg" -D B=4 -D D=3 -D H=2 -D C=2 \
    -o "$tmp/mlp.mgx" >/dev/null
  # The body: everything before the checksum line the target appends.
  sed '$d' "$tmp/mlp.mgx" > "$corpus/mlp.mgx.body"
  python3 - "$corpus" <<'PY'
import struct, sys
out = sys.argv[1]
def npy(name, descr, shape, data):
    header = "{'descr': '%s', 'fortran_order': False, 'shape': %s, }" % (
        descr, "(" + "".join("%d," % d for d in shape) + ")")
    header += " " * ((64 - (10 + len(header) + 1) % 64) % 64) + "\n"
    with open(out + "/" + name, "wb") as f:
        f.write(b"\x93NUMPY\x01\x00" + struct.pack("<H", len(header)) +
                header.encode() + data)
npy("f4.npy", "<f4", (2, 3), struct.pack("<6f", *range(6)))
npy("u1.npy", "|u1", (4,), bytes([0, 1, 2, 3]))
npy("f2.npy", "<f2", (2,), struct.pack("<2e", 1.5, -2.0))
PY
  rm -rf "$tmp"
}
# The command-line lists: the first byte picks the parser (0: a list
# option, 1: --mesh, 2: --stages with the stage and layer counts in the
# next two bytes, 3: --passes, 4: a command line, one argument per line).
cli_seeds() {
  printf '\0\0\00015496, 11,616,1438 ,318' > "$corpus/prompt-tokens"
  printf '\1\0\0dp=2[3,1],tp=2,pp=2' > "$corpus/mesh"
  printf '\2\3\0170-3,4-7,8-11,12-15' > "$corpus/stages"
  printf '\3\0\0mixed-precision,autodiff, optimizer,cse' > "$corpus/passes"
  printf '\4\0\0--mesh\ndp=2,tp=2\n--dp-weights\n3,1\n--batch-size\n8\n-D\nB=4' \
    > "$corpus/command-line"
}
case $target in
  frontend) seed "$root/samples" "$root/tests/lit" -name '*.mg' ;;
  cli_lists) cli_seeds ;;
  ir_text) seed "$root/tests/lit" -name '*.mgir' ;;
  safetensors | npy | executable) make_seeds ;;
esac
# The file formats' seeds are larger than source files.
max_len=4096
case $target in safetensors | npy | executable) max_len=65536 ;; esac
dict=()
[ -f "$root/fuzz/$target.dict" ] && dict=(-dict="$root/fuzz/$target.dict")
"$build/fuzz/fuzz_$target" "$corpus" "${dict[@]}" -max_total_time="$seconds" \
  -max_len="$max_len" -timeout=10 -rss_limit_mb=4096 -print_final_stats=1 \
  -artifact_prefix="$root/fuzz/crashes/"
