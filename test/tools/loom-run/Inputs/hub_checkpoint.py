"""Rewrites a Loom GPT-2 checkpoint the way the Hugging Face hub stores
GPT-2: names without "transformer.", bf16 values, a causal-mask buffer per
layer (h.N.attn.bias, [1, 1, P, P]), and the tied lm_head.weight copy.
With --int-wpe, wpe.weight is stored as I32 instead (a corrupt file)."""

import json
import os
import struct
import sys

import numpy as np

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "../../../reference"))
from safetensors_io import read_safetensors  # noqa: E402


def bf16_bytes(array):
    bits = np.asarray(array, dtype=np.float32).view(np.uint32)
    rounded = ((bits + 0x7FFF + ((bits >> 16) & 1)) >> 16).astype("<u2")
    return rounded.tobytes()


def main():
    source, target = sys.argv[1], sys.argv[2]
    int_wpe = "--int-wpe" in sys.argv
    tensors, _ = read_safetensors(source)
    entries = []  # (name, dtype, shape, bytes)
    for name, tensor in tensors.items():
        name = name.removeprefix("transformer.")
        values = tensor.numpy()
        if int_wpe and name == "wpe.weight":
            entries.append((name, "I32", values.shape, values.astype("<i4").tobytes()))
            continue
        entries.append((name, "BF16", values.shape, bf16_bytes(values)))
        if name.endswith("ln_1.bias"):
            layer = name.split(".")[1]
            positions = tensors["transformer.wpe.weight"].shape[0]
            mask = np.tril(np.ones((positions, positions), dtype=np.uint8))
            entries.append((f"h.{layer}.attn.bias", "BOOL",
                            (1, 1, positions, positions), mask.tobytes()))
    wte = tensors["transformer.wte.weight"].numpy()
    entries.append(("lm_head.weight", "BF16", wte.shape, bf16_bytes(wte)))

    header, offset = {"__metadata__": {"format": "pt"}}, 0
    for name, dtype, shape, data in entries:
        header[name] = {"dtype": dtype, "shape": list(shape),
                        "data_offsets": [offset, offset + len(data)]}
        offset += len(data)
    text = json.dumps(header).encode()
    text += b" " * (-len(text) % 8)
    with open(target, "wb") as f:
        f.write(struct.pack("<Q", len(text)) + text)
        for entry in entries:
            f.write(entry[3])


if __name__ == "__main__":
    main()
