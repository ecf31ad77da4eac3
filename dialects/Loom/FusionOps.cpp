//===- FusionOps.cpp - Ops run as one kernel ------------------------------===//
//
// loom.fused holds ops that --loom-fuse grouped; its verifier checks only
// the region's contract (block arguments and yielded values typed as the
// op's inputs and results, loom ops inside). Whether a kernel can run a
// body is the lowering's question, answered with its own diagnostic.
//
//===----------------------------------------------------------------------===//

#include "dialects/Loom/LoomOps.h"

using namespace mlir;

namespace loom {

LogicalResult FusedOp::verify() {
  Block &body = getBody().front();
  if (!llvm::equal(body.getArgumentTypes(), getInputs().getTypes()))
    return emitOpError("has block arguments of types other than its inputs'");
  auto yield = dyn_cast<YieldOp>(body.getTerminator());
  if (!yield)
    return emitOpError("body must end in loom.yield");
  if (!llvm::equal(yield.getValues().getTypes(), getOutputs().getTypes()))
    return emitOpError("yields values of types other than its results'");
  for (Operation &op : body.without_terminator())
    if (!isa<LoomDialect>(op.getDialect()) || isa<FusedOp>(op))
      return op.emitOpError("cannot be inside loom.fused (loom ops only, "
                            "not nested)");
  return success();
}

} // namespace loom
