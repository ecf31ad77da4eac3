#!/usr/bin/env bash
# gpu-check.sh - build and run the CUDA kernels' conformance test on a GPU
# machine.
#
# Route: runtime/cuda/standalone is a small CMake project that needs only a
# CUDA toolkit (nvcc, cuBLASLt), CMake and a C++ compiler (Ninja if there),
# not LLVM/MLIR, GoogleTest or a BLAS, none of which the lent GPU machines
# have. It builds libloom_cuda_kernels.so from runtime/cuda/kernels, the CPU
# kernels from runtime/cpu/kernels (their GEMMs through a reference loop nest
# instead of OpenBLAS) and test/Unit/CudaKernelTest.cpp, which runs every op
# through both and compares (f32 to 1e-5, bf16 to 1e-2 relative, dropout
# masks exactly), then, once every case passes, LoomCudaKernelBench (each
# kernel's time at GPT-2 124M shapes). Everything is built there, from
# source, for that machine's toolkit and driver: nothing built here needs to
# travel.
#
# The CUDA runtime (libloom_cuda_runtime.so) needs nlohmann-json, which the
# GPU machines lack: without -DLOOM_NLOHMANN_JSON_INCLUDE_DIR the project
# skips it. utils/gpu-train-check.sh carries a copy of the header (in
# build-gpu-carry/, ignored by .gitignore's /build*/) and trains through it.
#
# Usage: utils/gpu-check.sh [build-dir] [case filter]
#   build-dir     default /tmp/loom-build-gpu (outside the tree)
#   case filter   run only the cases whose name contains it (no timings)
#   LOOM_CUDA_ARCH=90a utils/gpu-check.sh   another target architecture
#   LOOM_GPU_SANITIZE=1 utils/gpu-check.sh  after the conformance test, run
#                 it again under compute-sanitizer: memcheck on every case
#                 (or the filter's), racecheck on the attention cases (the
#                 shared-memory races the host emulation cannot show). Slow;
#                 the sanitizer refuses the device on gVisor machines.
#
# Exit status: 0 when every case passes (and the timings ran), 1 when a
# case failed, 77 without a usable GPU, or the build's failure.
set -euo pipefail

root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
build="${1:-/tmp/loom-build-gpu}"
filter="${2:-}"

nvcc="$(command -v nvcc || echo /usr/local/cuda/bin/nvcc)"
if [ ! -x "$nvcc" ]; then
  echo "gpu-check: no nvcc on PATH or in /usr/local/cuda/bin" >&2
  exit 1
fi
cuda_root="$(dirname "$(dirname "$(readlink -f "$nvcc")")")"
echo "== toolchain"
"$nvcc" --version | tail -n 2
cmake --version | head -n 1
if [ ! -e "$cuda_root/include/cublasLt.h" ]; then
  echo "gpu-check: warning: no cublasLt.h in $cuda_root/include" >&2
fi
command -v nvidia-smi >/dev/null && nvidia-smi -L || true

generator=()
if command -v ninja >/dev/null; then
  generator=(-G Ninja)
fi
echo "== configure ($build)"
cmake -S "$root/runtime/cuda/standalone" -B "$build" "${generator[@]}" \
  -DCMAKE_BUILD_TYPE=Release -DCMAKE_CUDA_COMPILER="$nvcc" \
  ${LOOM_CUDA_ARCH:+-DLOOM_CUDA_ARCH=$LOOM_CUDA_ARCH}
echo "== build"
cmake --build "$build" -j "$(nproc)"

echo "== device"
probe=0
"$build/loom-cuda-probe" || probe=$?
if [ "$probe" -ne 0 ]; then
  echo "gpu-check: no usable CUDA device: the kernels built, nothing ran"
  exit 77
fi
echo "== conformance"
"$build/LoomCudaKernelTest" ${filter:+"$filter"}
if [ "${LOOM_GPU_SANITIZE:-0}" != 0 ]; then
  sanitizer="$(command -v compute-sanitizer || true)"
  for candidate in "$cuda_root/bin/compute-sanitizer" \
    "$cuda_root/compute-sanitizer/compute-sanitizer"; do
    if [ -z "$sanitizer" ] && [ -x "$candidate" ]; then
      sanitizer="$candidate"
    fi
  done
  if [ -n "$sanitizer" ]; then
    # The test exits 77 when the sanitizer keeps it from the device (gVisor):
    # that skips the sanitizer, not the timings.
    for tool in memcheck racecheck; do
      cases="${filter:-}"
      [ "$tool" = racecheck ] && cases=attention
      echo "== compute-sanitizer: $tool${cases:+ ($cases)}"
      rc=0
      "$sanitizer" --tool "$tool" --error-exitcode 1 \
        "$build/LoomCudaKernelTest" ${cases:+"$cases"} || rc=$?
      if [ "$rc" -eq 77 ]; then
        echo "gpu-check: compute-sanitizer could not reach the device; skipped"
        break
      fi
      [ "$rc" -eq 0 ] || exit "$rc"
    done
  else
    echo "gpu-check: no compute-sanitizer; LOOM_GPU_SANITIZE ignored" >&2
  fi
fi
if [ -z "$filter" ]; then
  echo "== timings"
  "$build/LoomCudaKernelBench"
fi
