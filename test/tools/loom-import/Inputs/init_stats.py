"""Prints, for each tensor of a safetensors file, its name, shape, mean and
standard deviation (numpy only, independent of Loom's reader)."""

import json
import struct
import sys

import numpy as np

with open(sys.argv[1], "rb") as f:
    (size,) = struct.unpack("<Q", f.read(8))
    header = json.loads(f.read(size))
    data = f.read()
header.pop("__metadata__", None)
for name, info in sorted(header.items(), key=lambda kv: kv[1]["data_offsets"][0]):
    begin, end = info["data_offsets"]
    values = np.frombuffer(data[begin:end], dtype="<f4").astype(np.float64)
    shape = "x".join(str(d) for d in info["shape"])
    print(f"{name} {info['dtype']} {shape} mean {values.mean():.3f} std {values.std():.4f}")
