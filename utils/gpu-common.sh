# gpu-common.sh - sourced by utils/gpu-train-check.sh, utils/gpu-bench.sh
# and utils/gpu-session.sh (not run): the part they do first on a GPU
# machine.
#
# gpu_build_and_conform NAME BUILD_DIR NLOHMANN_INCLUDE_DIR
#   builds runtime/cuda/standalone's device probe, CUDA runtime and
#   conformance test in BUILD_DIR (the GPU machines have nvcc and CMake but
#   no LLVM; the runtime's artifact loader needs nlohmann-json's header,
#   carried as NLOHMANN_INCLUDE_DIR), exits 77 without a usable GPU (NAME
#   starts the message), runs LoomCudaKernelTest and prints its failures
#   and last line. Returns 0 when it passes, 1 when it fails; a failed
#   configure or build ends the script with its status (callers run this
#   under `||`, where `set -e` does not apply).
#   With LOOM_GPU_PREBUILT=1 (utils/gpu-session.sh, which built every
#   target and ran the conformance test once already) it only checks that
#   BUILD_DIR holds the runtime and returns 0.
# gpu_build_essentials BUILD_DIR NLOHMANN_INCLUDE_DIR
#   configures runtime/cuda/standalone in BUILD_DIR (Ninja if there;
#   LOOM_CUDA_ARCH picks the architecture) and builds what every GPU check
#   needs first: the device probe, the CUDA runtime and the conformance
#   test. Returns the failing command's status.
# Needs $root, the repository root.

gpu_build_essentials() {
  local build="$1" include="$2" nvcc generator=()
  nvcc="$(command -v nvcc || echo /usr/local/cuda/bin/nvcc)"
  command -v ninja >/dev/null && generator=(-G Ninja)
  cmake -S "$root/runtime/cuda/standalone" -B "$build" "${generator[@]}" \
    -DCMAKE_BUILD_TYPE=Release -DCMAKE_CUDA_COMPILER="$nvcc" \
    -DLOOM_NLOHMANN_JSON_INCLUDE_DIR="$include" \
    ${LOOM_CUDA_ARCH:+-DLOOM_CUDA_ARCH=$LOOM_CUDA_ARCH} >/dev/null &&
    cmake --build "$build" -j "$(nproc)" -- loom-cuda-probe loom_cuda_runtime \
      LoomCudaKernelTest
}

gpu_build_and_conform() {
  local name="$1" build="$2" include="$3"
  local probe=0 status=0
  if [ "${LOOM_GPU_PREBUILT:-0}" = 1 ]; then
    [ -e "$build/libloom_cuda_runtime.so" ] || {
      echo "$name: LOOM_GPU_PREBUILT=1 but $build has no libloom_cuda_runtime.so" >&2
      exit 1
    }
    echo "== build and conformance: done by utils/gpu-session.sh"
    return 0
  fi
  echo "== build ($build)"
  gpu_build_essentials "$build" "$include" || exit
  "$build/loom-cuda-probe" || probe=$?
  if [ "$probe" -ne 0 ]; then
    echo "$name: no usable CUDA device"
    exit 77
  fi
  echo "== conformance"
  "$build/LoomCudaKernelTest" >/tmp/gpu-conformance.log || status=1
  grep -A3 '^FAIL' /tmp/gpu-conformance.log || true
  tail -n 1 /tmp/gpu-conformance.log
  return "$status"
}
