//===- PrintShardingRules.cpp - Show what the planner sees of each op -----===//
//
// Implements --loom-print-sharding-rules: one remark per op with its
// sharding rule, after checking the rule against the op's shapes.
//
//===----------------------------------------------------------------------===//

#include "passes/Sharding/Passes.h"

#include "dialects/Loom/LoomOps.h"

#define DEBUG_TYPE "loom-print-sharding-rules"

namespace loom {
#define GEN_PASS_DEF_LOOMPRINTSHARDINGRULES
#include "passes/Sharding/Passes.h.inc"
} // namespace loom

using namespace mlir;

namespace loom {
namespace {

struct PrintShardingRulesPass
    : impl::LoomPrintShardingRulesBase<PrintShardingRulesPass> {
  void runOnOperation() override {
    WalkResult result =
        getOperation()->walk([&](ShardingRuleOpInterface op) -> WalkResult {
          OpShardingRule rule = op.getShardingRule();
          if (failed(rule.verify(op->getOperandTypes(), op->getResultTypes(),
                                 [&] { return op->emitOpError(); })))
            return WalkResult::interrupt();
          op->emitRemark() << "sharding rule " << rule.str();
          return WalkResult::advance();
        });
    if (result.wasInterrupted())
      signalPassFailure();
  }
};

} // namespace
} // namespace loom
