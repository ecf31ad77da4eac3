"""Pure-Python safetensors reader/writer for Loom's independent PyTorch reference.

This is an independent implementation of the safetensors container format
(https://github.com/huggingface/safetensors), written without the
`safetensors` package:

    bytes 0..7      little-endian u64 N, the header length
    bytes 8..8+N    UTF-8 JSON: {name: {"dtype", "shape", "data_offsets": [b, e]},
                                 "__metadata__": {str: str}}   (optional)
    bytes 8+N..     the data; tensor bytes are [8+N+b, 8+N+e), little-endian,
                    row-major

Reading supports F64/F32/F16/BF16 (and integer/bool buffers, returned as-is).
Writing supports F32 (the default), F64, F16 and BF16; the header is padded
with spaces so that the data starts at a multiple of 8 bytes.
"""

import json
import struct
from collections import OrderedDict

import numpy as np
import torch

# safetensors dtype tag -> little-endian numpy storage type.
_NUMPY_STORAGE = {
    "F64": "<f8", "F32": "<f4", "F16": "<f2", "BF16": "<u2",
    "I64": "<i8", "I32": "<i4", "I16": "<i2", "I8": "i1",
    "U64": "<u8", "U32": "<u4", "U16": "<u2", "U8": "u1", "BOOL": "u1",
}
_WRITABLE = ("F32", "F64", "F16", "BF16")


def _bf16_bits_to_f32(bits):
    """BF16 bit patterns (uint16) -> float32 values (exact)."""
    return (bits.astype(np.uint32) << 16).view(np.float32)


def _f32_to_bf16_bits(values):
    """float32 values -> BF16 bit patterns, round to nearest even."""
    bits = np.ascontiguousarray(values, dtype=np.float32).view(np.uint32)
    rounding = ((bits >> 16) & 1) + np.uint32(0x7FFF)
    return ((bits + rounding) >> 16).astype(np.uint16)


def _decode(dtype, raw, shape):
    """Bytes of one tensor -> torch tensor (BF16 is widened to float32)."""
    if dtype not in _NUMPY_STORAGE:
        raise ValueError(f"unsupported safetensors dtype {dtype}")
    array = np.frombuffer(raw, dtype=_NUMPY_STORAGE[dtype]).reshape(shape)
    if dtype == "BF16":
        array = _bf16_bits_to_f32(array)
    elif dtype == "BOOL":
        array = array.astype(bool)
    elif dtype in ("U16", "U32", "U64"):
        array = array.astype(np.int64)  # torch has no wide unsigned types
    return torch.from_numpy(array.astype(array.dtype.newbyteorder("="), copy=True))


def read_header(path):
    """Returns (header dict without __metadata__, metadata dict, data start)."""
    with open(path, "rb") as f:
        (length,) = struct.unpack("<Q", f.read(8))
        header = json.loads(f.read(length).decode("utf-8"))
    metadata = header.pop("__metadata__", None) or {}
    return header, metadata, 8 + length


def read_safetensors(path):
    """Returns (OrderedDict name -> torch tensor, metadata dict).

    Tensors come in file (data offset) order.
    """
    header, metadata, data_start = read_header(path)
    with open(path, "rb") as f:
        blob = f.read()
    tensors = OrderedDict()
    for name, info in sorted(header.items(), key=lambda kv: kv[1]["data_offsets"][0]):
        begin, end = info["data_offsets"]
        raw = blob[data_start + begin:data_start + end]
        tensors[name] = _decode(info["dtype"], raw, tuple(info["shape"]))
    return tensors, metadata


def _encode(tensor, dtype):
    """torch tensor -> little-endian bytes in safetensors dtype `dtype`."""
    values = tensor.detach().cpu().to(torch.float64).contiguous().numpy()
    if dtype == "BF16":
        return _f32_to_bf16_bits(values.astype(np.float32)).astype("<u2").tobytes()
    return values.astype(_NUMPY_STORAGE[dtype]).tobytes()


def write_safetensors(path, tensors, metadata=None, dtype="F32"):
    """Writes an ordered {name: tensor} mapping, every tensor as `dtype`."""
    if dtype not in _WRITABLE:
        raise ValueError(f"cannot write dtype {dtype}")
    header, chunks, offset = OrderedDict(), [], 0
    if metadata:
        header["__metadata__"] = {str(k): str(v) for k, v in metadata.items()}
    for name, tensor in tensors.items():
        data = _encode(tensor, dtype)
        header[name] = {"dtype": dtype, "shape": list(tensor.shape),
                        "data_offsets": [offset, offset + len(data)]}
        chunks.append(data)
        offset += len(data)
    text = json.dumps(header, separators=(",", ":")).encode("utf-8")
    text += b" " * (-len(text) % 8)
    with open(path, "wb") as f:
        f.write(struct.pack("<Q", len(text)))
        f.write(text)
        for data in chunks:
            f.write(data)
