#!/usr/bin/env bash
# The main job: build mgc, compile the GPT-2 sample (124M at its default
# sizes) to IR, differentiate it and build its training step, and show its
# partition plan on a dp=2 x tp=4 mesh; then train a tiny GPT on a bundled
# text file with `mgc run` on four simulated devices (data and tensor
# parallel, dp=2 x tp=2): first 20 steps checked step by step against the
# same training on one device, again with gradient accumulation, then 300
# steps, watching the loss fall.
#
# It builds only what it runs: the mgc tool with the CPU backend, without
# the tests, the benchmarks or the CUDA kernels, in a build folder of its
# own (build-cpu/, or $MGC_BUILD_DIR), so that scripts/test.sh's complete
# build in build/ keeps its settings.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
build=${MGC_BUILD_DIR:-$root/build-cpu}
MGC_BUILD_DIR=$build MGC_CUDA=OFF MGC_BUILD_TARGETS=mgc \
  "$root/scripts/build.sh" -DMGC_BUILD_TESTS=OFF
mgc=$build/tools/mgc/mgc
out=$build/gpt.mgir
echo "== mgc compile samples/gpt.mg --emit=ir -o $out"
"$mgc" compile "$root/samples/gpt.mg" --emit=ir -o "$out"
echo "$(grep -c '^  param ' "$out") parameters, $(grep -cE '^  %[0-9]+ = ' "$out") ops; the first lines:"
head -n 8 "$out"
echo "== mgc opt $out --passes=autodiff,optimizer,canonicalize,cse,dce --time-passes"
"$mgc" opt "$out" --passes=autodiff,optimizer,canonicalize,cse,dce --time-passes -o "$build/gpt.step.mgir"
echo "training step: $(grep -cE '^  %[0-9]+ = ' "$build/gpt.step.mgir") ops, $(grep -c '^  update ' "$build/gpt.step.mgir") updated tensors, written to $build/gpt.step.mgir"
echo "== mgc compile samples/gpt.mg --mesh dp=2,tp=4 --emit=plan (the head and the tail of the table)"
"$mgc" compile "$root/samples/gpt.mg" --mesh dp=2,tp=4 --emit=plan > "$build/gpt.plan.txt"
head -n 8 "$build/gpt.plan.txt"
echo "   ..."
tail -n 4 "$build/gpt.plan.txt"
tiny=(-D V=256 -D T=16 -D D=32 -D H=2 -D L=2 -D B=4)
echo "== mgc run samples/gpt.mg (a tiny GPT: V=256 T=16 D=32 H=2 L=2 B=4) on a dp=2 x tp=2 mesh,"
echo "   20 steps checked against one device (--check-single)"
"$mgc" run "$root/samples/gpt.mg" "${tiny[@]}" --steps 20 --lr 1e-2 --log-every 10 \
  --text "$root/samples/data/rhymes.txt" --mesh dp=2,tp=2 --check-single
echo "== the same 20 steps with each batch run as 2 micro-batches per device (gradient"
echo "   accumulation: --accumulate 2), checked against one device without it"
"$mgc" run "$root/samples/gpt.mg" "${tiny[@]}" --steps 20 --lr 1e-2 --log-every 10 \
  --text "$root/samples/data/rhymes.txt" --mesh dp=2,tp=2 --accumulate 2 --check-single
if command -v mpirun >/dev/null && grep -q '^MGC_MPI:BOOL=ON' "$build/CMakeCache.txt"; then
  echo "== the same 20 steps as 4 processes, one per device (mpirun), over MPI: the"
  echo "   losses equal the simulated mesh's above bit for bit"
  mpirun=(mpirun --oversubscribe --mca btl self,vader --mca btl_vader_single_copy_mechanism none)
  [ "$(id -u)" -eq 0 ] && mpirun+=(--allow-run-as-root)
  "${mpirun[@]}" -np 4 "$mgc" run "$root/samples/gpt.mg" "${tiny[@]}" --steps 20 --lr 1e-2 \
    --log-every 10 --text "$root/samples/data/rhymes.txt" --mesh dp=2,tp=2 </dev/null | cat
fi
echo "== the same on samples/data/rhymes.txt for 300 steps on the mesh"
"$mgc" run "$root/samples/gpt.mg" "${tiny[@]}" --steps 300 --lr 1e-2 --log-every 50 \
  --text "$root/samples/data/rhymes.txt" --mesh dp=2,tp=2 --save "$build/gpt-tiny.ckpt"
echo "the loss starts near ln(256) = 5.545; the checkpoint is $build/gpt-tiny.ckpt"
