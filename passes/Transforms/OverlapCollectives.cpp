//===- OverlapCollectives.cpp - Start collectives early -------------------===//
//
// --loom-overlap-collectives: hoists the collectives the kernels can split
// into a start and a wait (KernelCall.h's splittable) and marks them
// loom.overlap; the lowering (LowerToKernels.cpp) starts each marked
// transfer where it stands and waits before its first reader.
//
//===----------------------------------------------------------------------===//

#include "passes/Transforms/Passes.h"

#include "dialects/Loom/LoomDialect.h"
#include "dialects/Loom/LoomOps.h"
#include "passes/Lowering/KernelCall.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/Dialect/Shard/IR/ShardOps.h"
#include "mlir/IR/Builders.h"
#include "llvm/ADT/DenseMap.h"

#include <tuple>

#define DEBUG_TYPE "loom-overlap-collectives"

using namespace mlir;

namespace loom {
#define GEN_PASS_DEF_LOOMOVERLAPCOLLECTIVES
#include "passes/Transforms/Passes.h.inc"

namespace {

/// Ops that compute nothing: the lowering reads their operand's bytes.
bool isAlias(Operation *op) { return isa<ReshapeOp, shard::ShardOp>(op); }

/// Moves each alias to just after the op that defines its operand (or the
/// block's start), in order, so that a collective reading one can move up
/// to the real producer.
void hoistAliases(Block &block) {
  for (Operation &op : llvm::make_early_inc_range(block.without_terminator())) {
    if (!isAlias(&op))
      continue;
    Operation *def = op.getOperand(0).getDefiningOp();
    if (def && def->getBlock() == &block)
      op.moveAfter(def);
    else
      op.moveBefore(&block, block.begin());
  }
}

/// Reorders `block`: each splittable collective to just before the op that
/// followed its operand's producer (an all-gather no earlier than the op
/// that followed the previous all-gather), marked; every other op in its
/// order. Sorting by (anchor, moved first, index) keeps the moved ones in
/// their order and everything else as it was.
void hoistCollectives(Block &block) {
  SmallVector<Operation *> ops;
  DenseMap<Operation *, int64_t> index;
  for (Operation &op : block.without_terminator()) {
    index[&op] = static_cast<int64_t>(ops.size());
    ops.push_back(&op);
  }
  SmallVector<std::tuple<int64_t, int, int64_t>> order;
  int64_t lastGather = -1;
  Builder builder(block.getParentOp()->getContext());
  for (auto [at, op] : llvm::enumerate(ops)) {
    auto position = static_cast<int64_t>(at);
    if (!lowering::splittable(op)) {
      order.push_back({position, 1, position});
      continue;
    }
    Operation *def = op->getOperand(0).getDefiningOp();
    int64_t anchor = def && index.count(def) ? index[def] + 1 : 0;
    if (isa<shard::AllGatherOp>(op)) {
      anchor = std::max(anchor, lastGather + 1);
      lastGather = position;
    }
    op->setAttr(kOverlapAttr, builder.getUnitAttr());
    order.push_back({anchor, 0, position});
  }
  llvm::sort(order);
  Operation *terminator = block.getTerminator();
  for (auto [anchor, kind, at] : order)
    ops[at]->moveBefore(terminator);
}

struct OverlapCollectivesPass
    : impl::LoomOverlapCollectivesBase<OverlapCollectivesPass> {
  void runOnOperation() override {
    getOperation().walk([](func::FuncOp fn) {
      if (!fn.getBody().hasOneBlock())
        return;
      Block &block = fn.getBody().front();
      hoistAliases(block);
      hoistCollectives(block);
    });
  }
};

} // namespace
} // namespace loom
