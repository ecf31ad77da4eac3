#!/usr/bin/env bash
# The main job: installs what is missing, builds Loom, and runs it on the
# bundled tiny GPT-2 (examples/configs/gpt2-tiny.json): loom-import prints
# its summary and writes its @forward graph, then loom-opt reports the
# sharding rule of every op of the first block, which is what the planner
# will split. (Autodiff, planning and training on CPU ranks extend this job
# as those stages land.)
#
# usage: utils/run-main-job.sh
# environment: LOOM_BUILD_DIR, LOOM_ENABLE_CUDA as for utils/run-tests.sh
set -euo pipefail

root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
build=${LOOM_BUILD_DIR:-$root/build}
"$root/utils/run-tests.sh" --build-only

config="$root/examples/configs/gpt2-tiny.json"
graph="$build/gpt2-tiny.mlir"
shape=(--micro-batch 4 --seq-len 64)

echo "== loom-import examples/configs/gpt2-tiny.json --summary ${shape[*]}"
"$build/bin/loom-import" "$config" --summary "${shape[@]}"

echo "== loom-import ... -o $graph"
"$build/bin/loom-import" "$config" "${shape[@]}" -o "$graph"
echo "$(grep -c ' = loom\.' "$graph") loom ops in @forward"

echo "== sharding rules of the first block (loom-opt --loom-print-sharding-rules)"
adds=0
"$build/bin/loom-opt" "$graph" --loom-print-sharding-rules \
  --mlir-print-op-on-diagnostic=false -o /dev/null 2>&1 \
  | sed -n 's|^.*:\([0-9]*\):[0-9]*: remark: sharding rule \(.*\)$|\1 \2|p' \
  | while read -r line rule; do
      op=$(sed -n "${line}p" "$graph" | grep -oE 'loom\.[a-z_]+' | head -n 1)
      printf '  %-18s %s\n' "$op" "$rule"
      [ "$op" = loom.add ] && [ "$((++adds))" -eq 7 ] && break
    done || true
