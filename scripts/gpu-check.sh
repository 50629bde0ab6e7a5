#!/usr/bin/env bash
# The GPU check, in two halves.
#
#   scripts/gpu-check.sh          here (no GPU needed): builds mgc with the
#                                 CUDA backend for sm_90 into build-gpu/ and
#                                 bundles what the GPU machine needs into
#                                 gpu-bundle/bundle.tar.gz (git-ignored):
#                                 the stripped mgc and mgc_unit_tests, and
#                                 any shared library they use that is
#                                 neither a system one nor CUDA's.
#   scripts/gpu-check.sh --run    on the GPU machine, from the repository
#                                 root with gpu-bundle/ beside it: runs
#                                 1. every CUDA kernel against the CPU one
#                                    (mgc_unit_tests -tc='cuda*'), and
#                                    the NCCL communicator with one rank
#                                    against the CPU's (across GPUs too
#                                    where there are several);
#                                 2. a few training steps of every sample on
#                                    CUDA and on the CPU, losses compared;
#                                    and every mesh of the CPU's
#                                    multi-process equivalence test, and
#                                    pipelines, with their devices simulated
#                                    on the GPU, against the same mesh on
#                                    the CPU;
#                                 3. the benchmarks: GPT-2 124M (B=16,
#                                    T=1024) and the 8 x 4096 MLP (B=16384),
#                                    bf16, mgc against PyTorch
#                                    (bench/torch_reference.py) in the same
#                                    run;
#                                 4. the 124M step's GPU time per op from
#                                    its trace, against its wall time;
#                                 and ends with a table. Also writes it all
#                                 to $OUT/gpu-check.txt when OUT is set.
#                                 Exits 1 when any check falls short (a
#                                 loss difference over its limit, a run
#                                 that failed): the table marks it SHORT.
# Environment: GPU_CHECK_STEPS (benchmark steps, default 20), CUDA_ARCH
# (default 90), MGC_GPU_BUILD_DIR (default build-gpu; an existing build
# with the CUDA backend is used as it is).
set -uo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
bundle=$root/gpu-bundle

build_and_bundle() {
  set -e
  local build=${MGC_GPU_BUILD_DIR:-$root/build-gpu}
  "$root/scripts/install-deps.sh"
  # A build folder already configured with the CUDA backend (the test
  # build, say) is used as it is; a new one is configured without MPI, as
  # the checks below run one process.
  if ! grep -qs '^MGC_CUDA:BOOL=ON' "$build/CMakeCache.txt"; then
    cmake -S "$root" -B "$build" -G Ninja -DCMAKE_BUILD_TYPE=Release \
      -DMGC_CUDA=ON -DMGC_MPI=OFF -DCMAKE_CUDA_ARCHITECTURES="${CUDA_ARCH:-90}" >/dev/null
  fi
  cmake --build "$build" --target mgc mgc_unit_tests -- ${MGC_NINJA_FLAGS:-}
  rm -rf "$bundle"
  mkdir -p "$bundle/lib"
  for exe in "$build/tools/mgc/mgc" "$build/tests/mgc_unit_tests"; do
    strip -o "$bundle/$(basename "$exe")" "$exe"
    # Libraries from elsewhere than the system folders and CUDA's travel
    # along; the binaries find them through LD_LIBRARY_PATH in --run.
    ldd "$exe" | awk '/=> \// {print $3}' | while read -r lib; do
      # Open MPI's libraries (a build with MPI) travel too: the GPU
      # machine's may be of another version.
      case "$lib" in
      */libmpi.so* | */libopen-rte.so* | */libopen-pal.so* | */libhwloc.so* | \
        */libevent*.so*) cp -L "$lib" "$bundle/lib/" ;;
      /lib/* | /usr/lib/* | /usr/local/cuda*) ;;
      *) cp -L "$lib" "$bundle/lib/" ;;
      esac
    done
  done
  # Compressed, the bundle is about 20 MiB instead of 70 (the binaries hold
  # sm_90 kernels, static cudart and LLVM's libraries).
  tar -C "$bundle" -czf "$root/gpu-bundle.tar.gz" .
  rm -rf "$bundle"
  mkdir -p "$bundle"
  mv "$root/gpu-bundle.tar.gz" "$bundle/bundle.tar.gz"
  du -sh "$bundle"
  echo "bundled; on the GPU machine run: scripts/gpu-check.sh --run" \
    "(with gpu-bundle/ copied beside the checkout)"
}

# --- on the GPU machine -----------------------------------------------------

log() { echo "$@" | tee -a "$report"; }

# The mean step time in ms of a --log-json file, skipping the first
# `skip` steps (allocation, cuBLASLt heuristics, graph capture).
mean_ms() {
  python3 - "$1" "$2" <<'EOF'
import json, sys
steps = [json.loads(l) for l in open(sys.argv[1]) if l.strip()]
skip = int(sys.argv[2])
times = [s["step_time"] for s in steps[skip:]]
print("%.2f" % (1e3 * sum(times) / len(times)) if times else "-")
EOF
}

# The bytes the last step of a --log-json file copied in and out.
transfers() {
  python3 - "$1" <<'EOF'
import json, sys
last = [json.loads(l) for l in open(sys.argv[1]) if l.strip()][-1]
print("h2d %s B, d2h %s B per step" % (last.get("h2d_bytes", "?"), last.get("d2h_bytes", "?")))
EOF
}

# Largest relative difference of the per-step losses of two --log-json files.
loss_diff() {
  python3 - "$1" "$2" <<'EOF'
import json, sys
a, b = ([json.loads(l)["loss"] for l in open(p) if l.strip()] for p in sys.argv[1:3])
if len(a) != len(b) or not a:
    print("missing")
else:
    print("%.2e" % max(abs(x - y) / max(abs(x), 1e-12) for x, y in zip(a, b)))
EOF
}

rows=()
shortfalls=0
row() {
  case "$2" in failed*) shortfalls=$((shortfalls + 1)) ;; esac
  rows+=("$(printf '%-52s %s' "$1" "$2")")
  log "   -> $1: $2"
}
# A row whose value must be a number at most `limit` (a loss difference);
# anything else ("failed", "missing", more) is a shortfall, marked in the
# table and counted for the exit status.
judged_row() {
  local name=$1 value=$2 limit=$3
  if python3 -c "import sys; sys.exit(0 if float(sys.argv[1]) <= float(sys.argv[2]) else 1)" \
    "$value" "$limit" 2>/dev/null; then
    row "$name" "$value (limit $limit)"
  else
    shortfalls=$((shortfalls + 1))
    row "$name" "SHORT: $value (limit $limit)"
  fi
}
# The doctest summary of a unit-test log as a row: SHORT unless every test
# case ran and passed.
unit_row() {
  local cases
  cases=$(grep -E '^\[doctest\] test cases' "$2" | tail -n 1 | sed 's/\[doctest\] //')
  if [[ $cases =~ \|\ +0\ failed ]]; then
    row "$1" "$cases"
  else
    shortfalls=$((shortfalls + 1))
    row "$1" "SHORT: ${cases:-no summary (crashed or timed out)}"
  fi
}
# Largest relative loss difference allowed, CUDA against the CPU: fp32
# steps add in the same order (bit for bit so far), bf16 rounds in other
# places (cuBLASLt's accumulation order).
kFp32Limit=1e-5
kBf16Limit=1e-2

run_checks() {
  report=${OUT:-/tmp}/gpu-check.txt
  : > "$report"
  export LD_LIBRARY_PATH="$bundle/lib:/usr/local/cuda/lib64:${LD_LIBRARY_PATH:-}"
  local steps=${GPU_CHECK_STEPS:-20} work
  work=$(mktemp -d)
  if [ -f "$bundle/bundle.tar.gz" ]; then
    mkdir -p "$work/bundle"
    tar -C "$work/bundle" -xzf "$bundle/bundle.tar.gz"
    bundle=$work/bundle
    export LD_LIBRARY_PATH="$bundle/lib:$LD_LIBRARY_PATH"
  fi
  local mgc=$bundle/mgc
  # The unit tests read samples/ from the checkout this runs in.
  export MGC_SOURCE_DIR=$root
  if [ ! -x "$mgc" ]; then
    echo "gpu-check: no $mgc: run scripts/gpu-check.sh on a build machine first and copy gpu-bundle/ here"
    exit 2
  fi
  log "== device"
  nvidia-smi -L 2>&1 | tee -a "$report"
  # NCCL is loaded at run time (libnccl.so.2); where the loader's path has
  # none, PyTorch's wheel may carry one.
  if [ -z "${MGC_NCCL_LIBRARY:-}" ] && ! ldconfig -p 2>/dev/null | grep -q 'libnccl\.so\.2'; then
    local nccl
    nccl=$(python3 -c "import nvidia.nccl, os; print(os.path.join(list(nvidia.nccl.__path__)[0], 'lib', 'libnccl.so.2'))" 2>/dev/null || true)
    if [ -n "$nccl" ] && [ -f "$nccl" ]; then export MGC_NCCL_LIBRARY=$nccl; fi
  fi
  log "NCCL: ${MGC_NCCL_LIBRARY:-libnccl.so.2 from the library path}"

  log "== 1. every CUDA kernel against the CPU (mgc_unit_tests -tc='cuda*')"
  local ops="cuda: every op of the samples*"
  timeout 300 "$bundle/mgc_unit_tests" -tc='cuda*' -tce="$ops" > "$work/unit.txt" 2>&1
  tail -n 25 "$work/unit.txt" | tee -a "$report"
  unit_row "kernels: CUDA vs CPU (unit tests)" "$work/unit.txt"
  log "== 1a. every op of every sample's training step, alone, CUDA against the CPU"
  timeout 200 "$bundle/mgc_unit_tests" -tc="$ops" > "$work/unit.txt" 2>&1
  grep -E 'first op|^\[doctest\] test cases' "$work/unit.txt" | tee -a "$report"
  unit_row "every op of the samples' steps (unit test)" "$work/unit.txt"

  log "== 1b. the NCCL communicator (one rank; across GPUs where there are several)"
  timeout 120 "$bundle/mgc_unit_tests" -tc='cuda: the NCCL*' -s 2>&1 | tail -n 12 > "$work/nccl.txt"
  tee -a "$report" < "$work/nccl.txt"
  unit_row "NCCL communicator vs CPU (unit tests)" "$work/nccl.txt"

  log "== 2. training steps of every sample, CUDA against the CPU"
  local args
  for name in mlp deep_mlp gpt llama resnet digits_cnn; do
    case $name in
    mlp) args=(samples/mlp.mg -D B=64) ;;
    gpt) args=(samples/gpt.mg -D V=256 -D T=64 -D D=128 -D H=4 -D L=2 -D B=8) ;;
    llama) args=(samples/llama.mg -D V=256 -D T=64 -D D=128 -D H=4 -D Hkv=2 -D F=256 -D L=2 -D B=8) ;;
    # At its own lr of 0.1 on random data ResNet's loss grows step by step,
    # and any rounding difference with it: 0.01 keeps the comparison about
    # the kernels.
    resnet) args=(samples/resnet.mg -D B=16 --lr 0.01) ;;
    *) args=("samples/$name.mg") ;;
    esac
    for precision in fp32 bf16; do
      for backend in cpu cuda; do
        timeout 120 "$mgc" run "${args[@]}" --steps 10 --backend $backend \
          --precision $precision --log-json "$work/$name-$precision-$backend.json" \
          > "$work/out.txt" 2>&1 || tail -n 3 "$work/out.txt" | tee -a "$report"
      done
      local limit=$kFp32Limit
      [ $precision = bf16 ] && limit=$kBf16Limit
      judged_row "train $name $precision: largest loss difference" \
        "$(loss_diff "$work/$name-$precision-cpu.json" "$work/$name-$precision-cuda.json" 2>/dev/null || echo failed)" \
        $limit
    done
  done

  log "== 2b. meshes simulated on the GPU against the same mesh on the CPU"
  local mlp=(samples/mlp.mg -D B=16 -D D=12 -D H=24 -D C=5 --steps 3)
  local gptModel=(samples/gpt.mg -D V=256 -D T=16 -D D=32 -D H=2 -D L=2 -D B=4
    --text samples/data/rhymes.txt)
  local gpt=("${gptModel[@]}" --steps 3)
  local -a meshes=(
    "mlp|--devices 2" "mlp|--mesh tp=2" "mlp|--mesh dp=2,tp=2"
    "mlp|--devices 4 --zero 1" "mlp|--devices 2 --zero 2"
    "mlp|--mesh dp=2 --dp-weights 3,1" "mlp|--devices 2 --accumulate 2"
    "gpt|--devices 2" "gpt|--mesh dp=2,tp=2 --zero 1"
    "gpt|--mesh dp=2,tp=2 --accumulate 2" "gpt|--mesh pp=2"
    "gpt|--mesh pp=2,dp=2,tp=2 --microbatches 2")
  local entry model flags
  for entry in "${meshes[@]}"; do
    model=${entry%%|*}
    flags=${entry#*|}
    if [ "$model" = mlp ]; then args=("${mlp[@]}"); else args=("${gpt[@]}"); fi
    for backend in cpu cuda; do
      # shellcheck disable=SC2086
      timeout 120 "$mgc" run "${args[@]}" $flags --backend $backend \
        --log-json "$work/mesh-$backend.json" > "$work/out.txt" 2>&1 ||
        tail -n 3 "$work/out.txt" | tee -a "$report"
    done
    judged_row "mesh $model $flags: largest loss difference" \
      "$(loss_diff "$work/mesh-cpu.json" "$work/mesh-cuda.json" 2>/dev/null || echo failed)" \
      $kFp32Limit
    # Accumulation leaves the state and the gradient sums on the GPU: only
    # the batch goes in after the first step. A pipeline keeps its state
    # there too, but its pipe values and the tied embedding's gradient
    # pass through the host.
    case $flags in *accumulate* | *pp=*)
      row "mesh $model $flags: last step's copies" \
        "$(transfers "$work/mesh-cuda.json" 2>/dev/null || echo failed)" ;;
    esac
    rm -f "$work/mesh-cpu.json" "$work/mesh-cuda.json"
  done

  log "== 2c. checkpoints between the backends (saved at step 2, resumed to 4)"
  # The losses of steps 3 and 4 of a resumed run against the CPU's run of
  # four steps without a break.
  local -a moves=("cuda|cpu|" "cpu|cuda|" "cuda|cpu|--mesh dp=2,tp=2" "cpu|cuda|--mesh dp=2,tp=2"
    "cuda|cpu|--mesh pp=2" "cpu|cuda|--mesh pp=2")
  local move from to
  for move in "${moves[@]}"; do
    IFS='|' read -r from to flags <<<"$move"
    # shellcheck disable=SC2086
    timeout 120 "$mgc" run "${gptModel[@]}" $flags --steps 4 --backend cpu \
      --log-json "$work/whole.json" > "$work/out.txt" 2>&1 &&
      timeout 120 "$mgc" run "${gptModel[@]}" $flags --steps 2 --backend "$from" \
        --save "$work/ck.safetensors" > "$work/out.txt" 2>&1 &&
      timeout 120 "$mgc" run "${gptModel[@]}" $flags --steps 4 --backend "$to" \
        --resume "$work/ck.safetensors" --log-json "$work/resumed.json" > "$work/out.txt" 2>&1 ||
      tail -n 3 "$work/out.txt" | tee -a "$report"
    judged_row "checkpoint $from -> $to ${flags:-one device}: loss difference" \
      "$(python3 - "$work/whole.json" "$work/resumed.json" <<'EOF2' 2>/dev/null || echo failed
import json, sys
whole = {r["step"]: r["loss"] for r in map(json.loads, filter(str.strip, open(sys.argv[1])))}
resumed = [json.loads(l) for l in open(sys.argv[2]) if l.strip()]
assert [r["step"] for r in resumed] == [3, 4]
print("%.2e" % max(abs(r["loss"] - whole[r["step"]]) / abs(whole[r["step"]]) for r in resumed))
EOF2
)" $kFp32Limit
    rm -f "$work/whole.json" "$work/resumed.json" "$work/ck.safetensors"*
  done

  # With several GPUs: a GPU per device over NCCL, against the CPU.
  local gpus
  gpus=$(nvidia-smi -L 2>/dev/null | grep -c GPU || true)
  if [ "${gpus:-0}" -ge 2 ]; then
    for backend in cpu cuda; do
      local extra=()
      if [ $backend = cuda ]; then extra=(--gpu-per-device); fi
      timeout 120 "$mgc" run "${gpt[@]}" --devices 2 --backend $backend "${extra[@]}" \
        --log-json "$work/mesh-$backend.json" > "$work/out.txt" 2>&1 ||
        tail -n 3 "$work/out.txt" | tee -a "$report"
    done
    row "gpt --devices 2 --gpu-per-device (NCCL): largest loss difference" \
      "$(loss_diff "$work/mesh-cpu.json" "$work/mesh-cuda.json" 2>/dev/null || echo failed)"
  else
    row "a GPU per device over NCCL" "not run: $gpus GPU(s)"
  fi

  # A timeline of a mesh on the GPU, and the exposed communication of
  # GPT-2 124M on meshes simulated on the GPU (the `communication:` line).
  if timeout 120 "$mgc" run "${mlp[@]}" --mesh dp=2,tp=2 --backend cuda \
    --trace "$work/trace.json" > "$work/out.txt" 2>&1; then
    row "mesh trace on CUDA: events" \
      "$(python3 -c "import json,sys; e=json.load(open(sys.argv[1])); e=e.get('traceEvents', e); print(len(e))" "$work/trace.json")"
  else
    row "mesh trace on CUDA" "failed: $(tail -n 1 "$work/out.txt")"
  fi
  for flags in "--devices 2" "--mesh dp=2,tp=2"; do
    # shellcheck disable=SC2086
    if timeout 300 "$mgc" run samples/gpt.mg -D B=16 --precision bf16 --steps 3 \
      $flags --backend cuda > "$work/out.txt" 2>&1; then
      row "gpt124 bf16 $flags on one GPU" \
        "$(grep -m1 'communication per device' "$work/out.txt" || echo 'no communication line')"
    else
      row "gpt124 bf16 $flags on one GPU" "failed: $(tail -n 1 "$work/out.txt")"
    fi
  done

  log "== 3. benchmarks ($steps steps, mean over all but the first 3)"
  for name in gpt124 mlp8; do
    case $name in
    gpt124) args=(samples/gpt.mg -D B=16) ;;
    mlp8) args=(bench/mlp8.mg) ;;
    esac
    for graph in "" "--cuda-graph"; do
      local tag="$name bf16${graph:+ cuda-graph}"
      if timeout 300 "$mgc" run "${args[@]}" --backend cuda --precision bf16 $graph \
        --steps "$steps" --log-json "$work/bench.json" > "$work/out.txt" 2>&1; then
        local ms
        ms=$(mean_ms "$work/bench.json" 3)
        if [ "$name" = gpt124 ] && [ -z "$graph" ]; then gpt124_ms=$ms; fi
        if [ "$name" = gpt124 ]; then
          # nanoGPT's estimate for 124,466,688 weights: (6 N + 12 L T D) per token.
          row "mgc $tag" "$(python3 -c "ms=$ms; t=16*1024; f=(6*124466688+12*12*1024*768)*t; print('%.2f ms/step, %.1fk tok/s, %.1f TFLOP/s' % (ms, t/ms, f/ms/1e9))"), $(transfers "$work/bench.json")"
        else
          row "mgc $tag" "$(python3 -c "ms=$ms; f=6*16384*8*4096*4096; print('%.2f ms/step, %.1f TFLOP/s' % (ms, f/ms/1e9))"), $(transfers "$work/bench.json")"
        fi
      else
        row "mgc $tag" "failed: $(tail -n 1 "$work/out.txt")"
      fi
    done
  done
  timeout 400 python3 "$root/bench/torch_reference.py" all --steps "$steps" 2>&1 |
    tee "$work/torch.txt" | tee -a "$report"
  while read -r line; do
    case "$line" in
    "torch gpt"* | "torch mlp8"*) row "${line%%:*}" "${line#*: }" ;;
    esac
  done < "$work/torch.txt"

  log "== 4. where the GPU time of the 124M step goes (--trace, last step)"
  if timeout 300 "$mgc" run samples/gpt.mg -D B=16 --precision bf16 --steps 3 \
    --devices 1 --backend cuda --trace "$work/t124.json" \
    > "$work/out.txt" 2>&1; then
    python3 - "$work/t124.json" "${gpt124_ms:-0}" <<'EOF2' | tee -a "$report" > "$work/ops.txt"
import json, sys, collections
events = json.load(open(sys.argv[1]))
events = events.get("traceEvents", events) if isinstance(events, dict) else events
spans = [e for e in events if e.get("ph") == "X"]
by = collections.defaultdict(lambda: [0, 0.0])
for e in spans:
    k = e["name"].split()[0].split("(")[0]
    by[k][0] += 1
    by[k][1] += e.get("dur", 0) / 1e3
# The trace holds every traced step; GPT's step has one cross_entropy_grad.
steps = max(by.get("cross_entropy_grad", [1])[0], 1)
busy = sum(v[1] for v in by.values()) / steps
wall = float(sys.argv[2])
print("GPU busy %.1f ms per step; the one-device step (section 3) %.1f ms: wall / busy %.2f"
      % (busy, wall, wall / busy if busy else 0))
for k, (n, ms) in sorted(by.items(), key=lambda kv: -kv[1][1])[:12]:
    print("  %-24s %5d launches %9.2f ms per step" % (k, n // steps, ms / steps))
EOF2
    row "gpt124 bf16 step on the trace" "$(head -n 1 "$work/ops.txt")"
  else
    row "gpt124 bf16 trace" "failed: $(tail -n 1 "$work/out.txt")"
  fi

  log ""
  log "== summary"
  for r in "${rows[@]}"; do log "$r"; done
  log "shortfalls: $shortfalls"
  rm -rf "$work"
  [ "$shortfalls" -eq 0 ]
}

case "${1:-}" in
--run) run_checks ;;
"") build_and_bundle ;;
*) echo "usage: scripts/gpu-check.sh [--run]" >&2; exit 2 ;;
esac
