#!/usr/bin/env bash
# The main job: installs what is missing, builds Loom, and trains the
# bundled tiny GPT-2 (examples/configs/gpt2-tiny.json) on the bundled corpus
# (examples/data/corpus.txt, byte-level tokens):
#   1. loom-import prints the model's summary, writes its @forward graph and
#      freshly initialized weights;
#   2. loom-opt reports the sharding rule of every op of the first block,
#      which is what the planner will split;
#   3. loom-opt --loom-autodiff --loom-optimizer builds @train_step;
#   4. loom-plan --estimate predicts a data-parallel plan over this
#      machine's cores (the cpu-local cluster preset);
#   5. loom-plan chooses a plan for 4 CPU ranks (examples/clusters/
#      cpu-4-ranks.json) with a two-stage pipeline and prints it and its
#      --loom-pipeline options;
#   6. loom-opt cuts the training step into pipeline stages with them, plans
#      the sharding of each stage over its 2 ranks (--loom-auto-shard, the
#      ILP), partitions it and splits the stages' functions and schedule;
#   7. loom-compile lowers it to native code (model.loom);
#   8. mpirun starts 4 ranks of loom-run, which train it, print the falling
#      loss and save a sharded checkpoint; loom-checkpoint consolidates it
#      into one HF-named safetensors file.
#
# usage: utils/run-main-job.sh
# environment: LOOM_BUILD_DIR, LOOM_ENABLE_CUDA as for utils/run-tests.sh;
#   LOOM_STEPS (default 200) training steps
set -euo pipefail

root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
build=${LOOM_BUILD_DIR:-$root/build}
"$root/utils/run-tests.sh" --build-only

config="$root/examples/configs/gpt2-tiny.json"
graph="$build/gpt2-tiny.mlir"
shape=(--micro-batch 8 --seq-len 64)
steps=${LOOM_STEPS:-200}

echo "== loom-import examples/configs/gpt2-tiny.json --summary ${shape[*]}"
"$build/bin/loom-import" "$config" --summary "${shape[@]}"

echo "== loom-import ... -o $graph --init-weights $build/gpt2-tiny.init.safetensors"
"$build/bin/loom-import" "$config" "${shape[@]}" -o "$graph" \
  --init-weights "$build/gpt2-tiny.init.safetensors"
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

echo "== loom-opt --loom-autodiff --loom-optimizer=\"kind=adamw lr=3e-3 weight-decay=0\""
"$build/bin/loom-opt" "$graph" --loom-autodiff \
  --loom-optimizer="kind=adamw lr=3e-3 weight-decay=0" -o "$build/gpt2-tiny.train.mlir"
echo "$(grep -c ' = loom\.' "$build/gpt2-tiny.train.mlir") loom ops in @forward, @forward_backward and @train_step"

cores=$(nproc)
echo "== loom-plan --cluster cpu-local --dp $cores --micro-batch 8 --estimate (one data-parallel rank per core)"
"$build/bin/loom-plan" "$config" --cluster cpu-local --global-batch $((8 * cores)) \
  --seq 64 --dp "$cores" --micro-batch 8 --mixed-precision=false --estimate

echo "== loom-tokenize examples/data/corpus.txt"
"$build/bin/loom-tokenize" "$root/examples/data/corpus.txt" -o "$build/corpus.tokens"
"$build/bin/loom-tokenize" --info "$build/corpus.tokens"

ranks=4
cluster="$root/examples/clusters/cpu-4-ranks.json"
echo "== loom-plan --cluster examples/clusters/cpu-4-ranks.json --global-batch 8 --pp 2 --micro-batch 2"
"$build/bin/loom-plan" "$config" --cluster "$cluster" --global-batch 8 --seq 64 \
  --pp 2 --micro-batch 2 --mixed-precision=false --top 1 | tee "$build/gpt2-tiny.plan.txt"
pipeline=$(sed -n 's/^loom-opt: *--loom-pipeline="\(.*\)"$/\1/p' "$build/gpt2-tiny.plan.txt")
mesh=$((ranks / 2))

echo "== loom-opt --loom-pipeline=\"$pipeline\" --inline --loom-auto-shard=\"func=train_step mesh=$mesh ...\" --loom-partition --loom-split-stages"
"$build/bin/loom-opt" "$build/gpt2-tiny.train.mlir" --loom-pipeline="$pipeline" --inline \
  --loom-auto-shard="func=train_step mesh=$mesh cluster=$cluster" \
  --loom-partition="func=train_step" --loom-split-stages -o "$build/gpt2-tiny.partitioned.mlir"
echo "$(grep -c 'func.func @stage' "$build/gpt2-tiny.partitioned.mlir") stage functions, each on a grid of $mesh ranks; collectives the partitioner inserted:"
grep -oE 'shard\.(all_reduce|all_gather|reduce_scatter|all_to_all|all_slice)' \
  "$build/gpt2-tiny.partitioned.mlir" | sort | uniq -c | sed 's/^/  /'

echo "== loom-compile -o $build/gpt2-tiny.loom"
"$build/bin/loom-compile" "$build/gpt2-tiny.partitioned.mlir" -o "$build/gpt2-tiny.loom"
ls "$build/gpt2-tiny.loom"

# OpenMPI refuses root unless told, and more ranks than cores unless
# oversubscribed.
mpirun_flags=(-np "$ranks" --oversubscribe)
if [ "$(id -u)" -eq 0 ]; then
  export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
fi
echo "== mpirun ${mpirun_flags[*]} loom-run gpt2-tiny.loom --steps $steps (every 10th step shown)"
mpirun "${mpirun_flags[@]}" "$build/bin/loom-run" "$build/gpt2-tiny.loom" \
  --init "$build/gpt2-tiny.init.safetensors" --data "$build/corpus.tokens" \
  --steps "$steps" --log-json "$build/gpt2-tiny.log.jsonl" --save "$build/gpt2-tiny.ckpt" \
  | awk 'NR == 1 || /^step/ && ($2 == 1 || $2 % 10 == 0) || /saved/'

echo "== loom-checkpoint consolidate gpt2-tiny.ckpt -o gpt2-tiny.trained.safetensors"
"$build/bin/loom-checkpoint" consolidate "$build/gpt2-tiny.ckpt" \
  -o "$build/gpt2-tiny.trained.safetensors"
echo "log: $build/gpt2-tiny.log.jsonl; sharded checkpoint (resume with loom-run --resume):" \
  "$build/gpt2-tiny.ckpt; trained weights (HF names): $build/gpt2-tiny.trained.safetensors"
