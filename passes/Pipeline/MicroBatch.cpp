//===- MicroBatch.cpp - A loss function on one micro-batch ----------------===//
//
// The batch is a factor of each op's sharding rule: the factor that maps
// the batch dimension of an operand. It shrinks every result dimension it
// is the outermost factor of; a result that does not map it sums over the
// batch (the loss, or a weight gradient), and is left as it is: the M
// micro-batches' values sum to the batch's.
//
//===----------------------------------------------------------------------===//

#include "passes/Pipeline/MicroBatch.h"

#include "dialects/Loom/LoomDialect.h"
#include "dialects/Loom/LoomOps.h"
#include "loom/Support/Diagnostics.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/IR/Builders.h"
#include "mlir/IR/BuiltinAttributes.h"

using namespace mlir;

namespace loom {
namespace {

/// Which dimension of a value holds the batch (absent: none).
using BatchDims = DenseMap<Value, int64_t>;

RankedTensorType withBatch(RankedTensorType type, int64_t dim, int64_t m) {
  SmallVector<int64_t> shape(type.getShape());
  shape[dim] /= m;
  return RankedTensorType::get(shape, type.getElementType(),
                               type.getEncoding());
}

bool hasDropout(Operation *op) {
  if (isa<DropoutOp, DropoutGradOp>(op))
    return true;
  std::optional<APFloat> rate;
  if (auto attention = dyn_cast<AttentionOp>(op))
    rate = attention.getDropoutRate();
  else if (auto grad = dyn_cast<AttentionGradOp>(op))
    rate = grad.getDropoutRate();
  return rate && rate->convertToDouble() > 0;
}

class Splitter {
public:
  Splitter(func::FuncOp fn, int64_t m) : fn(fn), m(m) {}

  LogicalResult run() {
    Block &body = fn.getBody().front();
    // Rules read the op's shapes: take them all before any shape changes.
    for (Operation &op : body.without_terminator())
      if (auto ruled = dyn_cast<ShardingRuleOpInterface>(op))
        rules.try_emplace(&op, ruled.getShardingRule());
    for (BlockArgument arg : body.getArguments()) {
      auto type = dyn_cast<RankedTensorType>(arg.getType());
      if (!type || type.getRank() == 0 ||
          !isa<IntegerType>(type.getElementType()))
        continue;
      if (type.getDimSize(0) % m != 0)
        return emitLineError(fn)
               << "--loom-pipeline: the batch of " << type.getDimSize(0)
               << " sequences (argument " << arg.getArgNumber()
               << ") does not divide into " << m << " micro-batches";
      batch[arg] = 0;
      arg.setType(withBatch(type, 0, m));
    }
    for (Operation &op : body.without_terminator())
      if (failed(rewrite(op)))
        return failure();
    auto ret = cast<func::ReturnOp>(body.getTerminator());
    fn.setFunctionType(FunctionType::get(
        fn.getContext(), body.getArgumentTypes(), ret.getOperandTypes()));
    return success();
  }

private:
  LogicalResult rewrite(Operation &op) {
    bool any =
        llvm::any_of(op.getOperands(), [&](Value v) { return batch.count(v); });
    if (!any)
      return success();
    // Dropout draws masks by the element's index in the whole batch: the
    // op learns how many micro-batches there are, the executor which one
    // runs.
    if (m > 1 && hasDropout(&op)) {
      auto it = batch.find(op.getOperand(0));
      if (it == batch.end() || it->second != 0)
        return op.emitError("--loom-pipeline: dropout on a tensor whose "
                            "first dimension is not the batch cannot be "
                            "cut into micro-batches");
      op.setAttr(kMaskMicroBatchesAttr, Builder(&op).getI64IntegerAttr(m));
    }
    auto found = rules.find(&op);
    if (found == rules.end())
      return op.emitError("--loom-pipeline: '")
             << op.getName()
             << "' has no sharding rule to follow the batch through";
    const OpShardingRule &rule = found->second;

    // The batch factor: the outermost factor of an operand's batch
    // dimension, the same for every operand that has one.
    int64_t factor = OpShardingRule::kNoFactor;
    for (auto [i, operand] : llvm::enumerate(op.getOperands())) {
      auto it = batch.find(operand);
      if (it == batch.end())
        continue;
      const DimMapping &dim = rule.getOperands()[i][it->second];
      int64_t f = dim.empty() ? OpShardingRule::kNoFactor : dim.front();
      if (f == OpShardingRule::kNoFactor ||
          (factor != OpShardingRule::kNoFactor && f != factor))
        return op.emitError("--loom-pipeline: the batch of operand ")
               << i << " does not map to one factor of the op's sharding rule";
      factor = f;
    }
    if (rule.getFactorKind(factor) == FactorKind::Whole)
      return op.emitError("--loom-pipeline: the op needs its batch whole");

    // Operands without the batch must not map it.
    for (auto [i, operand] : llvm::enumerate(op.getOperands())) {
      if (batch.count(operand))
        continue;
      for (auto [d, dim] : llvm::enumerate(rule.getOperands()[i])) {
        if (!llvm::is_contained(dim, factor))
          continue;
        if (failed(splitConstant(op, i, d)))
          return failure();
      }
    }

    bool reduced = false;
    for (auto [i, result] : llvm::enumerate(op.getResults())) {
      const TensorMapping &mapping = rule.getResults()[i];
      bool found = false;
      for (auto [d, dim] : llvm::enumerate(mapping)) {
        if (!llvm::is_contained(dim, factor))
          continue;
        if (dim.front() != factor)
          return op.emitError("--loom-pipeline: result ")
                 << i << " holds the batch inside dimension " << d
                 << "; a micro-batch needs it outermost";
        auto type = cast<RankedTensorType>(result.getType());
        result.setType(withBatch(type, d, m));
        batch[result] = d;
        found = true;
      }
      reduced |= !found;
    }
    if (!reduced)
      return success();
    // A result sums over the batch: the micro-batches' values must add up.
    if (auto ce = dyn_cast<CrossEntropyOp>(op)) {
      if (!ce.getTokenCountAttr())
        ce.setTokenCountAttr(Builder(&op).getI64IntegerAttr(
            cast<RankedTensorType>(ce.getLabels().getType()).getNumElements() *
            m));
      return success();
    }
    if (isa<ReduceMeanOp>(op) ||
        rule.getReductionKind() != shard::ReductionKind::Sum)
      return op.emitError("--loom-pipeline: the op reduces over the batch "
                          "with something other than a sum, which "
                          "micro-batches cannot add up");
    return success();
  }

  /// A splat constant combined with the batch takes its micro-batch shape;
  /// anything else cannot be split.
  LogicalResult splitConstant(Operation &op, unsigned i, int64_t dim) {
    Value operand = op.getOperand(i);
    auto constant = operand.getDefiningOp<arith::ConstantOp>();
    auto splat = constant ? dyn_cast<SplatElementsAttr>(constant.getValue())
                          : SplatElementsAttr();
    if (!splat)
      return op.emitError("--loom-pipeline: operand ")
             << i << " has the batch in dimension " << dim
             << " but does not come from the batch";
    auto type = withBatch(cast<RankedTensorType>(operand.getType()), dim, m);
    OpBuilder b(&op);
    auto small = arith::ConstantOp::create(
        b, constant.getLoc(), type,
        SplatElementsAttr::get(type, splat.getSplatValue<Attribute>()));
    op.setOperand(i, small);
    batch[small] = dim;
    return success();
  }

  func::FuncOp fn;
  int64_t m;
  BatchDims batch;
  DenseMap<Operation *, OpShardingRule> rules;
};

} // namespace

LogicalResult splitMicroBatch(func::FuncOp fn, int64_t numMicroBatches) {
  if (!fn.getBody().hasOneBlock())
    return emitLineError(fn) << "--loom-pipeline: '" << fn.getSymName()
                             << "' must have a body of one block";
  return Splitter(fn, numMicroBatches).run();
}

} // namespace loom
