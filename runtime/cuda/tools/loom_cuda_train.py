#!/usr/bin/env python3
"""Trains a --target=cuda artifact on GPUs through loom_runtime.h.

usage: [mpirun -np R] loom_cuda_train.py MODEL.loom --lib libloom_runtime.so
           (--init INIT.safetensors | --random-init)
           (--data CORPUS.tokens | --random-data VOCAB) [--seed N]
           [--steps K] [--warmup W] [--log-json FILE] [--device N]
           [--comm auto|nccl|staged] [--timeout SECONDS]

The GPU twin of `loom-run MODEL.loom --np R` for machines without LLVM
(a GPU node, utils/gpu-node.sh): it needs only Python 3, numpy, the runtime
library and its CUDA driver (libloom_runtime.so, libloom_cuda_driver.so
next to it or named by $LOOM_CUDA_DRIVER; runtime/cuda/standalone builds
both) and, for an artifact of more
than one rank, mpi4py under mpirun (one process per rank). Each rank
drives --device (default: its rank on the node modulo the node's GPUs);
--comm picks how ranks talk: nccl (one GPU per rank), staged (MPI through
host memory, so ranks may share a GPU) or auto (nccl unless they share
one); --timeout bounds how long NCCL may wait for a peer before the
watchdog aborts. Rank 0 prints and writes the log. It loads the parameters from a safetensors file of F32 tensors under
the artifact's (Hugging Face) names, the moments at zero, cuts step s's
batch from the token file by the batch rule of docs/token-file.md (rows
start at ((s-1)*B + b) * S mod (N - S)), and prints each step as loom-run
does; --log-json writes loom-run's JSON lines ({"step", "loss",
"tokens_per_second", "step_ms"}), which test/reference/compare_logs.py
compares. Exits 1 with the runtime's message on any failure.

For throughput runs (benchmarks/gpu-train.py --loom), where carrying a
model's weights and a corpus to the GPU machine is not worth it:
--random-init draws the parameters here as Hugging Face initializes GPT-2
(matrices normal with std 0.02, vectors named *bias zeros, other vectors
— the norms' weights — ones; not the importer's generator, so not the same
values as --init-weights), --random-data VOCAB draws every step's tokens
and labels uniformly from [0, VOCAB), both from --seed. The last line is
`loom_cuda_train: summary {...}`, a JSON object with the median step time
and tokens/s over the steps after --warmup.
"""
import argparse
import ctypes
import json
import statistics
import struct
import sys
import time

import numpy as np


COMM_KINDS = {"auto": 0, "nccl": 2, "staged": 3}  # loom_comm_kind
LOOM_BACKEND_CUDA = 1


class SessionOptions(ctypes.Structure):
    _fields_ = [
        ("backend", ctypes.c_int),
        ("device", ctypes.c_int32),
        ("comm", ctypes.c_int),
        ("timeout_seconds", ctypes.c_double),
    ]


class StateInfo(ctypes.Structure):
    _fields_ = [
        ("key", ctypes.c_char_p),
        ("dtype", ctypes.c_int),
        ("rank", ctypes.c_int32),
        ("shape", ctypes.POINTER(ctypes.c_int64)),
        ("global_shape", ctypes.POINTER(ctypes.c_int64)),
        ("offsets", ctypes.POINTER(ctypes.c_int64)),
        ("owner", ctypes.c_int32),
    ]


def load_library(path):
    lib = ctypes.CDLL(path)
    p = ctypes.c_void_p
    lib.loom_artifact_load.argtypes = [ctypes.c_char_p, ctypes.POINTER(p), ctypes.c_char_p, ctypes.c_size_t]
    lib.loom_artifact_free.argtypes = [p]
    lib.loom_artifact_batch_rows.argtypes = [p]
    lib.loom_artifact_batch_rows.restype = ctypes.c_int64
    lib.loom_artifact_seq_len.argtypes = [p]
    lib.loom_artifact_seq_len.restype = ctypes.c_int64
    lib.loom_artifact_world_size.argtypes = [p]
    lib.loom_session_options_init.argtypes = [ctypes.POINTER(SessionOptions)]
    lib.loom_session_options_init.restype = None
    lib.loom_session_create.argtypes = [p, ctypes.POINTER(SessionOptions), ctypes.POINTER(p), ctypes.c_char_p,
                                        ctypes.c_size_t]
    lib.loom_session_comm_name.argtypes = [p]
    lib.loom_session_comm_name.restype = ctypes.c_char_p
    lib.loom_session_free.argtypes = [p]
    lib.loom_session_error.argtypes = [p]
    lib.loom_session_error.restype = ctypes.c_char_p
    lib.loom_session_workspace_bytes.argtypes = [p]
    lib.loom_session_workspace_bytes.restype = ctypes.c_int64
    lib.loom_session_state_bytes.argtypes = [p]
    lib.loom_session_state_bytes.restype = ctypes.c_int64
    lib.loom_session_state_count.argtypes = [p]
    lib.loom_session_state_info.argtypes = [p, ctypes.c_int32, ctypes.POINTER(StateInfo)]
    lib.loom_session_set_state_global.argtypes = [p, ctypes.c_int32, p]
    lib.loom_session_get_state_global.argtypes = [p, ctypes.c_int32, p]
    lib.loom_session_set_batch.argtypes = [p, p, p]
    lib.loom_session_step.argtypes = [p, ctypes.c_int64, ctypes.POINTER(ctypes.c_double)]
    return lib


def read_safetensors(path):
    """{name: float32 array} of a safetensors file of F32 tensors."""
    with open(path, "rb") as f:
        blob = f.read()
    (size,) = struct.unpack_from("<Q", blob)
    header = json.loads(blob[8:8 + size])
    tensors = {}
    for name, entry in header.items():
        if name == "__metadata__":
            continue
        if entry["dtype"] != "F32":
            raise ValueError(f"{path}: {name} is {entry['dtype']}, not F32")
        begin, end = entry["data_offsets"]
        data = np.frombuffer(blob, dtype="<f4", count=(end - begin) // 4, offset=8 + size + begin)
        tensors[name] = data.reshape(entry["shape"])
    return tensors


def read_tokens(path):
    """The ids of a LOOMTOKS file (docs/token-file.md)."""
    with open(path, "rb") as f:
        blob = f.read()
    magic, version, width, count = struct.unpack_from("<8sIIQ", blob)
    if magic != b"LOOMTOKS" or version != 1 or width not in (2, 4) or len(blob) != 24 + width * count:
        raise ValueError(f"{path}: not a version 1 LOOMTOKS file")
    return np.frombuffer(blob, dtype="<u2" if width == 2 else "<u4", count=count, offset=24).astype(np.int64)


def batch(ids, step, rows, seq_len):
    """Step `step`'s (1-based) tokens and labels, int32 [rows, seq_len]."""
    span = len(ids) - seq_len
    starts = [((step - 1) * rows + b) * seq_len % span for b in range(rows)]
    window = np.stack([ids[s:s + seq_len + 1] for s in starts])
    return (np.ascontiguousarray(window[:, :-1], dtype=np.int32),
            np.ascontiguousarray(window[:, 1:], dtype=np.int32))


def random_parameter(rng, name, shape):
    """A parameter as Hugging Face initializes GPT-2 (see --random-init)."""
    if len(shape) >= 2:
        return rng.normal(0.0, 0.02, shape).astype(np.float32)
    return np.full(shape, 0.0 if name.endswith("bias") else 1.0, dtype=np.float32)


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("artifact")
    parser.add_argument("--lib", required=True, help="libloom_runtime.so")
    init = parser.add_mutually_exclusive_group(required=True)
    init.add_argument("--init", help="initial weights (F32 safetensors)")
    init.add_argument("--random-init", action="store_true")
    data = parser.add_mutually_exclusive_group(required=True)
    data.add_argument("--data", help="a LOOMTOKS token file")
    data.add_argument("--random-data", type=int, metavar="VOCAB")
    parser.add_argument("--seed", type=int, default=0, help="of --random-init and --random-data")
    parser.add_argument("--steps", type=int, default=10)
    parser.add_argument("--warmup", type=int, default=0, help="steps left out of the summary's median")
    parser.add_argument("--log-json")
    parser.add_argument("--device", type=int, help="CUDA device (default: node rank modulo the GPUs)")
    parser.add_argument("--comm", choices=sorted(COMM_KINDS), help="how ranks talk (default: auto under MPI)")
    parser.add_argument("--timeout", type=float, default=300.0,
                        help="seconds a step may wait for its peers under NCCL (0: forever)")
    args = parser.parse_args()
    world = None  # mpi4py's COMM_WORLD, under MPI

    def fail(message):
        where = f" rank {world.Get_rank()}" if world is not None else ""
        print(f"loom_cuda_train:{where} error: {message}", file=sys.stderr, flush=True)
        if world is not None and world.Get_size() > 1:
            world.Abort(1)  # the other ranks would wait for this one forever
        sys.exit(1)

    lib = load_library(args.lib)
    error = ctypes.create_string_buffer(4096)
    artifact = ctypes.c_void_p()
    if lib.loom_artifact_load(args.artifact.encode(), ctypes.byref(artifact), error, len(error)):
        fail(error.value.decode())
    ranks = lib.loom_artifact_world_size(artifact)
    session = ctypes.c_void_p()
    options = SessionOptions()
    lib.loom_session_options_init(ctypes.byref(options))
    options.backend = LOOM_BACKEND_CUDA
    options.timeout_seconds = args.timeout
    if ranks == 1 and args.comm is None:
        options.device = args.device or 0  # one rank without MPI
    else:
        try:
            from mpi4py import MPI  # initializes MPI
        except ImportError:
            fail(f"the artifact runs on {ranks} ranks: that needs mpi4py, under mpirun -np {ranks}")
        world = MPI.COMM_WORLD
        options.device = -1 if args.device is None else args.device  # -1: the runtime picks by node rank
        options.comm = COMM_KINDS[args.comm or "auto"]
    if lib.loom_session_create(artifact, ctypes.byref(options), ctypes.byref(session), error, len(error)):
        fail(error.value.decode())
    rank = world.Get_rank() if world is not None else 0

    def check(status, what):
        if status:
            fail(f"{what}: {lib.loom_session_error(session).decode()}")

    rng = np.random.default_rng(args.seed)
    weights = None if args.random_init else read_safetensors(args.init)
    for i in range(lib.loom_session_state_count(session)):
        info = StateInfo()
        check(lib.loom_session_state_info(session, i, ctypes.byref(info)), "state info")
        key = info.key.decode()
        if not key.startswith("param:"):
            continue  # moments start at zero
        name = key[len("param:"):]
        shape = [info.global_shape[d] for d in range(info.rank)]
        if weights is None:
            value = random_parameter(rng, name, shape)
        elif name not in weights:
            fail(f"{args.init} has no tensor {name}")
        elif list(weights[name].shape) != shape:
            fail(f"{args.init}: {name} is {list(weights[name].shape)}, the artifact takes {shape}")
        else:
            value = np.ascontiguousarray(weights[name], dtype=np.float32)
        check(lib.loom_session_set_state_global(session, i, value.ctypes.data), key)
        if [info.shape[d] for d in range(info.rank)] == shape:  # whole here
            back = np.empty_like(value)
            check(lib.loom_session_get_state_global(session, i, back.ctypes.data), key)
            if not np.array_equal(back, value):
                fail(f"{key} did not round-trip through the device")

    rows = lib.loom_artifact_batch_rows(artifact)
    seq_len = lib.loom_artifact_seq_len(artifact)
    if args.data:
        ids = read_tokens(args.data)
        if len(ids) <= seq_len:
            fail(f"{args.data}: needs more than {seq_len} tokens")
    if not 0 <= args.warmup < args.steps:
        fail(f"--warmup {args.warmup} leaves none of the {args.steps} steps")
    def say(text):
        if rank == 0:
            print(text, flush=True)

    comm = lib.loom_session_comm_name(session).decode()
    say(f"loom_cuda_train: CUDA backend, {ranks} rank{'s' if ranks > 1 else ''}"
        + (f" ({comm} communication)" if comm != "none" else "") + f", batch {rows} x {seq_len} tokens, "
        f"workspace {lib.loom_session_workspace_bytes(session)} bytes, "
        f"state {lib.loom_session_state_bytes(session)} bytes (rank 0)")
    lines = []
    loss = ctypes.c_double()
    for step in range(1, args.steps + 1):
        if args.data:
            tokens, labels = batch(ids, step, rows, seq_len)
        else:
            tokens, labels = (rng.integers(0, args.random_data, (rows, seq_len), dtype=np.int32)
                              for _ in range(2))
        start = time.perf_counter()
        check(lib.loom_session_set_batch(session, tokens.ctypes.data, labels.ctypes.data), "set_batch")
        check(lib.loom_session_step(session, step, ctypes.byref(loss)), f"step {step}")
        seconds = time.perf_counter() - start
        tokens_per_second = rows * seq_len / seconds
        say(f"step {step:4d}  loss {loss.value:.6f}  {tokens_per_second:9.0f} tokens/s  {seconds * 1e3:8.1f} ms")
        lines.append(json.dumps({"step": step, "loss": loss.value, "tokens_per_second": tokens_per_second,
                                 "step_ms": seconds * 1e3}))
    if args.log_json and rank == 0:
        with open(args.log_json, "w") as f:
            f.write("".join(line + "\n" for line in lines))
    median_ms = statistics.median(json.loads(line)["step_ms"] for line in lines[args.warmup:])
    say("loom_cuda_train: summary " + json.dumps({
        "ranks": ranks, "rows": rows, "seq_len": seq_len, "steps": args.steps, "warmup": args.warmup,
        "median_step_ms": median_ms, "tokens_per_second": rows * seq_len / (median_ms * 1e-3),
        "last_loss": loss.value}))
    lib.loom_session_free(session)
    lib.loom_artifact_free(artifact)
    return 0


if __name__ == "__main__":
    sys.exit(main())
