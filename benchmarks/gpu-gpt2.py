#!/usr/bin/env python3
"""GPT-2 124M training throughput on one GPU: PyTorch eager, torch.compile, Loom.

The side of issue 8's benchmark that PyTorch runs: GPT-2 small (12 layers,
width 768, 12 heads, vocabulary 50257, sequence 1024), bf16 autocast with
float32 master weights and AdamW state (the mixed precision Loom plans),
fused AdamW, PyTorch's fused attention (scaled_dot_product_attention), the
largest micro-batch of --batches that fits, random tokens. Prints one row
per engine: micro-batch, median step time, tokens/s and MFU (model FLOPs:
6 N T for the weights plus 12 L S T d for attention, over the GPU's dense
bf16 peak).

Loom's row: with --loom ARTIFACT[,ARTIFACT...] (--target=cuda artifacts of
the same model at several micro-batches, largest first; utils/gpu-bench.sh
prepare writes them: bf16, dropout off),
runtime/cuda/tools/loom_cuda_train.py trains each through
libloom_cuda_runtime.so from --loom-runtime (the build folder of
runtime/cuda/standalone) for the same steps, from random weights and
tokens, until one does not run out of GPU memory; the row takes its median
step with the same FLOP count. Without --loom the row says it was not run.
utils/gpu-bench.sh run does the build, the conformance test and this.

usage: python3 benchmarks/gpu-gpt2.py [--steps 30] [--warmup 10]
       [--batches 64,48,32,16,8] [--engines eager,compile]
       [--loom ARTIFACT[,ARTIFACT...] [--loom-runtime BUILD_DIR]
        [--loom-profile FILE]]
Needs a CUDA GPU and PyTorch 2 (the device image has both).
"""
import argparse
import json
import os
import statistics
import subprocess
import sys
import time

import torch
import torch.nn as nn
import torch.nn.functional as F

# Dense bf16 tensor-core peaks (FLOP/s) by device name, from NVIDIA's data
# sheets (SXM parts).
PEAKS = {"H100": 989e12, "H200": 989e12, "A100": 312e12}


class Block(nn.Module):
    def __init__(self, d, heads):
        super().__init__()
        self.heads = heads
        self.ln_1 = nn.LayerNorm(d)
        self.c_attn = nn.Linear(d, 3 * d)
        self.c_proj = nn.Linear(d, d)
        self.ln_2 = nn.LayerNorm(d)
        self.c_fc = nn.Linear(d, 4 * d)
        self.mlp_proj = nn.Linear(4 * d, d)

    def forward(self, x):
        b, s, d = x.shape
        q, k, v = self.c_attn(self.ln_1(x)).split(d, dim=-1)
        q, k, v = (t.view(b, s, self.heads, d // self.heads).transpose(1, 2)
                   for t in (q, k, v))
        a = F.scaled_dot_product_attention(q, k, v, is_causal=True)
        x = x + self.c_proj(a.transpose(1, 2).reshape(b, s, d))
        h = F.gelu(self.c_fc(self.ln_2(x)), approximate="tanh")
        return x + self.mlp_proj(h)


class GPT2(nn.Module):
    def __init__(self, layers=12, d=768, heads=12, vocab=50257, positions=1024):
        super().__init__()
        self.wte = nn.Embedding(vocab, d)
        self.wpe = nn.Embedding(positions, d)
        self.h = nn.ModuleList(Block(d, heads) for _ in range(layers))
        self.ln_f = nn.LayerNorm(d)
        for p in self.parameters():
            if p.dim() > 1:
                nn.init.normal_(p, std=0.02)

    def forward(self, tokens, labels):
        s = tokens.shape[1]
        x = self.wte(tokens) + self.wpe.weight[:s]
        for block in self.h:
            x = block(x)
        logits = self.ln_f(x) @ self.wte.weight.t()  # tied output layer
        return F.cross_entropy(logits.float().view(-1, logits.shape[-1]),
                               labels.view(-1))


def model_flops_per_token(model, layers, seq, d):
    n = sum(p.numel() for p in model.parameters())
    return 6 * n + 12 * layers * seq * d, n


def run(engine, batch, args, device):
    torch.manual_seed(0)
    model = GPT2().to(device)
    opt = torch.optim.AdamW(model.parameters(), lr=6e-4, fused=True)
    step_fn = model if engine == "eager" else torch.compile(model)
    seq = 1024
    times = []
    for step in range(args.steps):
        tokens = torch.randint(0, 50257, (batch, seq), device=device)
        labels = torch.randint(0, 50257, (batch, seq), device=device)
        torch.cuda.synchronize()
        start = time.perf_counter()
        with torch.autocast("cuda", dtype=torch.bfloat16):
            loss = step_fn(tokens, labels)
        loss.backward()
        opt.step()
        opt.zero_grad(set_to_none=True)
        torch.cuda.synchronize()
        times.append(time.perf_counter() - start)
    flops, params = model_flops_per_token(model, 12, seq, 768)
    median = statistics.median(times[args.warmup:])
    del model, opt, step_fn
    torch.cuda.empty_cache()
    return median, batch * seq / median, flops, params


def run_loom(artifact, args, steps=None, profile=None):
    """(micro-batch, median step seconds, tokens/s, last loss) of a Loom
    artifact; None when it runs out of GPU memory; exits with the driver's
    output on any other failure. With `profile`, the kernels' times go to
    that file (LOOM_CUDA_PROFILE, docs/cuda.md)."""
    root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    steps = steps or args.steps
    command = [sys.executable, os.path.join(root, "runtime/cuda/tools/loom_cuda_train.py"),
               artifact, "--lib", os.path.join(args.loom_runtime, "libloom_cuda_runtime.so"),
               "--random-init", "--random-data", "50257", "--seed", "0",
               "--steps", str(steps), "--warmup", str(min(args.warmup, steps - 1))]
    env = dict(os.environ)
    if profile:
        env["LOOM_CUDA_PROFILE"] = os.path.abspath(profile)
    done = subprocess.run(command, capture_output=True, text=True, env=env)
    prefix = "loom_cuda_train: summary "
    summary = [line[len(prefix):] for line in done.stdout.splitlines() if line.startswith(prefix)]
    if done.returncode and "out of memory" in done.stderr:
        return None  # CudaDevice::allocate's "cudaMalloc of N bytes ...: out of memory"
    if done.returncode or not summary:
        sys.exit(f"gpu-gpt2.py: {' '.join(command)} failed ({done.returncode}):\n"
                 + "\n".join((done.stdout + done.stderr).splitlines()[-20:]))
    result = json.loads(summary[-1])
    return (result["rows"], result["median_step_ms"] * 1e-3, result["tokens_per_second"],
            result["last_loss"])


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--steps", type=int, default=30)
    parser.add_argument("--warmup", type=int, default=10)
    parser.add_argument("--batches", default="64,48,32,16,8")
    parser.add_argument("--engines", default="eager,compile",
                        help="PyTorch engines, comma-separated (empty: none)")
    parser.add_argument("--loom", metavar="ARTIFACT[,ARTIFACT...]",
                        help="--target=cuda GPT-2 124M artifacts, largest micro-batch first")
    parser.add_argument("--loom-runtime", metavar="BUILD_DIR", default="/tmp/loom-build-gpu",
                        help="where runtime/cuda/standalone built libloom_cuda_runtime.so")
    parser.add_argument("--loom-profile", metavar="FILE",
                        help="then run Loom's artifact 5 more steps with LOOM_CUDA_PROFILE=FILE "
                             "and print its per-kernel table")
    args = parser.parse_args()
    if not torch.cuda.is_available():
        sys.exit("gpu-gpt2.py: no CUDA GPU")
    device = torch.device("cuda")
    name = torch.cuda.get_device_name()
    peak = next((v for k, v in PEAKS.items() if k in name), None)
    torch.backends.cuda.matmul.allow_tf32 = True
    print(f"GPT-2 124M, seq 1024, bf16 autocast + fp32 master weights, fused AdamW; "
          f"{name}, torch {torch.__version__}; median of steps "
          f"{args.warmup + 1}..{args.steps}")
    print(f"{'engine':<16} {'micro-batch':>11} {'step ms':>9} {'tokens/s':>10} {'MFU':>7}")
    for engine in filter(None, args.engines.split(",")):
        for batch in (int(b) for b in args.batches.split(",")):
            try:
                median, tps, flops, _ = run(engine, batch, args, device)
            except torch.cuda.OutOfMemoryError:
                torch.cuda.empty_cache()
                continue
            mfu = f"{100 * tps * flops / peak:.1f}%" if peak else "n/a"
            print(f"{engine:<16} {batch:>11} {median * 1e3:>9.1f} {tps:>10.0f} {mfu:>7}",
                  flush=True)
            break
    if not args.loom:
        print(f"{'loom':<16} {'-':>11} {'-':>9} {'-':>10} {'-':>7}  "
              "(not run: --loom ARTIFACT, see utils/gpu-bench.sh)")
        return
    with torch.device("meta"):
        flops, _ = model_flops_per_token(GPT2(), 12, 1024, 768)
    for artifact in args.loom.split(","):
        result = run_loom(artifact, args)
        if result:
            break
    else:
        sys.exit(f"gpu-gpt2.py: every artifact of --loom {args.loom} ran out of GPU memory")
    batch, median, tps, loss = result
    mfu = f"{100 * tps * flops / peak:.1f}%" if peak else "n/a"
    print(f"{'loom (cuda)':<16} {batch:>11} {median * 1e3:>9.1f} {tps:>10.0f} {mfu:>7}  "
          f"(loss {loss:.4f} at step {args.steps})", flush=True)
    if args.loom_profile:
        # The table of this run only: an old one is removed first; under a
        # launcher of several ranks the runtime writes FILE.rank0 and so on.
        for stale in (args.loom_profile, args.loom_profile + ".rank0"):
            if os.path.exists(stale):
                os.remove(stale)
        if not run_loom(artifact, args, steps=5, profile=args.loom_profile):
            sys.exit("gpu-gpt2.py: the profiled Loom run ran out of GPU memory")
        path = next((p for p in (args.loom_profile, args.loom_profile + ".rank0")
                     if os.path.exists(p)), None)
        if not path:
            sys.exit(f"gpu-gpt2.py: the profiled Loom run wrote no {args.loom_profile}")
        with open(path) as table:
            print(f"\nLoom's kernels, micro-batch {batch} ({path}):")
            print(table.read(), end="")


if __name__ == "__main__":
    main()
