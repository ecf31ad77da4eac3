#!/usr/bin/python3
"""Tokens/s of one compiled CPU rank next to PyTorch on the same model.

Trains the demo model (examples/configs/gpt2-tiny.json, batch 8 x 64) for
--steps steps with `loom-run` on one MPI rank (the compiled artifact), and
the same model, written from the HF definition in
test/reference/torch_reference.py, with torch (eager, float32, AdamW) on
the same batches; both with --threads threads (OPENBLAS_NUM_THREADS and
torch.set_num_threads). Prints the median step time and tokens/s of each
after --warmup steps, and the ratio.

usage: /usr/bin/python3 benchmarks/cpu-step.py [--build build] [--steps 60]
       [--warmup 10] [--threads 1]
"""
import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time

root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(root, "test", "reference"))

import torch  # noqa: E402
import torch.nn.functional as F  # noqa: E402
import torch_reference as ref  # noqa: E402
from token_io import batch_for_step, read_tokens  # noqa: E402


def run(cmd, **kw):
    subprocess.run(cmd, check=True, **kw)


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--build", default=os.path.join(root, "build"))
    parser.add_argument("--steps", type=int, default=60)
    parser.add_argument("--warmup", type=int, default=10)
    parser.add_argument("--threads", type=int, default=1)
    args = parser.parse_args()
    bin_dir = os.path.join(args.build, "bin")
    config = os.path.join(root, "examples", "configs", "gpt2-tiny.json")
    batch, seq = 8, 64
    env = dict(os.environ, OPENBLAS_NUM_THREADS=str(args.threads),
               OMPI_ALLOW_RUN_AS_ROOT="1", OMPI_ALLOW_RUN_AS_ROOT_CONFIRM="1")

    with tempfile.TemporaryDirectory() as tmp:
        tokens = os.path.join(tmp, "corpus.tokens")
        init = os.path.join(tmp, "init.safetensors")
        train = os.path.join(tmp, "train.mlir")
        model = os.path.join(tmp, "model.loom")
        log = os.path.join(tmp, "log.jsonl")
        run([f"{bin_dir}/loom-tokenize", os.path.join(root, "examples", "data", "corpus.txt"),
             "-o", tokens])
        graph = subprocess.run([f"{bin_dir}/loom-import", config, "--micro-batch", str(batch),
                                "--seq-len", str(seq), "--init-weights", init],
                               check=True, capture_output=True).stdout
        run([f"{bin_dir}/loom-opt", "-", "--loom-autodiff",
             "--loom-optimizer=kind=adamw lr=3e-3 weight-decay=0", "--inline", "-o", train],
            input=graph)
        run([f"{bin_dir}/loom-compile", train, "-o", model])
        run([f"{bin_dir}/loom-run", model, "--np", "1", "--init", init, "--data", tokens,
             "--steps", str(args.steps), "--log-json", log], env=env, stdout=subprocess.DEVNULL)
        with open(log) as f:
            loom_ms = [json.loads(line)["step_ms"] for line in f if line.strip()]

        torch.set_num_threads(args.threads)
        cfg = json.load(open(config))
        hp = ref.hparams(cfg)
        params = ref.load_params(cfg, init, torch.float32)
        opt = torch.optim.AdamW(params.values(), lr=3e-3, weight_decay=0.0)
        ids = read_tokens(tokens)
        torch_ms = []
        for step in range(args.steps):
            x, y = batch_for_step(ids, step, batch, seq)
            x = torch.from_numpy(x)
            y = torch.from_numpy(y)
            start = time.perf_counter()
            logits = ref.gpt2_logits(params, x, hp)
            loss = F.cross_entropy(logits.reshape(-1, logits.shape[-1]), y.reshape(-1))
            opt.zero_grad()
            loss.backward()
            opt.step()
            torch_ms.append((time.perf_counter() - start) * 1e3)

    tokens_per_step = batch * seq
    rows = []
    for name, times in (("loom compiled (1 MPI rank)", loom_ms), ("PyTorch eager", torch_ms)):
        median = statistics.median(times[args.warmup:])
        rows.append((name, median, tokens_per_step / median * 1e3))
    print(f"gpt2-tiny, batch {batch} x {seq}, {args.threads} thread(s), "
          f"median of steps {args.warmup + 1}..{args.steps}")
    print(f"{'engine':<28} {'step ms':>9} {'tokens/s':>10}")
    for name, ms, tps in rows:
        print(f"{name:<28} {ms:>9.2f} {tps:>10.0f}")
    print(f"ratio loom / torch: {rows[0][2] / rows[1][2]:.2f}x")


if __name__ == "__main__":
    main()
