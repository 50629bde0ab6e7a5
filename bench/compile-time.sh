#!/usr/bin/env bash
# Wall time of `mgc compile samples/gpt.mg --emit=ir` at the 124M default,
# best and median of N runs (default 10). Run after scripts/build.sh.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
mgc=${MGC_BUILD_DIR:-$root/build}/tools/mgc/mgc
runs=${1:-10}
times=()
for _ in $(seq "$runs"); do
  start=$(date +%s%N)
  "$mgc" compile "$root/samples/gpt.mg" --emit=ir -o /dev/null
  end=$(date +%s%N)
  times+=("$(( (end - start) / 1000 ))") # microseconds
done
printf '%s\n' "${times[@]}" | sort -n | awk -v n="$runs" '
  { t[NR] = $1 }
  END { printf "mgc compile samples/gpt.mg --emit=ir: best %.1f ms, median %.1f ms over %d runs\n",
        t[1] / 1000, t[int((n + 1) / 2)] / 1000, n }'
echo "machine: $(nproc) cores, $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | sed 's/^ //')"
