#!/usr/bin/env python3
"""checkpoint-digest.py CKPT: one line per tensor of an mgc checkpoint, a
safetensors file or an index of shards (docs/checkpoints.md), with the
SHA-256 of its whole bytes, then its metadata: two checkpoints that print
the same lines hold the same tensors bit for bit. An index is reassembled
from its shards here, in plain Python; where Python's safetensors package
is installed every shard is also read with it and must give the same
bytes."""
import hashlib, json, os, struct, sys


def read_safetensors(path):
    with open(path, "rb") as f:
        data = f.read()
    (n,) = struct.unpack("<Q", data[:8])
    header = json.loads(data[8 : 8 + n])
    body = data[8 + n :]
    meta = header.pop("__metadata__", {})
    tensors = {k: (v["dtype"], v["shape"], body[v["data_offsets"][0] : v["data_offsets"][1]]) for k, v in header.items()}
    return tensors, meta


SIZES = {"F32": 4, "F64": 8, "BF16": 2, "F16": 2, "I32": 4, "I64": 8}


def assemble(shape, size, slabs):
    """The whole tensor's bytes from (offsets, slab shape, bytes) boxes."""
    whole = bytearray(size * max(1, 1 if not shape else eval("*".join(map(str, shape)) or "0")))
    strides = [1] * len(shape)
    for d in range(len(shape) - 2, -1, -1):
        strides[d] = strides[d + 1] * shape[d + 1]
    for offsets, box, raw in slabs:
        if not shape:
            whole[:] = raw
            continue
        run = box[-1] * size
        rows = 1
        for b in box[:-1]:
            rows *= b
        for r in range(rows):
            index, rest = [], r
            for b in reversed(box[:-1]):
                index.append(rest % b)
                rest //= b
            index.reverse()
            at = sum((index[d] + offsets[d]) * strides[d] for d in range(len(box) - 1)) + offsets[-1]
            whole[at * size : at * size + run] = raw[r * run : (r + 1) * run]
    return bytes(whole)


def main(path):
    with open(path, "rb") as f:
        first = f.read(1)
    out = {}
    if first == b"{":
        index = json.load(open(path))
        meta = index["metadata"]
        folder = os.path.dirname(path)
        shards = {}
        for name, t in index["tensors"].items():
            slabs = []
            for s in t["slabs"]:
                if s["file"] not in shards:
                    shards[s["file"]] = read_safetensors(os.path.join(folder, s["file"]))[0]
                dtype, shape, raw = shards[s["file"]][s["key"]]
                slabs.append((s["offsets"], shape, raw))
            out[name] = (t["dtype"], t["shape"], assemble(t["shape"], SIZES[t["dtype"]], slabs))
        try:
            from safetensors.numpy import load_file
        except ImportError:
            print("safetensors: not installed, shards read here only")
        else:
            for file, tensors in shards.items():
                loaded = load_file(os.path.join(folder, file))
                assert sorted(loaded) == sorted(tensors), file
                for key, (dtype, shape, raw) in tensors.items():
                    if dtype != "BF16":
                        assert loaded[key].tobytes() == raw, key
            print("safetensors: read %d shards, the same bytes" % len(shards))
    else:
        out, meta = read_safetensors(path)
    for name in sorted(out):
        dtype, shape, raw = out[name]
        print("tensor %s %s%s %s" % (name, dtype, shape, hashlib.sha256(raw).hexdigest()))
    for k in sorted(meta):
        print("meta %s=%s" % (k, meta[k]))


main(sys.argv[1])
