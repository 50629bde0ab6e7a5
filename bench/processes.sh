#!/usr/bin/env bash
# Meshes as processes (mpirun, one rank per device) against the same mesh
# simulated in one process: the step rate, and per device the bytes sent per
# step and the exposed communication (the share of its step its compute
# queue waited on communication) of the tiny GPT (samples/gpt.mg V=256 T=16 D=32 H=2 L=2
# B=4) and a small one (V=256 T=64 D=128 H=4 L=4 B=8) on 1 device, dp=2 and
# dp=2,tp=2; then the MPI communicator's all-reduce against MPI_Allreduce
# on 2 processes. Both runs of a pair end at the same loss, bit for bit.
# On a 2-core machine 4 processes oversubscribe the cores.
# Run after scripts/build.sh:  bench/processes.sh [STEPS]
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
build=${MGC_BUILD_DIR:-$root/build}
mgc=$build/tools/mgc/mgc
steps=${1:-50}
mpirun=(mpirun --oversubscribe --mca btl self,vader --mca btl_vader_single_copy_mechanism none)
[ "$(id -u)" -eq 0 ] && mpirun+=(--allow-run-as-root)
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
for _ in $(seq 40); do cat "$root/README.md" "$root"/docs/*.md; done > "$work/corpus.txt"

echo "machine: $(nproc) cores, $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | sed 's/^ //')"
report() { # label, output of mgc run
  local done comm
  done=$(grep '^done:' "$2" | sed -E 's/.* ([0-9.]+) steps\/s.*final loss ([0-9.]+)/\1 steps\/s, final loss \2/')
  comm=$({ grep '^communication per device' "$2" || true; } | sed 's/.*on it)://')
  printf '   %-28s %s\n' "$1" "$done"
  [ -z "$comm" ] || printf '   %-28s %s\n' "" "$comm"
}
for model in tiny small; do
  if [ $model = tiny ]; then gpt=(-D V=256 -D T=16 -D D=32 -D H=2 -D L=2 -D B=4)
  else gpt=(-D V=256 -D T=64 -D D=128 -D H=4 -D L=4 -D B=8); fi
  echo "== $model GPT (${gpt[*]}), $steps steps, --threads 1 per device"
  args=("$root/samples/gpt.mg" "${gpt[@]}" --steps "$steps" --text "$work/corpus.txt" --threads 1 --log-every 100000)
  "$mgc" run "${args[@]}" > "$work/out"
  report "one device" "$work/out"
  for mesh in dp=2 dp=2,tp=2; do
    n=$(( $(tr ',' '\n' <<<"$mesh" | cut -d= -f2 | paste -sd'*' | bc) ))
    "$mgc" run "${args[@]}" --mesh "$mesh" > "$work/out"
    report "$mesh in one process" "$work/out"
    "${mpirun[@]}" -np "$n" "$mgc" run "${args[@]}" --mesh "$mesh" > "$work/out"
    report "$mesh on $n processes" "$work/out"
  done
done
echo "== all-reduce on 2 processes"
"${mpirun[@]}" -np 2 "$build/bench/mpi_allreduce" 10 | sed 's/^/   /'
