#!/usr/bin/env bash
# The main job: installs what is missing, builds Loom, and runs it on the
# bundled example. Today that is one GPT-2 block written in the loom
# dialect: loom-opt verifies it and reports, op by op, the sharding rule the
# planner will use. (Import, planning and training on CPU ranks take its
# place as those stages land.)
#
# usage: utils/run-main-job.sh
# environment: LOOM_BUILD_DIR, LOOM_ENABLE_CUDA as for utils/run-tests.sh
set -euo pipefail

root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
build=${LOOM_BUILD_DIR:-$root/build}
"$root/utils/run-tests.sh" --build-only

echo "== examples/gpt2-block.mlir: sharding rules of every op"
"$build/bin/loom-opt" "$root/examples/gpt2-block.mlir" --loom-print-sharding-rules \
  --mlir-print-op-on-diagnostic=false -o /dev/null 2>&1 \
  | sed -n 's|^.*gpt2-block.mlir:\([0-9]*\):[0-9]*: remark: sharding rule |line \1: |p'
echo "== examples/gpt2-block.mlir verifies; IR as loom-opt prints it:"
"$build/bin/loom-opt" "$root/examples/gpt2-block.mlir"
