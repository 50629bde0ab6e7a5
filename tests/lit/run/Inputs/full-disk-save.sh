#!/usr/bin/env bash
# A checkpoint that no longer fits on its disk: a 160 KiB tmpfs holds one
# 100 KiB checkpoint but not the new one being written beside it. The save
# at step 2 succeeds, the one at step 4 fails: the run exits 1 saying so and
# what the file still holds, leaves no temporary file, and the checkpoint of
# step 2 resumes. Needs root and mount(2); where neither is there it says so
# and passes.
set -u
mgc=$1 model=$2 dir=$3
source "$(dirname "$0")/small-tmpfs.sh"
small_tmpfs full-disk-save "$dir/small" 160k
sizes=(-D B=8 -D D=64 -D H=64 -D C=2)
ckpt="$dir/small/c.ckpt"
"$mgc" run "$model" "${sizes[@]}" --steps 6 --save "$ckpt" --save-every 2 \
  > "$dir/save.out" 2> "$dir/save.err"
rc=$?
[ "$rc" = 1 ] || { echo "exit status $rc, expected 1"; cat "$dir/save.err"; exit 1; }
grep -q "cannot write '$ckpt': No space left on device; '$ckpt' still holds step 2" "$dir/save.err" \
  || { echo "no save error"; cat "$dir/save.err"; exit 1; }
leftover=$(ls -A "$dir/small" | grep -v '^c.ckpt$')
[ -z "$leftover" ] || { echo "left behind: $leftover"; exit 1; }
"$mgc" run "$model" "${sizes[@]}" --steps 3 --resume "$ckpt" > "$dir/resume.out" 2>&1 \
  || { echo "does not resume"; cat "$dir/resume.out"; exit 1; }
grep -q "from step 2 to 3" "$dir/resume.out" || { echo "resumed elsewhere"; cat "$dir/resume.out"; exit 1; }
echo "full-disk-save: ok"
