#!/usr/bin/env bash
# same-as-one-process.sh "MPIRUN" NP DIR -- RUN-ARGS...
# Runs `mgc run RUN-ARGS` once in one process (the mesh simulated) and once
# as NP processes under MPIRUN, each saving a checkpoint and a JSON log, and
# says whether the two runs are bit-identical: every tensor of the
# checkpoints (parameters, optimizer state, step; the one process writes a
# file, the NP processes shards and an index) and the metadata, and every
# step's loss and gradient norm.
set -euo pipefail
mpirun=$1 np=$2 dir=$3
shift 3
[ "$1" = -- ] && shift
rm -rf "$dir" && mkdir -p "$dir"
mgc run "$@" --save "$dir/one.ckpt" --log-json "$dir/one.jsonl" > "$dir/one.out"
$mpirun -np "$np" mgc run "$@" --save "$dir/many.ckpt" \
  --log-json "$dir/many.jsonl" > "$dir/many.out"
digest="python3 $(dirname "$0")/checkpoint-digest.py"
$digest "$dir/one.ckpt" > "$dir/one.digest"
$digest "$dir/many.ckpt" | grep -v '^safetensors:' > "$dir/many.digest"
diff "$dir/one.digest" "$dir/many.digest" || { echo "checkpoints differ"; exit 1; }
python3 - "$dir/one.jsonl" "$dir/many.jsonl" "$np" <<'PY'
import json, sys
def steps(path):
    return [(r["step"], r["loss"], r.get("grad_norm")) for r in map(json.loads, open(path))]
one, many = steps(sys.argv[1]), steps(sys.argv[2])
if one != many:
    sys.exit("the logs differ:\n%s\n%s" % (one, many))
print("identical on %s processes: %d steps, final loss %r" % (sys.argv[3], len(one), one[-1][1]))
PY
# The MPI communicator's counted bytes against the simulated mesh's figure.
sent() { grep '^communication per device' "$1" | sed -E 's/, [0-9.]+% exposed//g'; }
if [ "$(sent "$dir/one.out")" = "$(sent "$dir/many.out")" ] && [ -n "$(sent "$dir/one.out")" ]; then
  echo "the same bytes sent per step by every device"
else
  echo "bytes sent differ:"; sent "$dir/one.out"; sent "$dir/many.out"
fi
