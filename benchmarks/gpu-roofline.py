#!/usr/bin/env python3
"""What one GPU sustains, in the terms of Loom's cost model.

loom-calibrate measures a CPU node and fits the cluster spec's device
section; a GPU node often has PyTorch but no LLVM, so this script measures
the same quantities on one CUDA GPU through PyTorch (cuBLAS for the GEMMs,
the library Loom's CUDA kernels call) and fits the same formulas
(docs/cluster-spec.md, "How the device numbers are used"):

  launch_overhead_s      the time of a one-element kernel, back to back
                         in a CUDA graph (and, for reference, issued one
                         by one from Python)
  memory bandwidth       a large triad (a = b + s * c, f32), bytes / time;
                         memory_efficiency = that / --memory-bandwidth
  GEMM                   t = L + (W + h) / rate over bf16 GEMMs with f32
                         accumulation, W = 2 M N K: a least-squares line in
                         W gives rate (the slope's inverse) and h (from the
                         intercept less L); gemm_efficiency = rate /
                         --peak-bf16, gemm_half_work_flops = h
  attention              causal bf16 attention through PyTorch's
                         scaled_dot_product_attention on cuDNN (the
                         kernels Loom's CUDA attention runs) and on
                         FlashAttention-2, forward and forward+backward,
                         head dimensions 64 and 128, 1024 to 16384 tokens;
                         the work counted as the cost model counts it
                         (docs/cost-model.md: the scores on and below the
                         diagonal, the backward 2.5 times the forward):
                         attention_efficiency = cuDNN's forward+backward
                         work over its time, over --peak-bf16

The GEMMs are the layer GEMMs of Megatron-style transformers (widths 2048
to 16384, 1 to 8 tensor-parallel ranks, 4096 to 16384 tokens) plus squares
from 256 to 16384. Each row of the table also gives the time the preset's
numbers (--preset-efficiency, --preset-half-work, --preset-launch) predict
for it, and their ratio to the measured time, so the preset can be read
against the device shape by shape.

Prints the table and the fitted numbers; --json FILE also writes them.
Exits 77 without PyTorch or a CUDA GPU.

usage: python3 benchmarks/gpu-roofline.py [--json FILE] [--quick]
       [--peak-bf16 9.894e14] [--memory-bandwidth 4.8e12]
       [--preset-efficiency 0.7] [--preset-half-work 5.9e9]
       [--preset-launch 4e-6] [--preset-attention 0.35]
(the defaults are an H200's datasheet and the h200 preset,
lib/CostModel/ClusterSpec.cpp)
"""

import argparse
import json
import statistics
import sys


def parse_args():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--json", help="also write the results here")
    parser.add_argument("--quick", action="store_true",
                        help="fewer shapes and repetitions (a smoke run)")
    parser.add_argument("--peak-bf16", type=float, default=9.894e14)
    parser.add_argument("--memory-bandwidth", type=float, default=4.8e12)
    parser.add_argument("--preset-efficiency", type=float, default=0.7)
    parser.add_argument("--preset-half-work", type=float, default=5.9e9)
    parser.add_argument("--preset-launch", type=float, default=4e-6)
    parser.add_argument("--preset-attention", type=float, default=0.35)
    return parser.parse_args()


def timed(torch, fn, reps):
    """Median seconds of fn() over `reps` runs of a batch, CUDA events."""
    fn()
    torch.cuda.synchronize()
    # Enough calls per event pair that the events' own cost is small.
    start, stop = (torch.cuda.Event(enable_timing=True) for _ in range(2))
    start.record()
    fn()
    stop.record()
    stop.synchronize()
    once = max(start.elapsed_time(stop) / 1e3, 1e-6)
    batch = max(1, min(200, int(2e-3 / once)))
    samples = []
    for _ in range(reps):
        start.record()
        for _ in range(batch):
            fn()
        stop.record()
        stop.synchronize()
        samples.append(start.elapsed_time(stop) / 1e3 / batch)
    return statistics.median(samples)


def layer_gemms(quick):
    """(label, M, N, K): a layer's four GEMMs, forward, per TP rank."""
    shapes = []
    widths = [4096, 12288] if quick else [2048, 4096, 8192, 12288, 16384]
    for h in widths:
        for tp in ([1, 8] if quick else [1, 2, 4, 8]):
            for tokens in ([8192] if quick else [4096, 16384]):
                tag = f"h{h} tp{tp} t{tokens}"
                shapes += [(f"{tag} qkv", tokens, 3 * h // tp, h),
                           (f"{tag} proj", tokens, h, h // tp),
                           (f"{tag} fc1", tokens, 4 * h // tp, h),
                           (f"{tag} fc2", tokens, h, 4 * h // tp)]
    for n in ([512, 4096] if quick else
              [256, 512, 1024, 2048, 4096, 8192, 16384]):
        shapes.append((f"square {n}", n, n, n))
    return shapes


def attention_shapes(quick):
    """(batch, heads, tokens, head dimension): about 2^16 tokens a call."""
    seqs = [2048, 8192] if quick else [1024, 2048, 4096, 8192, 16384]
    shapes = []
    for d in (64, 128):
        for s in seqs:
            shapes.append((max(1, 65536 // s), 2048 // d, s, d))
    return shapes


def attention_work(b, h, s, d):
    """The cost model's forward work of causal attention: QK^T and PV over
    the s(s+1)/2 scores on and below the diagonal (docs/cost-model.md)."""
    return 4.0 * b * h * d * s * (s + 1) / 2


def time_attention(torch, backend, b, h, s, d, reps):
    """(forward, forward+backward) seconds of causal bf16 attention on
    `backend` ("cudnn" or "flash"), or None where it refuses the call."""
    import contextlib
    functional = torch.nn.functional
    try:
        from torch.nn.attention import SDPBackend, sdpa_kernel
        chosen = sdpa_kernel([SDPBackend.CUDNN_ATTENTION if backend == "cudnn"
                              else SDPBackend.FLASH_ATTENTION])
    except ImportError:  # PyTorch before 2.3 chooses its own kernel
        chosen = contextlib.nullcontext()
    q, k, v = (torch.randn(b, h, s, d, device="cuda", dtype=torch.bfloat16,
                           requires_grad=True) for _ in range(3))
    grad = torch.randn(b, h, s, d, device="cuda", dtype=torch.bfloat16)

    def forward():
        with torch.no_grad():
            functional.scaled_dot_product_attention(q, k, v, is_causal=True)

    def forward_backward():
        out = functional.scaled_dot_product_attention(q, k, v, is_causal=True)
        out.backward(grad)
        q.grad = k.grad = v.grad = None

    try:
        with chosen:
            return (timed(torch, forward, reps),
                    timed(torch, forward_backward, reps))
    except RuntimeError as error:
        print(f"attention {backend} b{b} h{h} s{s} d{d}: not run "
              f"({str(error).splitlines()[0][:80]})")
        return None


def fit_line(xs, ys):
    """Least squares y = a + b x."""
    n = len(xs)
    mx, my = sum(xs) / n, sum(ys) / n
    sxx = sum((x - mx) ** 2 for x in xs)
    b = sum((x - mx) * (y - my) for x, y in zip(xs, ys)) / sxx
    return my - b * mx, b


def main():
    args = parse_args()
    try:
        import torch
    except ImportError:
        print("gpu-roofline.py: PyTorch is not installed", file=sys.stderr)
        return 77
    if not torch.cuda.is_available():
        print("gpu-roofline.py: PyTorch sees no CUDA GPU", file=sys.stderr)
        return 77
    torch.backends.cuda.matmul.allow_bf16_reduced_precision_reduction = False
    reps = 5 if args.quick else 15
    device = torch.device("cuda")
    name = torch.cuda.get_device_name(device)
    print(f"device: {name}, PyTorch {torch.__version__}, "
          f"CUDA {torch.version.cuda}")

    one = torch.zeros(1, device=device)
    # Issued one by one from Python, a tiny kernel costs PyTorch's dispatch
    # (about 10 us); replayed from a CUDA graph, only the device's own cost
    # per kernel remains, which is what the cost model's launch overhead is
    # (the runtime issues kernels from C++, ahead of the device).
    issued = timed(torch, lambda: one.add_(1.0), reps)
    side = torch.cuda.Stream()
    side.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(side):
        one.add_(1.0)
    torch.cuda.current_stream().wait_stream(side)
    graph = torch.cuda.CUDAGraph()
    kernels = 200
    with torch.cuda.graph(graph):
        for _ in range(kernels):
            one.add_(1.0)
    launch = timed(torch, graph.replay, reps) / kernels

    n = 1 << 28  # 1 GiB per f32 tensor
    a, b, c = (torch.empty(n, device=device) for _ in range(3))
    b.fill_(1.0)
    c.fill_(2.0)
    triad_seconds = timed(torch, lambda: torch.add(b, c, alpha=3.0, out=a),
                          reps)
    bandwidth = 3 * 4 * n / triad_seconds
    del a, b, c

    rows = []
    for label, m, nn, k in layer_gemms(args.quick):
        x = torch.randn(m, k, device=device, dtype=torch.bfloat16)
        w = torch.randn(k, nn, device=device, dtype=torch.bfloat16)
        y = torch.empty(m, nn, device=device, dtype=torch.bfloat16)
        seconds = timed(torch, lambda: torch.matmul(x, w, out=y), reps)
        work = 2.0 * m * nn * k
        predicted = args.preset_launch + (work + args.preset_half_work) / (
            args.preset_efficiency * args.peak_bf16)
        rows.append({"shape": label, "m": m, "n": nn, "k": k, "flops": work,
                     "seconds": seconds, "tflops": work / seconds / 1e12,
                     "preset_seconds": predicted,
                     "preset_over_measured": predicted / seconds})
        del x, w, y

    attention = []
    for b, h, s, d in attention_shapes(args.quick):
        work = attention_work(b, h, s, d)
        for backend in ("cudnn", "flash"):
            times = time_attention(torch, backend, b, h, s, d, reps)
            if times is None:
                continue
            forward, both = times
            attention.append({
                "backend": backend, "batch": b, "heads": h, "tokens": s,
                "head_dim": d, "forward_seconds": forward,
                "forward_backward_seconds": both,
                "forward_efficiency": work / forward / args.peak_bf16,
                "backward_efficiency":
                    2.5 * work / max(both - forward, 1e-9) / args.peak_bf16,
                "efficiency": 3.5 * work / both / args.peak_bf16})

    intercept, slope = fit_line([r["flops"] for r in rows],
                                [r["seconds"] for r in rows])
    rate = 1.0 / slope
    half_work = max(0.0, (intercept - launch) * rate)
    fitted = {
        "launch_overhead_s": launch,
        "python_issue_s": issued,
        "memory_bandwidth_measured": bandwidth,
        "memory_efficiency": bandwidth / args.memory_bandwidth,
        "gemm_rate": rate,
        "gemm_efficiency": rate / args.peak_bf16,
        "gemm_half_work_flops": half_work,
    }
    cudnn = [r for r in attention if r["backend"] == "cudnn"]
    if cudnn:
        fitted["attention_efficiency"] = (
            sum(3.5 * attention_work(r["batch"], r["heads"], r["tokens"],
                                     r["head_dim"]) for r in cudnn) /
            sum(r["forward_backward_seconds"] for r in cudnn) /
            args.peak_bf16)
    layer = [r for r in rows if not r["shape"].startswith("square")]
    ratios = [r["preset_over_measured"] for r in layer]

    print(f"{'shape':28} {'M':>6} {'N':>6} {'K':>6} {'ms':>8} "
          f"{'TFLOP/s':>8} {'preset/meas':>11}")
    for r in rows:
        print(f"{r['shape']:28} {r['m']:6d} {r['n']:6d} {r['k']:6d} "
              f"{r['seconds'] * 1e3:8.3f} {r['tflops']:8.1f} "
              f"{r['preset_over_measured']:11.3f}")
    print(f"launch overhead: {launch * 1e6:.2f} us per kernel in a graph, "
          f"{issued * 1e6:.2f} us issued from Python")
    print(f"triad bandwidth: {bandwidth / 1e12:.3f} TB/s "
          f"(memory_efficiency {fitted['memory_efficiency']:.3f} of "
          f"{args.memory_bandwidth / 1e12:.2f})")
    print(f"GEMM fit: rate {rate / 1e12:.1f} TFLOP/s (gemm_efficiency "
          f"{fitted['gemm_efficiency']:.3f} of {args.peak_bf16 / 1e12:.1f}), "
          f"gemm_half_work_flops {half_work:.3g}")
    print(f"layer GEMMs, preset over measured: geometric mean "
          f"{statistics.geometric_mean(ratios):.3f}, range "
          f"{min(ratios):.3f} to {max(ratios):.3f}")
    if attention:
        print(f"{'attention (causal)':28} {'tokens':>6} {'d':>4} "
              f"{'fwd ms':>8} {'f+b ms':>8} {'fwd':>6} {'bwd':>6} {'both':>6}")
        for r in attention:
            label = f"{r['backend']} b{r['batch']} h{r['heads']}"
            print(f"{label:28} {r['tokens']:6d} {r['head_dim']:4d} "
                  f"{r['forward_seconds'] * 1e3:8.3f} "
                  f"{r['forward_backward_seconds'] * 1e3:8.3f} "
                  f"{r['forward_efficiency']:6.3f} "
                  f"{r['backward_efficiency']:6.3f} {r['efficiency']:6.3f}")
    if "attention_efficiency" in fitted:
        print(f"attention fit (cuDNN, forward+backward): attention_efficiency "
              f"{fitted['attention_efficiency']:.3f} of "
              f"{args.peak_bf16 / 1e12:.1f} (preset "
              f"{args.preset_attention})")
    if args.json:
        with open(args.json, "w") as out:
            json.dump({"device": name, "torch": torch.__version__,
                       "fit": fitted, "gemms": rows, "attention": attention},
                      out, indent=1)
    return 0


if __name__ == "__main__":
    sys.exit(main())
