#!/usr/bin/env bash
# Installs the Debian packages Loom needs (only those missing), configures,
# builds, and runs every test through ctest: each lit file and each
# GoogleTest case is one ctest test; GPU tests report "skipped" without a
# GPU, and disabled GoogleTests (benchmarks run by hand) count as skipped.
# Fuzz targets (fuzz/) run for a short budget each. Then a second tree,
# built with AddressSanitizer and UndefinedBehaviorSanitizer
# (-DLOOM_SANITIZE=address,undefined), runs the unit and lit tests again:
# any memory error, undefined behaviour or leak fails its test. OpenMPI's
# own allocations at exit are suppressed (utils/sanitizers/lsan.supp); the
# tests that start MPI ranks (label `mpi`) run with the slower unwinder that
# can walk OpenMPI's frames, so that only its allocations are.
# Ends with one summary line: "tests: N passed, N failed, N skipped".
#
# usage: utils/run-tests.sh [--build-only] [--no-sanitizers]
#   --build-only     install and build, run no test (used by run-main-job.sh)
#   --no-sanitizers  leave out the sanitizer build and its run
# environment:
#   LOOM_BUILD_DIR            build tree (default: build/ in the repository)
#   LOOM_SANITIZER_BUILD_DIR  the sanitizer tree (default: build-sanitize/)
#   LOOM_ENABLE_CUDA          ON/OFF to force the CUDA parts (default: on if
#                             nvcc exists; the sanitizer tree has none)
set -euo pipefail

root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
build=${LOOM_BUILD_DIR:-$root/build}
mkdir -p "$build"
sbuild=${LOOM_SANITIZER_BUILD_DIR:-$root/build-sanitize}
build_only=0
sanitizers=1
for arg in "$@"; do
  case "$arg" in
    --build-only) build_only=1 ;;
    --no-sanitizers) sanitizers=0 ;;
    *) echo "usage: $0 [--build-only] [--no-sanitizers]" >&2; exit 2 ;;
  esac
done

# --- install what is missing -------------------------------------------------
packages=(cmake ninja-build ccache python3 g++-12
          clang-22 lld-22 llvm-22-dev llvm-22-tools libmlir-22-dev mlir-22-tools
          libclang-rt-22-dev  # libFuzzer and the sanitizers of the fuzz targets
          clang-format-22 libgtest-dev pkg-config coinor-libcbc-dev
          libopenmpi-dev openmpi-bin libopenblas-dev  # loom-calibrate, MPI tests, runtime
          nlohmann-json3-dev  # the runtime reads plan.json
          libonnx-dev libprotobuf-dev  # loom-import MODEL.onnx
          python3-numpy python3-torch  # the PyTorch reference (test/reference)
          python3-onnx)  # the ONNX importer's small test graphs
missing=()
for package in "${packages[@]}"; do
  dpkg-query -W -f='${Status}' "$package" 2>/dev/null | grep -q "install ok installed" \
    || missing+=("$package")
done
if ((${#missing[@]})); then
  echo "== installing: ${missing[*]}"
  sudo=""
  [ "$(id -u)" -ne 0 ] && sudo=sudo
  $sudo apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq --no-install-recommends \
    "${missing[@]}" >/dev/null
fi

# --- configure and build -----------------------------------------------------
echo "== building in $build"
cmake -S "$root" -B "$build" -G Ninja -DCMAKE_BUILD_TYPE=Release \
  ${LOOM_ENABLE_CUDA:+-DLOOM_ENABLE_CUDA=$LOOM_ENABLE_CUDA} >"$build/configure.log" 2>&1 \
  || { cat "$build/configure.log"; exit 1; }
cmake --build "$build"
((build_only)) && exit 0

# --- test ----------------------------------------------------------------------
echo "== testing"
set +e
ctest --test-dir "$build" --output-on-failure -j "$(nproc)" 2>&1 | tee "$build/ctest.log"
status=${PIPESTATUS[0]}
set -e
logs=("$build/ctest.log")

# --- the sanitizer build and its run -----------------------------------------
if ((sanitizers)); then
  echo "== building with sanitizers in $sbuild"
  mkdir -p "$sbuild"
  cmake -S "$root" -B "$sbuild" -G Ninja -DCMAKE_BUILD_TYPE=Release \
    -DCMAKE_CXX_FLAGS_RELEASE="-O1 -DNDEBUG" \
    -DLOOM_SANITIZE=address,undefined -DLOOM_ENABLE_FUZZ=OFF \
    -DLOOM_ENABLE_CUDA=OFF >"$sbuild/configure.log" 2>&1 \
    || { cat "$sbuild/configure.log"; exit 1; }
  cmake --build "$sbuild"
  echo "== testing with sanitizers"
  export ASAN_OPTIONS=detect_leaks=1:check_initialization_order=1
  export UBSAN_OPTIONS=print_stacktrace=1
  supp="suppressions=$root/utils/sanitizers/lsan.supp"
  set +e
  LSAN_OPTIONS=$supp ctest --test-dir "$sbuild" --output-on-failure \
    -j "$(nproc)" -L "unit|lit" -LE mpi 2>&1 | tee "$sbuild/ctest.log"
  sstatus=${PIPESTATUS[0]}
  LSAN_OPTIONS=$supp:fast_unwind_on_malloc=0 ctest --test-dir "$sbuild" \
    --output-on-failure -j "$(nproc)" -L mpi 2>&1 | tee "$sbuild/ctest-mpi.log"
  mstatus=${PIPESTATUS[0]}
  set -e
  ((sstatus == 0 && mstatus == 0)) || status=1
  slogs=("$sbuild/ctest.log" "$sbuild/ctest-mpi.log")
fi

# count PREFIX LOG...: "N passed, N failed, N skipped" for the tests named
# PREFIX* in the logs.
count() {
  local prefix=$1 lines
  shift
  lines=$(cat "$@" | grep -E "Test +#[0-9]+: $prefix" || true)
  echo "$(grep -c ' Passed ' <<<"$lines") passed," \
       "$(grep -E '\*\*\*(Failed|Exception|Timeout)|Not Run' <<<"$lines" \
            | grep -vc 'Not Run (Disabled)') failed," \
       "$(grep -cE 'Skipped|Not Run \(Disabled\)' <<<"$lines") skipped"
}
for kind in lit unit format docs fuzz; do
  echo "$kind: $(count "$kind/" "${logs[@]}")"
done
if ((sanitizers)); then
  echo "sanitized: $(count '' "${slogs[@]}")"
  logs+=("${slogs[@]}")
fi
echo "tests: $(count '' "${logs[@]}")"
exit "$status"
