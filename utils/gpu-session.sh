#!/usr/bin/env bash
# gpu-session.sh - every GPU check of issue 8 in one command that fits a
# lent GPU's lease (15 minutes of device time, at most 10 per command, the
# machine's start included): build once, conformance, the training checks,
# the benchmark against PyTorch with Loom's kernel profile, the kernel
# timings, and a summary table as the output's last lines.
#
#   utils/gpu-session.sh prepare [DIR] [LOOM_BUILD_DIR]   # here
#   utils/gpu-session.sh run [DIR] [GPU_BUILD_DIR]        # on the GPU machine
#
# DIR defaults to build-gpu-carry (ignored by .gitignore's /build*/; name it
# in the device tool's `carry`). prepare runs utils/gpu-train-check.sh
# prepare DIR/train and utils/gpu-bench.sh prepare DIR/bench (about 10 MiB
# in all). run, in the order of what a short lease most needs:
#
#   1. build   runtime/cuda/standalone, every target, once (GPU_BUILD_DIR,
#              default /tmp/loom-build-gpu); no usable GPU: exit 77
#   2. conformance  LoomCudaKernelTest (every kernel against the CPU's)
#   3. train   utils/gpu-train-check.sh run DIR/train: the tiny GPT-2 50
#              steps against the CPU (bf16, f32), the communicators, and
#              DP / TP / ZeRO-3 / PP on shared-GPU ranks against the
#              reference interpreter; when they fail and the budget
#              allows, again on the fallback kernel paths (below)
#   4. bench   utils/gpu-bench.sh run DIR/bench: Loom's GPT-2 124M row, its
#              per-kernel profile, then torch.compile and PyTorch eager.
#              When Loom's row fails, it is run again with the fallbacks
#              (LOOM_CUDA_ATTENTION=simt LOOM_CUDA_NORM=block
#              LOOM_CUDA_GEMM_EPILOGUES=basic), so a lease still gives a
#              number and tells which new kernel path broke
#   5. kernels LoomCudaKernelBench (each kernel at GPT-2 124M shapes)
#
# Each phase runs under `timeout`, cut to what is left of the session's
# budget (LOOM_GPU_SESSION_SECONDS, default 540: the command's 600 less a
# margin); a phase that would start with under 20 s left is skipped. Each
# phase's output goes to a log in GPU_BUILD_DIR/session; what comes back
# goes to $OUT when the device tool sets it (else that folder), at most
# the device tool's 8 files: session.log (everything printed here, as it
# comes: the training, benchmark and kernel timing logs whole), build.log,
# conformance.log, train-runs.tar.gz (each training run's own log; and
# train-fallback-runs.tar.gz) and loom-profile.txt.
# LOOM_GPU_SESSION_BENCH_ARGS (default "--steps 20 --warmup 5") go to
# benchmarks/gpu-gpt2.py.
#
# Exit status: 0 when every phase passed, 1 when one failed or ran out of
# time, 77 without a usable GPU, 2 on a usage error.
set -uo pipefail

root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
. "$root/utils/gpu-common.sh"

usage() {
  echo "usage: $0 prepare [DIR] [LOOM_BUILD_DIR] | run [DIR] [GPU_BUILD_DIR]" >&2
  exit 2
}
[ $# -ge 1 ] || usage
mode="$1"
dir="${2:-$root/build-gpu-carry}"

if [ "$mode" = prepare ]; then
  set -e
  mkdir -p "$dir"
  "$root/utils/gpu-train-check.sh" prepare "$dir/train" ${3:+"$3"}
  "$root/utils/gpu-bench.sh" prepare "$dir/bench" ${3:+"$3"}
  du -sh "$dir"
  exit 0
fi
[ "$mode" = run ] || usage
[ -d "$dir/train" ] && [ -d "$dir/bench" ] || {
  echo "gpu-session: $dir has no train/ and bench/: run '$0 prepare' first" >&2
  exit 2
}
dir="$(cd "$dir" && pwd)"
build="${3:-/tmp/loom-build-gpu}"
logs="$build/session"
out="${OUT:-$logs}"
rm -rf "$logs" && mkdir -p "$logs" "$out"
exec > >(tee "$out/session.log") 2>&1
tee_pid=$!
# session.log whole before the script ends: close the pipe, wait for tee.
finish() {
  exec >&- 2>&-
  wait "$tee_pid" 2>/dev/null
}
trap finish EXIT

budget="${LOOM_GPU_SESSION_SECONDS:-540}"
bench_args="${LOOM_GPU_SESSION_BENCH_ARGS:---steps 20 --warmup 5}"
start=$SECONDS
summary=()
failed=0

# phase NAME CAP LOG COMMAND...: runs COMMAND for at most CAP seconds or
# what is left of the budget, its output shown as it comes (so that a
# command cut off by the device tool still left it in session.log) and
# kept in LOG; records a summary line. Returns the command's status (124:
# out of time; 125: skipped).
phase() {
  local name="$1" cap="$2" log="$logs/$3" left status began
  shift 3
  left=$((budget - (SECONDS - start)))
  ((left < cap)) && cap=$left
  if ((cap < 20)); then
    summary+=("$(printf '%-14s SKIP  %s s left of the budget' "$name" "$left")")
    failed=1
    return 125
  fi
  echo "== $name (at most $cap s; log $log)"
  began=$SECONDS
  # bash -c: COMMAND may be one of this script's (exported) functions.
  timeout --kill-after=10 "$cap" bash -c '"$@"' phase "$@" 2>&1 | tee "$log"
  status=${PIPESTATUS[0]}
  local verdict=PASS
  case "$status" in
    0) ;;
    124 | 137) verdict="TIME" ;;
    *) verdict="FAIL" ;;
  esac
  [ "$verdict" = PASS ] || failed=1
  summary+=("$(printf '%-14s %-5s %4d s  (exit %d)' "$name" "$verdict" \
    $((SECONDS - began)) "$status")")
  return "$status"
}

command -v nvidia-smi >/dev/null && nvidia-smi -L
export root dir build logs out bench_args
# What every phase needs first (gpu-common.sh), then the rest (the
# communicators' test, the kernel timings), whose failure leaves the phases
# that need them to report it.
build_all() {
  gpu_build_essentials "$build" "$dir/train/include" || return
  cmake --build "$build" -j "$(nproc)" ||
    echo "gpu-session: some of the other targets did not build (above)"
}
export -f gpu_build_essentials build_all
if ! phase build 240 build.log build_all >/dev/null; then
  cp "$logs/build.log" "$out/"
  tail -n 40 "$logs/build.log"
  printf '%s\n' "${summary[@]}"
  exit 1
fi
cp "$logs/build.log" "$out/"
if ! timeout 60 "$build/loom-cuda-probe"; then
  echo "gpu-session: no usable CUDA device: the kernels built, nothing ran"
  exit 77
fi

# The failures and the last line here; the whole test in conformance.log.
phase conformance 120 conformance.log "$build/LoomCudaKernelTest" >/dev/null
grep -A3 '^FAIL' "$logs/conformance.log" | head -n 40
tail -n 1 "$logs/conformance.log"
cp "$logs/conformance.log" "$out/"

# The training and benchmark scripts skip their own build and conformance
# run (done above): gpu-common.sh's gpu_build_and_conform reads this.
export LOOM_GPU_PREBUILT=1
rm -rf /tmp/gpu-train-check
phase train 200 train.log "$root/utils/gpu-train-check.sh" run \
  "$dir/train" "$build"
train=$?
tar -czf "$out/train-runs.tar.gz" -C /tmp gpu-train-check 2>/dev/null
# A failure on the new kernel paths, told apart from one elsewhere: the
# same checks on the fallbacks, when they failed (not ran out of time) and
# the budget leaves the fallback its 130 s and the bench its 330.
if [ "$train" -ne 0 ] && [ "$train" -ne 124 ] && [ "$train" -ne 137 ] &&
  [ "$train" -ne 125 ] && ((budget - (SECONDS - start) > 460)); then
  LOOM_CUDA_ATTENTION=simt LOOM_CUDA_NORM=block \
    LOOM_CUDA_GEMM_EPILOGUES=basic phase train-fallback 120 \
    train-fallback.log "$root/utils/gpu-train-check.sh" run "$dir/train" \
    "$build"
  tar -czf "$out/train-fallback-runs.tar.gz" -C /tmp gpu-train-check \
    2>/dev/null
fi

# Loom's row first: the PyTorch rows are the reference, and a lease that
# runs out during torch.compile's compilation still has Loom's number.
bench() {
  local status=0
  # shellcheck disable=SC2086 # the arguments are words
  "$root/utils/gpu-bench.sh" run "$dir/bench" "$build" -- \
    --engines '' $bench_args || status=$?
  cp "$build/loom-profile.txt" "$out/loom-profile.txt" 2>/dev/null
  if [ "$status" -ne 0 ]; then
    echo "== Loom's row again with the fallback kernel paths"
    LOOM_CUDA_ATTENTION=simt LOOM_CUDA_NORM=block \
      LOOM_CUDA_GEMM_EPILOGUES=basic "$root/utils/gpu-bench.sh" run \
      "$dir/bench" "$build" -- --engines '' $bench_args
    echo "gpu-session: Loom's row failed on the default kernel paths" \
      "(exit $status); the row above, if any, is the fallbacks'"
  fi
  echo "== PyTorch"
  python3 "$root/benchmarks/gpu-gpt2.py" --engines compile,eager $bench_args \
    || status=$?
  return "$status"
}
export -f bench
phase bench 330 bench.log bench

phase kernels 60 kernels.log "$build/LoomCudaKernelBench"

echo
echo "== summary ($((SECONDS - start)) s; logs in $logs, kept in $out)"
printf '%s\n' "${summary[@]}"
grep -E '^(PASS|FAIL)|passed|failed' "$logs/conformance.log" 2>/dev/null |
  tail -n 1 | sed 's/^/conformance: /'
for log in train train-fallback; do
  [ -e "$logs/$log.log" ] || continue
  grep -E '^cpu vs gpu|^(dp|tp|zero3|pp-1f1b|pp-one-rank) |LoomCudaCommTest:' \
    "$logs/$log.log" | sed "s/^/$log: /"
done
grep -E '^(engine|eager|compile|loom \(cuda\))' "$logs/bench.log" 2>/dev/null
exit "$failed"
