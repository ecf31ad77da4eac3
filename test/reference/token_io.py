"""Reader/writer for Loom's token files and the batch rule, for Loom's
independent PyTorch reference.

Token file layout (all little-endian):
    bytes 0..7    ASCII "LOOMTOKS"
    bytes 8..11   u32 version = 1
    bytes 12..15  u32 bytes per token (2 or 4)
    bytes 16..23  u64 count N
    bytes 24..    N token ids, each `bytes per token` wide (unsigned)

Batch rule for step s (0-based), micro-batch B, sequence length S:
    row b starts at start = ((s*B + b) * S) % (N - S)
    tokens[b][t] = ids[start + t],  labels[b][t] = ids[start + t + 1],  t < S
"""

import struct

import numpy as np

MAGIC = b"LOOMTOKS"
VERSION = 1
_ID_TYPES = {2: "<u2", 4: "<u4"}


def write_tokens(path, ids, bytes_per_token=None):
    """Writes token ids; picks 2 bytes per id when all ids fit, else 4."""
    ids = np.asarray(ids, dtype=np.int64)
    if ids.size and ids.min() < 0:
        raise ValueError("token ids must be non-negative")
    if bytes_per_token is None:
        bytes_per_token = 2 if ids.size == 0 or ids.max() < 2 ** 16 else 4
    if bytes_per_token not in _ID_TYPES:
        raise ValueError("bytes per token must be 2 or 4")
    if ids.size and ids.max() >= 2 ** (8 * bytes_per_token):
        raise ValueError(f"token id {ids.max()} does not fit in {bytes_per_token} bytes")
    with open(path, "wb") as f:
        f.write(MAGIC)
        f.write(struct.pack("<IIQ", VERSION, bytes_per_token, ids.size))
        f.write(ids.astype(_ID_TYPES[bytes_per_token]).tobytes())


def read_tokens(path):
    """Returns the token ids of a token file as an int64 numpy array."""
    with open(path, "rb") as f:
        blob = f.read()
    if blob[:8] != MAGIC:
        raise ValueError(f"{path}: not a LOOMTOKS file")
    version, width, count = struct.unpack("<IIQ", blob[8:24])
    if version != VERSION or width not in _ID_TYPES:
        raise ValueError(f"{path}: unsupported version {version} / width {width}")
    if len(blob) != 24 + width * count:
        raise ValueError(f"{path}: expected {count} ids of {width} bytes")
    return np.frombuffer(blob, dtype=_ID_TYPES[width], offset=24).astype(np.int64)


def batch_starts(num_ids, step, micro_batch, seq_len):
    """Start offsets of the B rows of step `step`."""
    if num_ids <= seq_len:
        raise ValueError(f"need more than seq_len={seq_len} tokens, have {num_ids}")
    span = num_ids - seq_len
    return [((step * micro_batch + b) * seq_len) % span for b in range(micro_batch)]


def batch_for_step(ids, step, micro_batch, seq_len):
    """Returns (tokens, labels), each an int64 array of shape [B, S]."""
    rows = [ids[s:s + seq_len + 1] for s in batch_starts(len(ids), step, micro_batch, seq_len)]
    window = np.stack(rows).astype(np.int64)
    return window[:, :-1].copy(), window[:, 1:].copy()
