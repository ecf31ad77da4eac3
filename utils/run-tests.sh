#!/usr/bin/env bash
# Installs the Debian packages Loom needs (only those missing), configures,
# builds, and runs every test through ctest: each lit file and each
# GoogleTest case is one ctest test; GPU tests report "skipped" without a
# GPU, and disabled GoogleTests (benchmarks run by hand) count as skipped.
# Fuzz targets (fuzz/) run for a short budget each.
# Ends with one summary line: "tests: N passed, N failed, N skipped".
#
# usage: utils/run-tests.sh [--build-only]
#   --build-only   install and build, run no test (used by run-main-job.sh)
# environment:
#   LOOM_BUILD_DIR     build tree (default: build/ in the repository)
#   LOOM_ENABLE_CUDA   ON/OFF to force the CUDA parts (default: on if nvcc exists)
set -euo pipefail

root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
build=${LOOM_BUILD_DIR:-$root/build}
mkdir -p "$build"
build_only=0
case "${1:-}" in
  "") ;;
  --build-only) build_only=1 ;;
  *) echo "usage: $0 [--build-only]" >&2; exit 2 ;;
esac

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

# count PREFIX: "N passed, N failed, N skipped" for the tests named PREFIX*.
count() {
  local lines
  lines=$(grep -E "Test +#[0-9]+: $1" "$build/ctest.log" || true)
  echo "$(grep -c ' Passed ' <<<"$lines") passed," \
       "$(grep -E '\*\*\*(Failed|Exception|Timeout)|Not Run' <<<"$lines" \
            | grep -vc 'Not Run (Disabled)') failed," \
       "$(grep -cE 'Skipped|Not Run \(Disabled\)' <<<"$lines") skipped"
}
for kind in lit unit format docs fuzz; do
  echo "$kind: $(count "$kind/")"
done
echo "tests: $(count '')"
exit "$status"
