#!/usr/bin/env bash
# A training run whose --log-json fills a small tmpfs: the log stops with an
# error, the training goes on, saves its checkpoint and exits 1. Needs root
# and mount(2); where neither is there it says so and passes.
set -u
mgc=$1 model=$2 dir=$3
source "$(dirname "$0")/small-tmpfs.sh"
small_tmpfs full-disk "$dir/tiny" 8k
"$mgc" run "$model" -D B=8 -D D=8 -D H=8 -D C=2 --steps 200 --log-json "$dir/tiny/log.json" \
  --save "$dir/full-disk.ckpt" > "$dir/full-disk.out" 2> "$dir/full-disk.err"
rc=$?
grep -q "error: writing the log '$dir/tiny/log.json': No space left on device; the log stops here, training goes on" "$dir/full-disk.err" || { echo "no log error"; cat "$dir/full-disk.err"; exit 1; }
grep -q "saved step 200" "$dir/full-disk.out" || { echo "not saved"; exit 1; }
[ "$rc" = 1 ] || { echo "exit status $rc, expected 1"; exit 1; }
echo "full-disk: ok"
