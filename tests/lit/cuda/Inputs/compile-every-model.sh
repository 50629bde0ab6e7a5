#!/usr/bin/env bash
# Compiles for the CUDA backend (mgc compile --backend cuda: fusion within
# its limits, then its own check of every program, no GPU needed) every
# sample in each precision (fp32, bf16, fp16), every valid model file under tests/, and the
# meshes and pipelines of the equivalence tests and of the GPU check (every
# stage, gather and update program of a pipeline).
# Prints one line per program, "ok: ..." or "refused: ..." with the error,
# and ends with a count; exits 1 when anything is refused.
# Usage: compile-every-model.sh SOURCE_ROOT
set -uo pipefail
src=$1
refused=0 total=0

check() {
  local what=$1
  shift
  total=$((total + 1))
  if out=$(mgc compile "$@" --backend cuda 2>&1 >/dev/null); then
    echo "ok: $what"
  else
    refused=$((refused + 1))
    echo "refused: $what"
    echo "$out" | head -n 6
  fi
}

for model in "$src"/samples/*.mg; do
  for precision in fp32 bf16 fp16; do
    check "$(basename "$model") $precision" "$model" --precision $precision
  done
done
# Model files of the golden tests (the diagnostics' are invalid on purpose,
# and train.mg sets a training key that does not exist).
while read -r model; do
  check "${model#"$src"/}" "$model"
done < <(find "$src/tests" -name '*.mg' -not -path '*/diagnostics/*' \
  -not -name train.mg | sort)

mlp=("$src/samples/mlp.mg" -D B=16 -D D=12 -D H=24 -D C=5)
gpt=("$src/samples/gpt.mg" -D V=256 -D T=16 -D D=32 -D H=2 -D L=2 -D B=8)
meshes=(
  "--devices 2" "--mesh tp=2" "--mesh dp=2,tp=2" "--devices 4 --zero 1"
  "--devices 2 --zero 2" "--mesh dp=2 --dp-weights 3,1"
  "--devices 2 --accumulate 2" "--mesh dp=2,tp=2 --zero 1"
  "--mesh dp=2,tp=2 --accumulate 2"
)
for flags in "${meshes[@]}"; do
  # shellcheck disable=SC2086
  check "mlp $flags" "${mlp[@]}" $flags --emit=plan
  # shellcheck disable=SC2086
  check "gpt $flags" "${gpt[@]}" $flags --emit=plan
  # shellcheck disable=SC2086
  check "gpt bf16 $flags" "${gpt[@]}" $flags --precision bf16 --emit=plan
done
# fp16's loss scaling on a mesh, with ZeRO and accumulation.
check "gpt fp16 --mesh dp=2,tp=2 --zero 1" "${gpt[@]}" --mesh dp=2,tp=2 --zero 1 \
  --precision fp16 --emit=plan
check "gpt fp16 --mesh dp=2 --accumulate 2" "${gpt[@]}" --mesh dp=2 --accumulate 2 \
  --precision fp16 --emit=plan

# Pipelines, on a GPT of four layers: every schedule, and the stage meshes.
gpt4=("$src/samples/gpt.mg" -D V=256 -D T=16 -D D=32 -D H=2 -D L=4 -D B=8)
pipelines=(
  "--mesh pp=2" "--mesh pp=2,dp=2,tp=2 --microbatches 4"
  "--mesh pp=2 --microbatches 4 --pipeline-schedule gpipe"
  "--mesh pp=2 --microbatches 4 --pipeline-schedule zb-h1"
  "--mesh pp=2 --microbatches 4 --pipeline-schedule interleaved --virtual-stages 2"
  "--mesh pp=2,dp=2 --zero 1"
)
for flags in "${pipelines[@]}"; do
  for precision in fp32 bf16 fp16; do
    # shellcheck disable=SC2086
    check "gpt $precision $flags" "${gpt4[@]}" $flags --precision $precision \
      --emit=plan
  done
done

echo "$((total - refused)) of $total programs compile for CUDA"
[ "$refused" -eq 0 ]
