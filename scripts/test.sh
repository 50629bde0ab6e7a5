#!/usr/bin/env bash
# Builds mgc and runs every test: the doctest unit tests and the lit +
# FileCheck golden tests. Ends with one line "N passed, N failed".
# Where no CUDA device can be used, the CUDA tests ("cuda: ..." unit tests,
# tests/lit/cuda) pass without running their device checks and say why.
set -uo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
build=${MGC_BUILD_DIR:-$root/build}

"$root/scripts/build.sh" || { echo "build failed"; echo "0 passed, 1 failed"; exit 1; }

# The interoperability tests read and write checkpoints with Python's
# safetensors and numpy, and the convolutional tests train on
# scikit-learn's digits; they skip (with a message) where these cannot be
# installed.
if ! python3 -c 'import safetensors, numpy, sklearn' 2>/dev/null; then
  python3 -m pip install -q safetensors numpy scikit-learn >/dev/null 2>&1 ||
    echo "note: could not pip install safetensors numpy scikit-learn; the Python interoperability and digits tests will skip"
fi

# The Hugging Face checkpoint tests compare with transformers' models, in
# a virtual environment of their own (transformers 4.x still has the Flax
# classes, which read torch-format checkpoints without torch); they skip
# where it cannot be installed.
hfvenv=$build/hf-venv
if ! "$hfvenv/bin/python" -c 'import transformers, flax, jax, safetensors, numpy' 2>/dev/null; then
  { python3 -m venv "$hfvenv" &&
    "$hfvenv/bin/pip" install -q "transformers==4.57.6" "flax==0.12.8" "jax[cpu]==0.10.2" \
      "safetensors==0.8.0" "numpy==2.4.6"; } >/dev/null 2>&1 ||
    echo "note: could not install transformers, flax and jax; the Hugging Face checkpoint tests will skip"
fi

passed=0 failed=0
log=$(mktemp)
trap 'rm -f "$log"' EXIT

echo "== unit tests (doctest)"
"$build/tests/mgc_unit_tests" 2>&1 | tee "$log" | tail -n 4
status=${PIPESTATUS[0]}
unit=$(grep -E '^\[doctest\] test cases:' "$log" | tail -n 1)
if [ -n "$unit" ]; then
  passed=$((passed + $(sed -E 's/.*\| *([0-9]+) passed.*/\1/' <<<"$unit")))
  unit_failed=$(sed -E 's/.*\| *([0-9]+) failed.*/\1/' <<<"$unit")
  failed=$((failed + unit_failed))
  # A crash after the summary, or a sanitizer's report at exit (leaks are
  # found then), fails too.
  if [ "$status" -ne 0 ] && [ "$unit_failed" -eq 0 ]; then
    echo "the unit tests' process exited with status $status after its summary"
    failed=$((failed + 1))
  fi
else
  failed=$((failed + 1))
fi

echo "== golden tests (lit + FileCheck)"
lit=/usr/lib/llvm-14/build/utils/lit/lit.py
python3 "$lit" -sv "$build/tests/lit" 2>&1 | tee "$log" | grep -vE '^(PASS|UNSUPPORTED): ' | tail -n 40
lit_passed=$(grep -E '^ *Passed *: ' "$log" | awk '{print $NF}')
lit_failed=$(grep -E '^ *(Failed|Unresolved|Timed Out|Unexpectedly Passed) *: ' "$log" | awk '{s += $NF} END {print s + 0}')
if [ -z "$lit_passed" ] && [ "$lit_failed" -eq 0 ]; then
  failed=$((failed + 1)) # lit did not run
fi
passed=$((passed + ${lit_passed:-0}))
failed=$((failed + lit_failed))

echo "$passed passed, $failed failed"
[ "$failed" -eq 0 ]
