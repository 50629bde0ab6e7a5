#!/usr/bin/env python3
"""checkpoint-digest.py CKPT: one line per tensor of an mgc checkpoint, a
safetensors file or an index of shards (docs/checkpoints.md), with the
SHA-256 of its whole bytes, then its metadata: two checkpoints that print
the same lines hold the same tensors bit for bit. An index is reassembled
from its shards here, in plain Python; where Python's safetensors package
is installed every shard is also read with it and must give the same
bytes. Every file's per-tensor checksums ("xxh64.<name>" metadata) are
verified with an XXH64 written here from its specification; they are
integrity data of each file, not printed."""
import hashlib, json, os, struct, sys


P1, P2, P3 = 11400714785074694791, 14029467366897019727, 1609587929392839161
P4, P5, M64 = 9650029242287828579, 2870177450012600261, 2**64 - 1


def rotl(x, r):
    return ((x << r) | (x >> (64 - r))) & M64


def xxh_round(acc, lane):
    return (rotl((acc + lane * P2) & M64, 31) * P1) & M64


def xxh64(data, seed=0):
    """XXH64 (github.com/Cyan4973/xxHash, doc/xxhash_spec.md)."""
    n, i = len(data), 0
    if n >= 32:
        v = [(seed + P1 + P2) & M64, (seed + P2) & M64, seed, (seed - P1) & M64]
        while i + 32 <= n:
            lanes = struct.unpack_from("<4Q", data, i)
            v = [xxh_round(a, l) for a, l in zip(v, lanes)]
            i += 32
        h = (rotl(v[0], 1) + rotl(v[1], 7) + rotl(v[2], 12) + rotl(v[3], 18)) & M64
        for a in v:
            h = ((h ^ xxh_round(0, a)) * P1 + P4) & M64
    else:
        h = (seed + P5) & M64
    h = (h + n) & M64
    while i + 8 <= n:
        h ^= xxh_round(0, struct.unpack_from("<Q", data, i)[0])
        h = (rotl(h, 27) * P1 + P4) & M64
        i += 8
    if i + 4 <= n:
        h ^= (struct.unpack_from("<I", data, i)[0] * P1) & M64
        h = (rotl(h, 23) * P2 + P3) & M64
        i += 4
    while i < n:
        h ^= (data[i] * P5) & M64
        h = (rotl(h, 11) * P1) & M64
        i += 1
    h = ((h ^ (h >> 33)) * P2) & M64
    h = ((h ^ (h >> 29)) * P3) & M64
    return h ^ (h >> 32)


assert xxh64(b"") == 0xEF46DB3751D8E999  # the specification's value


def read_safetensors(path):
    with open(path, "rb") as f:
        data = f.read()
    (n,) = struct.unpack("<Q", data[:8])
    header = json.loads(data[8 : 8 + n])
    body = data[8 + n :]
    meta = header.pop("__metadata__", {})
    tensors = {k: (v["dtype"], v["shape"], body[v["data_offsets"][0] : v["data_offsets"][1]]) for k, v in header.items()}
    sums = {k[len("xxh64.") :]: v for k, v in meta.items() if k.startswith("xxh64.")}
    assert not sums or sorted(sums) == sorted(tensors), path
    for name, want in sums.items():
        got = "%016x" % xxh64(tensors[name][2])
        assert got == want, "%s: tensor %s has xxh64 %s, the file says %s" % (path, name, got, want)
    meta = {k: v for k, v in meta.items() if not k.startswith("xxh64.")}
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
