#!/usr/bin/env bash
# gpu-node.sh - Loom's GPU checks and benchmark on a GPU node without LLVM.
#
#   utils/gpu-node.sh prepare DIR                  # on a machine with LLVM
#   utils/gpu-node.sh run [--budget S] [--no-build] [--skip PHASE]... DIR [OUT]
#                                                  # on the GPU node, DIR copied there
#
# A GPU node often has a CUDA toolkit, CMake, MPI, Python (numpy, mpi4py,
# PyTorch) but no LLVM: Loom compiles the artifacts elsewhere and the node
# builds only runtime/cuda/standalone. `prepare` builds Loom (utils/
# run-tests.sh --build-only; LOOM_BUILD_DIR as there) and writes into DIR:
#   include/nlohmann/   nlohmann-json's header, which the runtime's artifact
#                       loader needs and a GPU node may lack
#   train/              what the standalone project's train/ tests train and
#                       compare with (GpuChecks.cmake): the tiny GPT-2 (8 x 64)
#                       --target=cuda in bf16 and f32 and its 50-step CPU run,
#                       the same with a vocabulary of 250 (padded to 256), the
#                       f32 step at 8 x 32 pinned to DP, TP, ZeRO-3, a 2-stage
#                       1F1B pipeline and 2 virtual stages on one rank, and the
#                       reference interpreter's 10-step run
#   bench/              GPT-2 124M (examples/configs/gpt2.json, seq 1024) and
#                       the 1B Llama (llama-1b.json, seq 2048), bf16, dropout
#                       off, one artifact per micro-batch of
#                       LOOM_GPU_GPT2_BATCHES (64,48,32,16,8) and
#                       LOOM_GPU_LLAMA_BATCHES (8,4,2,1): the benchmark keeps
#                       the largest that fits
# `run` configures and builds runtime/cuda/standalone with DIR's checks
# (LOOM_GPU_BUILD_DIR, default /tmp/loom-gpu-node; LOOM_CUDA_ARCH as there),
# exits 77 when no device is usable, runs `ctest -L cuda-gpu` (conformance,
# communicators, training), again on the fallback kernel paths
# (LOOM_CUDA_ATTENTION=simt LOOM_CUDA_NORM=block LOOM_CUDA_GEMM_EPILOGUES=basic)
# for the tests that failed, then benchmarks/gpu-train.py for both models:
# Loom's row with its kernel profile first (again on the fallback paths if it
# fails, so that the run still gives a number and tells which path broke),
# then torch.compile (both with LOOM_GPU_BENCH_ARGS, default "--steps 20
# --warmup 5"), then LoomCudaKernelBench, and a summary table last.
# With --budget S every phase runs under `timeout`, cut to what is left of S
# seconds, and one that would start with under 20 s is skipped; the tests'
# fallback runs only when it leaves the benchmark its time. Everything
# printed is shown as it comes and kept in OUT/run.log (default
# ./gpu-node-out); OUT also gets build.log, ctest.log (every test's whole
# output), ctest-fallback.log and profile-MODEL.txt, and nothing else.
# LOOM_CUDA_DRIVER=LIB trains and benchmarks through the CUDA driver LIB
# instead of the one built (the main build's libloom_cuda_driver_fake.so
# runs the host side on the fake device, docs/cuda.md).
#
# --no-build uses the runtime already built in LOOM_GPU_BUILD_DIR (by `run`
# or by cmake as above, on a login node with the same CUDA major version
# where the GPU node has no compiler or no MPI headers): no configure, no
# build. --skip tests|gpt2-124m|llama-1b|torch|kernels leaves that phase
# out (repeatable; torch: PyTorch's rows of both models).
#
# Exit status: 0 when every phase passed (or skipped itself: PyTorch without
# CUDA, say), 1 when one failed, ran out of time or was left out for the
# budget, 77 without a usable CUDA device, 2 on a usage error.
# shellcheck disable=SC2317 # the phases' functions run through `bash -c`
set -uo pipefail

root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
usage() {
  echo "usage: $0 prepare DIR | run [--budget SECONDS] [--no-build] [--skip PHASE]... DIR [OUT]" >&2
  exit 2
}

prepare() {
  local dir="$1" bin inputs="$root/test/tools/loom-run/Inputs" batch scheme model
  local nodrop=(--precision bf16 --attn-pdrop 0 --embd-pdrop 0 --resid-pdrop 0)
  local shard=(--loom-auto-shard="func=train_step mesh=2 cluster=$inputs/two-cores.json"
               --loom-partition="func=train_step")
  set -e
  "$root/utils/run-tests.sh" --build-only
  bin="$(cd "${LOOM_BUILD_DIR:-$root/build}" && pwd)/bin"
  rm -rf "$dir/include" "$dir/train" "$dir/bench"
  mkdir -p "$dir/include" "$dir/train/parallel" "$dir/bench"
  dir="$(cd "$dir" && pwd)"
  cp -r /usr/include/nlohmann "$dir/include/"
  cd "$dir/train"
  "$bin/loom-tokenize" "$root/examples/data/corpus.txt" -o corpus.tokens
  # step CONFIG FLAGS...: the tiny GPT-2's training step, AdamW lr 3e-3.
  step() {
    "$bin/loom-import" "$@" | "$bin/loom-opt" --loom-autodiff --loom-optimizer="kind=adamw lr=3e-3"
  }
  sed 's/"vocab_size": 256/"vocab_size": 250/' "$root/examples/configs/gpt2-tiny.json" >v250.json
  for model in "gpt2-bf16 gpt2-tiny.json --precision bf16" "gpt2-f32 gpt2-tiny.json" \
    "gpt2-f32-v250 v250.json"; do
    # shellcheck disable=SC2086 # a row of words
    set -- $model
    local config="$root/examples/configs/$2" init=init
    [ "$1" = gpt2-f32-v250 ] && config=v250.json init=init-v250
    step "$config" --micro-batch 8 --seq-len 64 --init-weights "$init.safetensors" "${@:3}" \
      | "$bin/loom-opt" --inline -o "$1.mlir"
    "$bin/loom-compile" --target=cuda "$1.mlir" -o "$1.loom"
    [ "$1" = gpt2-bf16 ] && continue
    "$bin/loom-compile" "$1.mlir" -o cpu.loom
    "$bin/loom-run" cpu.loom --np 1 --init "$init.safetensors" --data corpus.tokens --steps 50 \
      --log-json "cpu${init#init}.jsonl" >/dev/null
    rm -rf cpu.loom
  done
  step "$root/examples/configs/gpt2-tiny.json" --micro-batch 8 --seq-len 32 \
    --init-weights parallel/init.safetensors >parallel/calls.mlir
  # The parallel checks start from init.safetensors: the importer draws the
  # weights from the config alone, whatever the batch.
  cmp -s init.safetensors parallel/init.safetensors ||
    { echo "gpu-node: the 8 x 32 step's initial weights differ from the 8 x 64 step's" >&2; exit 1; }
  "$bin/loom-opt" parallel/calls.mlir --inline -o parallel/gpt2.mlir
  "$bin/loom-run" --backend=reference parallel/gpt2.mlir --init init.safetensors \
    --data corpus.tokens --steps 10 --log-json parallel/ref.jsonl >/dev/null
  for scheme in dp tp zero3; do
    python3 "$inputs/pin.py" "$scheme" 2 <parallel/gpt2.mlir | "$bin/loom-opt" "${shard[@]}" \
      | "$bin/loom-compile" --target=cuda -o "parallel/$scheme.loom"
  done
  "$bin/loom-opt" parallel/calls.mlir --loom-pipeline="stages=2 micro-batches=4" --inline \
    --loom-split-stages | "$bin/loom-compile" --target=cuda -o parallel/pp-1f1b.loom
  "$bin/loom-opt" parallel/calls.mlir \
    --loom-pipeline="stages=1 virtual-stages=2 micro-batches=2 schedule=interleaved-1f1b" \
    --inline --loom-split-stages | "$bin/loom-compile" --target=cuda -o parallel/pp-one-rank.loom
  rm -f ./*.mlir v250.json parallel/*.mlir parallel/init.safetensors
  for model in "gpt2-124m gpt2 ${LOOM_GPU_GPT2_BATCHES:-64,48,32,16,8} 1024" \
    "llama-1b llama-1b ${LOOM_GPU_LLAMA_BATCHES:-8,4,2,1} 2048"; do
    # shellcheck disable=SC2086 # a row of words
    set -- $model
    for batch in ${3//,/ }; do
      step "$root/examples/configs/$2.json" --micro-batch "$batch" --seq-len "$4" "${nodrop[@]}" \
        | "$bin/loom-opt" --inline | "$bin/loom-compile" --target=cuda -o "$dir/bench/$1-b$batch.loom"
    done
  done
  du -sh "$dir"
}

[ $# -ge 2 ] || usage
mode="$1"
shift
if [ "$mode" = prepare ]; then
  [ $# -eq 1 ] || usage
  prepare "$1"
  exit
fi
[ "$mode" = run ] || usage
budget=""
no_build=0
skip=" "
while [ $# -gt 0 ]; do
  case "$1" in
    --budget)
      [[ "${2:-}" =~ ^[0-9]+$ ]] || usage
      budget="$2"
      shift 2 ;;
    --no-build) no_build=1; shift ;;
    --skip)
      case "${2:-}" in tests | gpt2-124m | llama-1b | torch | kernels) ;; *) usage ;; esac
      skip+="$2 "
      shift 2 ;;
    *) break ;;
  esac
done
skipped() { [[ "$skip" == *" $1 "* ]]; }
[ $# -ge 1 ] && [ $# -le 2 ] || usage
[ -d "$1/train" ] && [ -d "$1/bench" ] || {
  echo "gpu-node: $1 has no train/ and bench/: run '$0 prepare $1' where LLVM is" >&2
  exit 2
}
dir="$(cd "$1" && pwd)"
out="${2:-$PWD/gpu-node-out}"
build="${LOOM_GPU_BUILD_DIR:-/tmp/loom-gpu-node}"
logs="$build/node-logs"
mkdir -p "$out" "$logs" || exit 2
out="$(cd "$out" && pwd)"
rm -f "$logs"/*.log "$out"/{run,build,ctest,ctest-fallback}.log "$out"/profile-*.txt
exec > >(tee "$out/run.log") 2>&1
tee_pid=$!
# run.log whole before the script ends: close the pipe, wait for tee.
trap 'exec >&- 2>&-; wait "$tee_pid" 2>/dev/null' EXIT

start=$SECONDS
summary=()
failed=0
# left: seconds left of the budget (a large number without one).
left() { if [ -n "$budget" ]; then echo $((budget - (SECONDS - start))); else echo 999999; fi; }
# phase NAME CAP COMMAND...: runs COMMAND (a command or an exported function)
# for at most CAP seconds or what is left of the budget, shown as it comes
# and kept in $logs/NAME.log; records a summary line. Returns its status
# (124: out of time, 125: skipped, 77: no device).
phase() {
  local name="$1" cap="$2" status verdict began=$SECONDS limit
  shift 2
  limit=$(left)
  ((limit < cap)) && cap=$limit
  if ((cap < 20)); then
    summary+=("$(printf '%-24s SKIP  %s s left of the budget' "$name" "$(left)")")
    failed=1
    return 125
  fi
  echo "== $name${budget:+ (at most $cap s)}"
  if [ -n "$budget" ]; then
    timeout --kill-after=10 "$cap" bash -c '"$@"' phase "$@" 2>&1 | tee "$logs/$name.log"
  else
    bash -c '"$@"' phase "$@" 2>&1 | tee "$logs/$name.log"
  fi
  status=${PIPESTATUS[0]}
  case "$status" in
    0) verdict=PASS ;;
    77) verdict=SKIP ;;
    124 | 137) verdict=TIME ;;
    *) verdict=FAIL ;;
  esac
  [ "$verdict" = PASS ] || [ "$verdict" = SKIP ] || failed=1
  summary+=("$(printf '%-24s %-5s %4d s  (exit %d)' "$name" "$verdict" $((SECONDS - began)) "$status")")
  return "$status"
}
# fallback COMMAND...: COMMAND on the kernels' older paths.
fallback() {
  LOOM_CUDA_ATTENTION=simt LOOM_CUDA_NORM=block LOOM_CUDA_GEMM_EPILOGUES=basic "$@"
}
configure() {
  local generator=()
  command -v ninja >/dev/null && generator=(-G Ninja)
  cmake -S "$root/runtime/cuda/standalone" -B "$build" "${generator[@]}" -DCMAKE_BUILD_TYPE=Release \
    -DCMAKE_CUDA_COMPILER="$(command -v nvcc || echo /usr/local/cuda/bin/nvcc)" \
    -DLOOM_NLOHMANN_JSON_INCLUDE_DIR="$dir/include" -DLOOM_GPU_ARTIFACTS="$dir" \
    -DLOOM_GPU_DRIVER="${LOOM_CUDA_DRIVER:-}" ${LOOM_CUDA_ARCH:+-DLOOM_CUDA_ARCH=$LOOM_CUDA_ARCH} &&
    cmake --build "$build" --target loom-cuda-probe
}
# The device: the one the runtime trained through sees (a fake one too).
probe() {
  if [ -n "${LOOM_CUDA_DRIVER:-}" ]; then
    python3 "$root/runtime/cuda/tools/loom_cuda_check.py" devices --lib "$runtime"
  else
    "$build/loom-cuda-probe"
  fi
}
build_all() {
  cmake --build "$build" -j "$(nproc)" >"$out/build.log" 2>&1 || { tail -n 40 "$out/build.log"; return 1; }
}
tests() {  # tests LOG CTEST-ARGS...: ctest, every test's output kept in OUT/LOG
  local log="$1" status=0
  shift
  ctest --test-dir "$build" "$@" --output-on-failure || status=$?
  cp "$build/Testing/Temporary/LastTest.log" "$out/$log" 2>/dev/null
  return "$status"
}
bench() {  # bench MODEL loom|torch [ARGS...]: benchmarks/gpu-train.py, one engine
  local model="$1" engine="$2" artifacts
  shift 2
  # shellcheck disable=SC2086 # the arguments are words
  if [ "$engine" = torch ]; then
    python3 "$root/benchmarks/gpu-train.py" --model "$model" --engines compile \
      ${LOOM_GPU_BENCH_ARGS:---steps 20 --warmup 5} "$@"
    return
  fi
  artifacts=$(find "$dir/bench" -maxdepth 1 -name "$model-b*.loom" | sed 's/.*-b\([0-9]*\)\.loom$/\1 &/' \
    | sort -rn | cut -d' ' -f2- | paste -sd,)  # largest micro-batch first
  [ -n "$artifacts" ] || { echo "gpu-node: no $model-b*.loom in $dir/bench"; return 1; }
  # shellcheck disable=SC2086
  python3 "$root/benchmarks/gpu-train.py" --model "$model" ${LOOM_GPU_BENCH_ARGS:---steps 20 --warmup 5} \
    --engines '' --loom "$artifacts" --loom-lib "$runtime" "$@"
}
runtime="$build/libloom_runtime.so"
export root dir out build runtime
export -f fallback configure probe build_all tests bench

command -v nvidia-smi >/dev/null && nvidia-smi -L
if ((no_build)); then
  [ -x "$build/loom-cuda-probe" ] && [ -e "$runtime" ] || {
    echo "gpu-node: --no-build: $build has no loom-cuda-probe and libloom_runtime.so built" >&2
    exit 2
  }
else
  phase configure 240 configure || { printf '%s\n' "${summary[@]}"; exit 1; }
fi
probe
status=$?
if [ "$status" -ne 0 ]; then
  echo "gpu-node: no usable CUDA device: nothing to run here"
  exit "$( [ "$status" -eq 77 ] && echo 77 || echo 1)"
fi
((no_build)) || phase build 600 build_all || { printf '%s\n' "${summary[@]}"; exit 1; }
status=0
if ! skipped tests; then
  phase tests 300 tests ctest.log -L cuda-gpu -j 4
  status=$?
fi
# A failure on the new kernel paths, told apart from one elsewhere: the
# failed tests again on the fallbacks when they failed (not ran out of time)
# and the benchmark keeps 300 s; Loom's rows likewise.
if [ "$status" -ne 0 ] && [ "$status" -lt 124 ]; then
  if (($(left) > 450)); then
    phase tests-fallback 150 fallback tests ctest-fallback.log --rerun-failed
  else
    summary+=("tests-fallback           not run: the budget keeps its $(left) s for the benchmark")
  fi
fi
for model in gpt2-124m llama-1b; do
  skipped "$model" && continue
  phase "$model-loom" 150 bench "$model" loom --loom-profile "$out/profile-$model.txt"
  status=$?
  if [ "$status" -ne 0 ] && [ "$status" -lt 124 ]; then
    phase "$model-loom-fallback" 150 fallback bench "$model" loom
  fi
done
for model in gpt2-124m llama-1b; do
  skipped torch || skipped "$model" || phase "$model-torch" 240 bench "$model" torch
done
skipped kernels || phase kernels 90 "$build/LoomCudaKernelBench"

echo
echo "== summary ($((SECONDS - start)) s; logs in $out)"
printf '%s\n' "${summary[@]}"
for log in tests tests-fallback; do
  [ -e "$logs/$log.log" ] || continue
  { grep -E '^[0-9]+% tests passed|^\s+[0-9]+ - .*\)$' "$logs/$log.log" | grep -v ' - train/'
    grep -E '^[a-z0-9-]+ (PASS|FAIL|SKIP)|^[0-9]+ passed, [0-9]+ failed$' "$out/${log/tests/ctest}.log"; } \
    | sed "s/^\s*/$log: /"
done
for model in gpt2-124m llama-1b; do
  cat "$logs/$model"*.log 2>/dev/null | grep -E '^(loom \(cuda\)|compile|eager) ' | sed "s/^/$model  /"
done
exit "$failed"
