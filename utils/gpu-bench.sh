#!/usr/bin/env bash
# gpu-bench.sh - Loom's row of benchmarks/gpu-gpt2.py: GPT-2 124M trained
# through the CUDA runtime, next to PyTorch eager and torch.compile.
#
# Two halves, as utils/gpu-train-check.sh (the GPU machines have nvcc,
# CMake, Python with numpy and PyTorch, but no LLVM for loom-compile):
#
#   utils/gpu-bench.sh prepare DIR [LOOM_BUILD_DIR]   # here
#   utils/gpu-bench.sh run DIR [GPU_BUILD_DIR] [-- GPU_GPT2_ARGS...]
#
# prepare writes into DIR (put it under build-gpu-carry/, which .gitignore's
# /build*/ ignores, and name it in the device tool's `carry`; under 1 MiB):
#   gpt2-124m-bN.loom  examples/configs/gpt2.json at micro-batch N x 1024
#                   for each N of $LOOM_BENCH_MICRO_BATCHES (default
#                   64,48,32,16,8), --precision bf16, dropout off (the
#                   PyTorch model has none), AdamW lr 3e-3, loom-compile
#                   --target=cuda: program.so and plan.json only (1.5 MiB
#                   each). The weights are drawn on the GPU machine
#                   (loom_cuda_train.py --random-init), the tokens too
#                   (--random-data). Workspaces: 4.3 GB at micro-batch 8,
#                   16.6 GB at 32 (plan.json's workspace_bytes).
#   include/nlohmann/  a copy of /usr/include/nlohmann for the runtime's
#                   artifact loader (see utils/gpu-train-check.sh)
#
# run builds runtime/cuda/standalone in GPU_BUILD_DIR (default
# /tmp/loom-build-gpu), runs the conformance test (LoomCudaKernelTest; a
# failure is reported and the benchmark runs anyway, so that a lent GPU's
# few minutes still give timings: Loom's row then stands on kernels that
# disagree with the CPU ones somewhere, which its loss line may show), then
#   python3 benchmarks/gpu-gpt2.py --loom DIR/gpt2-124m.loom \
#     --loom-runtime GPU_BUILD_DIR GPU_GPT2_ARGS...
# with every prepared artifact, largest micro-batch first: the benchmark
# keeps the first that does not run out of GPU memory, as it does for
# PyTorch's micro-batches. It prints one row per engine, then the kept
# artifact's kernels over 5 more steps (LOOM_CUDA_PROFILE, written to
# GPU_BUILD_DIR/loom-profile.txt).
#
# Exit status: 0, 1 when the conformance test failed (after the
# benchmark), 77 without a usable GPU, or the failing command's.
set -euo pipefail

root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
. "$root/utils/gpu-common.sh"

usage() {
  echo "usage: $0 prepare DIR [LOOM_BUILD_DIR] | run DIR [GPU_BUILD_DIR] [-- ARGS...]" >&2
  exit 2
}
[ $# -ge 2 ] || usage
mode="$1"
dir="$2"
shift 2

if [ "$mode" = prepare ]; then
  bin="$(cd "${1:-$root/build}" && pwd)/bin"
  rm -rf "$dir" && mkdir -p "$dir/include"
  dir="$(cd "$dir" && pwd)"
  cp -r /usr/include/nlohmann "$dir/include/"
  IFS=, read -ra batches <<<"${LOOM_BENCH_MICRO_BATCHES:-64,48,32,16,8}"
  for batch in "${batches[@]}"; do
    "$bin/loom-import" "$root/examples/configs/gpt2.json" \
      --micro-batch "$batch" \
      --seq-len 1024 --precision bf16 --attn-pdrop 0 --embd-pdrop 0 \
      --resid-pdrop 0 \
      | "$bin/loom-opt" --loom-autodiff --loom-optimizer="kind=adamw lr=3e-3" \
          --inline \
      | "$bin/loom-compile" --target=cuda -o "$dir/gpt2-124m-b$batch.loom"
  done
  du -sh "$dir"
  exit 0
fi
[ "$mode" = run ] || usage

dir="$(cd "$dir" && pwd)"
build=/tmp/loom-build-gpu
if [ $# -gt 0 ] && [ "$1" != -- ]; then
  build="$1"
  shift
fi
[ $# -gt 0 ] && [ "$1" = -- ] && shift
conformance=0
gpu_build_and_conform gpu-bench "$build" "$dir/include" || conformance=1
[ "$conformance" -eq 0 ] ||
  echo "gpu-bench: the conformance test FAILED (above); benchmarking anyway"
echo "== benchmark"
artifacts=$(for artifact in "$dir"/gpt2-124m-b*.loom; do
  [ -d "$artifact" ] || continue
  batch=${artifact##*-b}
  echo "${batch%.loom} $artifact"
done | sort -rn | cut -d' ' -f2- | paste -sd,)  # largest micro-batch first
[ -n "$artifacts" ] || { echo "gpu-bench: no gpt2-124m-b*.loom in $dir" >&2; exit 1; }
python3 "$root/benchmarks/gpu-gpt2.py" --loom "$artifacts" \
  --loom-runtime "$build" --loom-profile "$build/loom-profile.txt" "$@"
exit "$conformance"
