//===- LoomDialect.cpp - The loom dialect and its generated code ----------===//
//
// Registers the ops and instantiates what TableGen generated for the
// dialect, its ops and the sharding-rule and cost interfaces. The verifiers
// and sharding rules live in one file per op group (ElementwiseOps.cpp, ...),
// the costs that differ from the interface's defaults in OpCost.cpp.
// Every loom op may be inlined (upstream --inline), so that a @train_step
// calling @forward_backward becomes the one block --loom-auto-shard plans.
//
//===----------------------------------------------------------------------===//

#include "dialects/Loom/GradientBuilders.h"
#include "dialects/Loom/LoomOps.h"

#include "mlir/IR/Builders.h"
#include "mlir/IR/OpImplementation.h"
#include "mlir/Transforms/InliningUtils.h"

using namespace mlir;
using namespace loom;

#include "dialects/Loom/CostInterface.cpp.inc"
#include "dialects/Loom/LoomDialect.cpp.inc"
#include "dialects/Loom/ShardingRuleInterface.cpp.inc"

namespace {
/// Every loom op is a pure function of its operands (dropout masks too:
/// they are keyed by seed, step and site), so calls into loom code may be
/// inlined anywhere: --inline folds @forward_backward into @train_step
/// before the step is sharded as one function.
struct LoomInlinerInterface : DialectInlinerInterface {
  using DialectInlinerInterface::DialectInlinerInterface;
  bool isLegalToInline(Operation *, Region *, bool, IRMapping &) const final {
    return true;
  }
};
} // namespace

void LoomDialect::initialize() {
  addOperations<
#define GET_OP_LIST
#include "dialects/Loom/LoomOps.cpp.inc"
      >();
  addInterfaces<LoomInlinerInterface>();
}

#define GET_OP_CLASSES
#include "dialects/Loom/LoomOps.cpp.inc"
