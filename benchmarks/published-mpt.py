#!/usr/bin/env python3
"""loom-plan against MosaicML's MPT throughput tables, A100 and H100.

llm-foundry's scripts/train/benchmarking/README.md publishes the tokens/s
per GPU of the same MPT models, trained by the same stack (PyTorch FSDP
FULL_SHARD, bf16, llm-foundry's Triton FlashAttention with the ALiBi
bias), on A100-80GB and H100-80GB nodes. For each configuration both
tables have, this script writes the model as a GPT config (MPT has no
dropout and no position table; its vocabulary is 50368), runs
`loom-plan --estimate` with the row's GPUs, micro-batch, accumulation
and activation checkpointing (ZeRO-3 over the data-parallel GPUs), and
prints Loom's tokens/s per GPU over the published one, then the geometric
mean and range per device.

--attention A100,H100 costs the stack's attention kernel at those
fractions of each device's peak (loom-plan --attention-efficiency);
`presets` leaves the cluster's own. The default, 0.325 on the A100 and
0.163 on the H100, is a FlashAttention-1-class kernel (25-40% of the
A100's peak, FlashAttention-2's abstract) that on an H100 does what it did
per SM and clock on an A100 (132 SMs at 1830 MHz against 108 at 1410: the
H100's peak needs wgmma, which kernels written for Ampere do not use);
test/Unit/PublishedRunsTest.cpp (MosaicMPTOnA100AndH100) holds Loom to
these rows.

usage: benchmarks/published-mpt.py [--build build] [--attention 0.325,0.163 | presets]
"""

import argparse
import json
import math
import os
import subprocess
import sys
import tempfile

# d_model, n_layers, n_heads (llm-foundry's yamls/mpt).
MODELS = {"760m": (1536, 24, 12), "1b": (2048, 24, 16), "3b": (2560, 32, 20),
          "7b": (4096, 32, 32), "13b": (5120, 40, 40), "30b": (7168, 48, 64)}

# model, tokens, GPUs, micro-batch, accumulation, checkpointing, tokens/s/GPU
A100 = [("760m", 2048, 8, 24, 2, False, 32434),
        ("760m", 8192, 8, 6, 2, False, 20933),
        ("1b", 2048, 8, 14, 4, False, 20513),
        ("1b", 8192, 8, 3, 4, False, 13814),
        ("1b", 32768, 8, 1, 4, False, 6275),
        ("3b", 2048, 8, 10, 2, False, 10811),
        ("3b", 8192, 8, 3, 6, False, 7695),
        ("7b", 2048, 8, 6, 2, False, 4641),
        ("7b", 8192, 8, 8, 2, True, 3206),
        ("7b", 32768, 8, 2, 2, True, 1672),
        ("13b", 2048, 8, 2, 3, False, 2262),
        ("13b", 4096, 8, 10, 3, True, 2060),
        ("30b", 2048, 8, 3, 21, True, 916)]
H100 = [("760m", 2048, 16, 24, 1, False, 68551),
        ("760m", 8192, 8, 6, 2, False, 41825),
        ("1b", 2048, 8, 14, 1, False, 45455),
        ("1b", 8192, 8, 3, 4, False, 29157),
        ("1b", 32768, 8, 1, 4, False, 12025),
        ("3b", 2048, 16, 10, 3, False, 24142),
        ("3b", 8192, 8, 3, 6, False, 16578),
        ("7b", 2048, 8, 6, 1, False, 10643),
        ("7b", 8192, 8, 8, 2, True, 6935),
        ("7b", 32768, 8, 2, 2, True, 3318),
        ("13b", 2048, 8, 2, 1, False, 4792),
        ("13b", 4096, 8, 10, 3, True, 4717),
        ("30b", 2048, 8, 3, 21, True, 2002)]


def parse_args():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--build", default="build")
    parser.add_argument("--attention", default="0.325,0.163",
                        help="A100,H100 fractions of the peak, or presets")
    return parser.parse_args()


def estimate(loom_plan, folder, row, cluster, attention):
    model, seq, gpus, micro, accumulation, checkpointing, _ = row
    hidden, layers, heads = MODELS[model]
    config = os.path.join(folder, f"mpt-{model}-{seq}.json")
    with open(config, "w") as out:
        json.dump({"model_type": "gpt2", "n_embd": hidden, "n_layer": layers,
                   "n_head": heads, "vocab_size": 50368, "n_positions": seq,
                   "attn_pdrop": 0, "resid_pdrop": 0, "embd_pdrop": 0}, out)
    command = [loom_plan, config, "--estimate", "--dp", str(gpus),
               "--zero", "3", "--micro-batch", str(micro),
               "--global-batch", str(gpus * micro * accumulation),
               "--seq", str(seq), "--cluster", f"{cluster}:{gpus // 8}",
               "--recompute", "full" if checkpointing else "none", "--json"]
    if attention is not None:
        command += ["--attention-efficiency", str(attention)]
    result = subprocess.run(command, capture_output=True, text=True)
    if result.returncode:
        sys.exit(f"published-mpt.py: {' '.join(command)}: "
                 f"{result.stderr.strip()}")
    return json.loads(result.stdout)["tokens_per_s"] / gpus


def main():
    args = parse_args()
    loom_plan = os.path.join(args.build, "bin", "loom-plan")
    if not os.access(loom_plan, os.X_OK):
        sys.exit(f"published-mpt.py: no {loom_plan}; build first "
                 "(--build names the build tree)")
    if args.attention == "presets":
        rates = (None, None)
    else:
        try:
            rates = tuple(float(x) for x in args.attention.split(","))
        except ValueError:
            rates = ()
        if len(rates) != 2:
            sys.exit(f"published-mpt.py: --attention {args.attention}: "
                     "expected A100,H100 fractions or presets")
    print(f"{'device':9} {'model':5} {'tokens':>6} {'GPUs':>4} "
          f"{'Loom tok/s/GPU':>14} {'published':>9} {'ratio':>6}")
    with tempfile.TemporaryDirectory() as folder:
        for cluster, rows, rate in (("a100-80g", A100, rates[0]),
                                    ("h100-80g", H100, rates[1])):
            ratios = []
            for row in rows:
                predicted = estimate(loom_plan, folder, row, cluster, rate)
                ratios.append(predicted / row[6])
                print(f"{cluster:9} {row[0]:5} {row[1]:6d} {row[2]:4d} "
                      f"{predicted:14.0f} {row[6]:9d} {ratios[-1]:6.2f}")
            geomean = math.exp(sum(map(math.log, ratios)) / len(ratios))
            print(f"{cluster}: geometric mean {geomean:.3f}, range "
                  f"{min(ratios):.2f} to {max(ratios):.2f}, "
                  f"{sum(abs(r - 1) <= 0.15 for r in ratios)} of "
                  f"{len(ratios)} within 15%")
    return 0


if __name__ == "__main__":
    sys.exit(main())
