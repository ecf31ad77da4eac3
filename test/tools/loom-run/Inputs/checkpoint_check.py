#!/usr/bin/env python3
"""Checks sharded checkpoints (loom-run --save on the cpu backend) without Loom.

usage: checkpoint_check.py same-names A.safetensors B.safetensors
       checkpoint_check.py assembled DIR CONSOLIDATED.safetensors

same-names: both files hold the same tensor names with the same dtypes and
shapes. assembled: the parameters ("param:<name>") put together from DIR's
index.json and rank files, bit for bit, are the tensors of the consolidated
file under <name>. Standard library only: the files are read here, by the
safetensors format, independently of Loom's reader. Prints PASS or FAIL and
exits 0 or 1.
"""
import itertools
import json
import os
import struct
import sys


def read_safetensors(path):
    """{name: (dtype, shape, bytes)} of a safetensors file."""
    with open(path, "rb") as f:
        blob = f.read()
    (size,) = struct.unpack("<Q", blob[:8])
    header = json.loads(blob[8:8 + size])
    data = blob[8 + size:]
    tensors = {}
    for name, entry in header.items():
        if name == "__metadata__":
            continue
        begin, end = entry["data_offsets"]
        tensors[name] = (entry["dtype"], entry["shape"], data[begin:end])
    return tensors


def assemble(global_shape, shards, files):
    """The global tensor's bytes (F32) put together from its shards."""
    strides = [1] * len(global_shape)
    for d in range(len(global_shape) - 2, -1, -1):
        strides[d] = strides[d + 1] * global_shape[d + 1]
    total = 1
    for dim in global_shape:
        total *= dim
    out = bytearray(4 * total)
    written = 0
    for shard in shards:
        offsets, shape = shard["offsets"], shard["shape"]
        raw = files[shard["file"]][shard["key"]][2]
        if not shape:
            out[:4] = raw
            written += 1
            continue
        row = shape[-1]
        for i, index in enumerate(itertools.product(*(range(n) for n in shape[:-1]))):
            at = offsets[-1] + sum((o + x) * s for o, x, s in zip(offsets, index, strides))
            out[4 * at:4 * (at + row)] = raw[4 * i * row:4 * (i + 1) * row]
            written += row
    if written != total:
        raise ValueError(f"shards hold {written} of {total} values")
    return bytes(out)


def same_names(a, b):
    ta, tb = read_safetensors(a), read_safetensors(b)
    sa = {n: (d, s) for n, (d, s, _) in ta.items()}
    sb = {n: (d, s) for n, (d, s, _) in tb.items()}
    if sa != sb:
        print(f"FAIL: only in {a}: {sorted(set(sa.items()) - set(sb.items()))}; "
              f"only in {b}: {sorted(set(sb.items()) - set(sa.items()))}")
        return 1
    print(f"PASS: {len(sa)} tensors with the same names, dtypes and shapes")
    return 0


def assembled(directory, consolidated):
    with open(os.path.join(directory, "index.json")) as f:
        index = json.load(f)
    files = {}
    result = read_safetensors(consolidated)
    params = 0
    for key, tensor in index["tensors"].items():
        if not key.startswith("param:"):
            continue
        for shard in tensor["shards"]:
            shard["key"] = key
            if shard["file"] not in files:
                files[shard["file"]] = read_safetensors(os.path.join(directory, shard["file"]))
        name = key[len("param:"):]
        expected = assemble(tensor["global_shape"], tensor["shards"], files)
        if name not in result:
            print(f"FAIL: {consolidated} has no tensor {name!r}")
            return 1
        dtype, shape, raw = result[name]
        if dtype != "F32" or shape != tensor["global_shape"] or raw != expected:
            print(f"FAIL: {name}: {dtype} {shape} differs from the shards put together")
            return 1
        params += 1
    if params != len(result):
        print(f"FAIL: {consolidated} holds {len(result)} tensors, the checkpoint {params} parameters")
        return 1
    print(f"PASS: {params} parameters equal the checkpoint's shards put together")
    return 0


def main():
    command, a, b = sys.argv[1:4]
    return {"same-names": same_names, "assembled": assembled}[command](a, b)


if __name__ == "__main__":
    sys.exit(main())
