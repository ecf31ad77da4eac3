#!/usr/bin/env python3
"""Training throughput on one GPU: PyTorch eager, torch.compile and Loom.

Two models (--model):
  gpt2-124m  GPT-2 small (examples/configs/gpt2.json: 12 layers, width 768,
             12 heads, vocabulary 50257, sequence 1024), tied embedding
  llama-1b   a 1B-class Llama (examples/configs/llama-1b.json: 16 layers,
             width 2048, 32 query heads and 8 key/value heads, SwiGLU MLP
             8192, vocabulary 128256, sequence 2048, RoPE, RMSNorm), tied
             embedding
PyTorch trains each in bf16 autocast with float32 master weights and AdamW
state (the mixed precision Loom plans), fused AdamW, no dropout, attention
through scaled_dot_product_attention (grouped-query heads for the Llama:
enable_gqa), on random tokens, at the largest micro-batch of --batches that
fits. One row per engine: micro-batch, median step time, tokens/s, MFU
(model FLOPs: 6 N T for the weights plus 12 L S T d for attention, over the
GPU's dense bf16 peak) and peak GiB: the most device memory in use while
the engine trained, less what was in use when it started, read through
NVML (pynvml, else nvidia-smi) every 10 ms. It counts what the engine took
from the device, not what its allocator handed out: Loom's CUDA context,
workspace, state and library scratch; PyTorch's caching allocator's
reserve (its context is created before the first reading, so it is not
counted). "n/a" where neither NVML nor nvidia-smi answers.

Loom's row: with --loom ARTIFACT[,ARTIFACT...] (--target=cuda artifacts of
the same model at several micro-batches, largest first: utils/gpu-node.sh
prepare writes them, bf16, dropout off), runtime/cuda/tools/
loom_cuda_train.py trains each through --loom-lib (libloom_runtime.so)
for the same steps, from random weights and tokens, until one does not run
out of GPU memory; the row takes its median step with the same FLOP count.
--loom-profile FILE then runs that artifact 5 more steps with
LOOM_CUDA_PROFILE=FILE and prints its per-kernel table. Loom's row needs
neither PyTorch nor its CUDA; it comes first, so that a run cut short still
has it. utils/gpu-node.sh run runs this for both models.

usage: python3 benchmarks/gpu-train.py [--model gpt2-124m|llama-1b]
       [--steps 30] [--warmup 10] [--batches 64,48,32,16,8]
       [--engines eager,compile]
       [--loom ARTIFACT[,ARTIFACT...] --loom-lib LIB [--loom-profile FILE]]
Exits 77 when PyTorch engines are asked for and PyTorch sees no CUDA GPU.
"""
import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import threading
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))

# Dense bf16 tensor-core peaks (FLOP/s) by device name, from NVIDIA's data
# sheets (SXM parts).
PEAKS = {"H100": 989e12, "H200": 989e12, "A100": 312e12}

MODELS = {
    "gpt2-124m": dict(kind="gpt2", layers=12, d=768, heads=12, kv_heads=12, ff=3072,
                      vocab=50257, seq=1024, batches="64,48,32,16,8"),
    "llama-1b": dict(kind="llama", layers=16, d=2048, heads=32, kv_heads=8, ff=8192,
                     vocab=128256, seq=2048, batches="8,4,2,1", rope_theta=500000.0, eps=1e-5),
}


def parameter_count(m):
    d, ff, layers = m["d"], m["ff"], m["layers"]
    if m["kind"] == "gpt2":  # wte, wpe; per layer 2 norms, c_attn, c_proj, c_fc, mlp proj; ln_f
        per_layer = 4 * d + (3 * d * d + 3 * d) + (d * d + d) + (d * ff + ff) + (ff * d + d)
        return m["vocab"] * d + m["seq"] * d + layers * per_layer + 2 * d
    kv = d // m["heads"] * m["kv_heads"]  # embed; per layer q, k, v, o, gate, up, down, 2 norms; norm
    per_layer = 2 * d * d + 2 * d * kv + 3 * d * ff + 2 * d
    return m["vocab"] * d + layers * per_layer + d


def flops_per_token(m):
    return 6 * parameter_count(m) + 12 * m["layers"] * m["seq"] * m["d"]


def build_model(m):
    """The PyTorch model of `m` (imported here: Loom's row needs no PyTorch)."""
    import torch
    import torch.nn as nn
    import torch.nn.functional as F

    class RMSNorm(nn.Module):  # Hugging Face's LlamaRMSNorm: f32 statistics
        def __init__(self, d):
            super().__init__()
            self.weight = nn.Parameter(torch.ones(d))

        def forward(self, x):
            f = x.float()
            return self.weight * (f * torch.rsqrt(f.pow(2).mean(-1, keepdim=True) + m["eps"])).to(x.dtype)

    class GptBlock(nn.Module):
        def __init__(self):
            super().__init__()
            d = m["d"]
            self.ln_1, self.ln_2 = nn.LayerNorm(d), nn.LayerNorm(d)
            self.c_attn, self.c_proj = nn.Linear(d, 3 * d), nn.Linear(d, d)
            self.c_fc, self.mlp_proj = nn.Linear(d, m["ff"]), nn.Linear(m["ff"], d)

        def forward(self, x, rope):
            b, s, d = x.shape
            q, k, v = (t.view(b, s, m["heads"], -1).transpose(1, 2)
                       for t in self.c_attn(self.ln_1(x)).split(d, dim=-1))
            a = F.scaled_dot_product_attention(q, k, v, is_causal=True)
            x = x + self.c_proj(a.transpose(1, 2).reshape(b, s, d))
            return x + self.mlp_proj(F.gelu(self.c_fc(self.ln_2(x)), approximate="tanh"))

    class LlamaBlock(nn.Module):
        def __init__(self):
            super().__init__()
            d, kv = m["d"], m["d"] // m["heads"] * m["kv_heads"]
            self.input_layernorm, self.post_attention_layernorm = RMSNorm(d), RMSNorm(d)
            self.q_proj, self.o_proj = nn.Linear(d, d, bias=False), nn.Linear(d, d, bias=False)
            self.k_proj, self.v_proj = nn.Linear(d, kv, bias=False), nn.Linear(d, kv, bias=False)
            self.gate_proj = nn.Linear(d, m["ff"], bias=False)
            self.up_proj = nn.Linear(d, m["ff"], bias=False)
            self.down_proj = nn.Linear(m["ff"], d, bias=False)

        def forward(self, x, rope):
            b, s, d = x.shape
            h = self.input_layernorm(x)
            q = self.q_proj(h).view(b, s, m["heads"], -1).transpose(1, 2)
            k = self.k_proj(h).view(b, s, m["kv_heads"], -1).transpose(1, 2)
            v = self.v_proj(h).view(b, s, m["kv_heads"], -1).transpose(1, 2)
            cos, sin = rope
            half = q.shape[-1] // 2
            q, k = (t * cos + torch.cat((-t[..., half:], t[..., :half]), -1) * sin for t in (q, k))
            a = F.scaled_dot_product_attention(q, k, v, is_causal=True, enable_gqa=True)
            x = x + self.o_proj(a.transpose(1, 2).reshape(b, s, d))
            h = self.post_attention_layernorm(x)
            return x + self.down_proj(F.silu(self.gate_proj(h)) * self.up_proj(h))

    class Model(nn.Module):
        def __init__(self):
            super().__init__()
            gpt2 = m["kind"] == "gpt2"
            self.wte = nn.Embedding(m["vocab"], m["d"])
            self.wpe = nn.Embedding(m["seq"], m["d"]) if gpt2 else None
            self.h = nn.ModuleList((GptBlock if gpt2 else LlamaBlock)() for _ in range(m["layers"]))
            self.ln_f = nn.LayerNorm(m["d"]) if gpt2 else RMSNorm(m["d"])
            for p in self.parameters():
                if p.dim() > 1:
                    nn.init.normal_(p, std=0.02)

        def forward(self, tokens, labels):
            s = tokens.shape[1]
            x = self.wte(tokens)
            rope = None
            if self.wpe is not None:
                x = x + self.wpe.weight[:s]
            else:  # Hugging Face's RoPE: halves rotated, frequencies theta^(-2i/head)
                head = m["d"] // m["heads"]
                inv = m["rope_theta"] ** -(torch.arange(0, head, 2, device=x.device).float() / head)
                angles = torch.outer(torch.arange(s, device=x.device).float(), inv).repeat(1, 2)
                rope = (angles.cos().to(x.dtype), angles.sin().to(x.dtype))
            for block in self.h:
                x = block(x, rope)
            logits = self.ln_f(x) @ self.wte.weight.t()  # tied output layer
            return F.cross_entropy(logits.float().view(-1, logits.shape[-1]), labels.view(-1))

    return Model()


class DeviceMemoryPeak:
    """Polls device 0's memory in use while the `with` block runs;
    `peak` is then the most seen less the first reading (bytes), or None."""

    def __init__(self):
        self.peak = None
        self._read = None
        try:
            import pynvml
            pynvml.nvmlInit()
            handle = pynvml.nvmlDeviceGetHandleByIndex(0)
            self._read = lambda: pynvml.nvmlDeviceGetMemoryInfo(handle).used
        except Exception:  # no NVML bindings or no driver: nvidia-smi, slower
            if shutil.which("nvidia-smi"):
                def smi():
                    done = subprocess.run(["nvidia-smi", "--query-gpu=memory.used", "--format=csv,noheader,nounits",
                                           "-i", "0"], capture_output=True, text=True)
                    return int(done.stdout.strip()) << 20
                self._read = smi
        try:
            if self._read:
                self._read()
        except Exception:
            self._read = None

    def __enter__(self):
        if self._read:
            self._base = self._most = self._read()
            self._stop = threading.Event()
            self._thread = threading.Thread(target=self._poll, daemon=True)
            self._thread.start()
        return self

    def _poll(self):
        while not self._stop.wait(0.01):
            self._most = max(self._most, self._read())

    def __exit__(self, *exc):
        if self._read:
            self._stop.set()
            self._thread.join()
            self.peak = self._most - self._base
        return False


def run_torch(engine, batch, m, args):
    """(median step seconds, tokens/s) of one PyTorch engine."""
    import torch
    torch.manual_seed(0)
    model = build_model(m).to("cuda")
    opt = torch.optim.AdamW(model.parameters(), lr=6e-4, fused=True)
    step_fn = model if engine == "eager" else torch.compile(model)
    times = []
    for _ in range(args.steps):
        tokens = torch.randint(0, m["vocab"], (batch, m["seq"]), device="cuda")
        labels = torch.randint(0, m["vocab"], (batch, m["seq"]), device="cuda")
        torch.cuda.synchronize()
        start = time.perf_counter()
        with torch.autocast("cuda", dtype=torch.bfloat16):
            loss = step_fn(tokens, labels)
        loss.backward()
        opt.step()
        opt.zero_grad(set_to_none=True)
        torch.cuda.synchronize()
        times.append(time.perf_counter() - start)
    median = statistics.median(times[args.warmup:])
    del model, opt, step_fn
    torch.cuda.empty_cache()
    return median, batch * m["seq"] / median


def run_loom(artifact, m, args, steps=None, profile=None):
    """(micro-batch, median step seconds, tokens/s, last loss) of a Loom
    artifact; None when it runs out of GPU memory; exits with the driver's
    output on any other failure. With `profile`, the kernels' times go to
    that file (LOOM_CUDA_PROFILE, docs/cuda.md)."""
    steps = steps or args.steps
    command = [sys.executable, os.path.join(ROOT, "runtime/cuda/tools/loom_cuda_train.py"),
               artifact, "--lib", args.loom_lib, "--random-init", "--random-data", str(m["vocab"]),
               "--seed", "0", "--steps", str(steps), "--warmup", str(min(args.warmup, steps - 1))]
    env = dict(os.environ)
    if profile:
        env["LOOM_CUDA_PROFILE"] = os.path.abspath(profile)
    done = subprocess.run(command, capture_output=True, text=True, env=env)
    prefix = "loom_cuda_train: summary "
    summary = [line[len(prefix):] for line in done.stdout.splitlines() if line.startswith(prefix)]
    if done.returncode and "out of memory" in done.stderr:
        return None  # CudaDevice::allocate's "cudaMalloc of N bytes ...: out of memory"
    if done.returncode or not summary:
        sys.exit(f"gpu-train.py: {' '.join(command)} failed ({done.returncode}):\n"
                 + "\n".join((done.stdout + done.stderr).splitlines()[-20:]))
    result = json.loads(summary[-1])
    return (result["rows"], result["median_step_ms"] * 1e-3, result["tokens_per_second"],
            result["last_loss"])


def device_name():
    """The GPU's name, from nvidia-smi (Loom's row needs no PyTorch)."""
    if shutil.which("nvidia-smi"):
        done = subprocess.run(["nvidia-smi", "--query-gpu=name", "--format=csv,noheader", "-i", "0"],
                              capture_output=True, text=True)
        if done.returncode == 0 and done.stdout.strip():
            return done.stdout.strip()
    return "unknown GPU"


def row(engine, batch, median, tps, flops, peak, memory, note=""):
    mfu = f"{100 * tps * flops / peak:.1f}%" if peak else "n/a"
    gib = f"{memory / 2**30:.2f}" if memory is not None else "n/a"
    print(f"{engine:<16} {batch:>11} {median * 1e3:>9.1f} {tps:>10.0f} {mfu:>7} {gib:>8}{note}", flush=True)


def loom_row(m, flops, peak, args):
    for artifact in args.loom.split(","):
        with DeviceMemoryPeak() as memory:
            result = run_loom(artifact, m, args)
        if result:
            break
    else:
        sys.exit(f"gpu-train.py: every artifact of --loom {args.loom} ran out of GPU memory")
    batch, median, tps, loss = result
    row("loom (cuda)", batch, median, tps, flops, peak, memory.peak,
        f"  (loss {loss:.4f} at step {args.steps})")
    if not args.loom_profile:
        return
    # The table of this run only: an old one is removed first; under a
    # launcher of several ranks the runtime writes FILE.rank0 and so on.
    for stale in (args.loom_profile, args.loom_profile + ".rank0"):
        if os.path.exists(stale):
            os.remove(stale)
    if not run_loom(artifact, m, args, steps=5, profile=args.loom_profile):
        sys.exit("gpu-train.py: the profiled Loom run ran out of GPU memory")
    path = next((p for p in (args.loom_profile, args.loom_profile + ".rank0") if os.path.exists(p)), None)
    if not path:
        sys.exit(f"gpu-train.py: the profiled Loom run wrote no {args.loom_profile}")
    with open(path) as table:
        print(f"\nLoom's kernels, micro-batch {batch} ({path}):")
        print(table.read(), end="", flush=True)


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--model", choices=sorted(MODELS), default="gpt2-124m")
    parser.add_argument("--steps", type=int, default=30)
    parser.add_argument("--warmup", type=int, default=10)
    parser.add_argument("--batches", help="PyTorch's micro-batches, largest first (default: the model's)")
    parser.add_argument("--engines", default="eager,compile",
                        help="PyTorch engines, comma-separated (empty: none)")
    parser.add_argument("--loom", metavar="ARTIFACT[,ARTIFACT...]",
                        help="--target=cuda artifacts of --model, largest micro-batch first")
    parser.add_argument("--loom-lib", metavar="LIB", help="libloom_runtime.so to train them through")
    parser.add_argument("--loom-profile", metavar="FILE",
                        help="then run Loom's artifact 5 more steps with LOOM_CUDA_PROFILE=FILE "
                             "and print its per-kernel table")
    args = parser.parse_args()
    if args.loom and not args.loom_lib:
        parser.error("--loom needs --loom-lib")
    if not 0 <= args.warmup < args.steps:
        parser.error(f"--warmup {args.warmup} leaves none of the {args.steps} steps")
    m = MODELS[args.model]
    engines = [e for e in args.engines.split(",") if e]
    if not engines and not args.loom:
        parser.error("nothing to run: no --engines and no --loom")
    torch = None
    if engines:
        try:
            import torch
        except ImportError:
            pass
        if torch is None or not torch.cuda.is_available():
            print("gpu-train.py: skipped: PyTorch sees no CUDA GPU")
            return 77
        torch.backends.cuda.matmul.allow_tf32 = True
        name = torch.cuda.get_device_name()
    else:
        name = device_name()
    peak = next((v for k, v in PEAKS.items() if k in name), None)
    flops = flops_per_token(m)
    print(f"{args.model} ({parameter_count(m):,} parameters), seq {m['seq']}, bf16 compute + fp32 master "
          f"weights, AdamW; {name}; median of steps {args.warmup + 1}..{args.steps}")
    print(f"{'engine':<16} {'micro-batch':>11} {'step ms':>9} {'tokens/s':>10} {'MFU':>7} {'peak GiB':>8}",
          flush=True)
    if args.loom:
        loom_row(m, flops, peak, args)
    for engine in engines:
        for batch in (int(b) for b in (args.batches or m["batches"]).split(",")):
            try:
                with DeviceMemoryPeak() as memory:
                    median, tps = run_torch(engine, batch, m, args)
            except torch.cuda.OutOfMemoryError:
                torch.cuda.empty_cache()
                continue
            row(engine, batch, median, tps, flops, peak, memory.peak)
            break
        else:
            print(f"{engine:<16} {'-':>11} {'-':>9} {'-':>10} {'-':>7} {'-':>8}  (out of memory at every micro-batch)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
