//===- BucketGradients.cpp - Fuse gradient all-reduces into buckets -------===//
//
// The last step of --loom-partition: the gradient all-reduces of a
// partitioned step (one per parameter, over the data axes) become a few
// large collectives, as PyTorch DDP's buckets, which pay the collectives'
// latency once per bucket rather than once per tensor.
//
//===----------------------------------------------------------------------===//

#include "passes/Sharding/BucketGradients.h"

#include "dialects/Loom/LoomOps.h"

#include "mlir/Dialect/Shard/IR/ShardOps.h"
#include "mlir/IR/Builders.h"
#include "llvm/ADT/DenseMap.h"
#include "llvm/ADT/MapVector.h"

#include <limits>

using namespace mlir;

namespace loom {
namespace {

/// An all-reduce whose result only feeds optimizer updates, directly or
/// through a cast (a bf16 gradient cast to the f32 master weights'
/// type): a gradient's.
bool isGradientAllReduce(shard::AllReduceOp op) {
  auto feedsUpdates = [](Operation *op) {
    return !op->use_empty() &&
           llvm::all_of(op->getUsers(), [](Operation *user) {
             return isa<AdamWUpdateOp, SGDUpdateOp>(user);
           });
  };
  return op.getReduction() == shard::ReductionKind::Sum && !op->use_empty() &&
         llvm::all_of(op->getUsers(), [&](Operation *user) {
           return isa<AdamWUpdateOp, SGDUpdateOp>(user) ||
                  (isa<CastOp>(user) && feedsUpdates(user));
         });
}

/// Replaces `bucket` (all-reduces over the same axes) by one all-reduce of
/// their flattened concatenation, built at `b`'s insertion point.
void fuseBucket(llvm::ArrayRef<shard::AllReduceOp> bucket, OpBuilder &b) {
  shard::AllReduceOp front = bucket.front();
  Location loc = front.getLoc();
  llvm::SmallVector<Value> flat;
  auto flatten = [&](Value value) -> Value {
    auto type = cast<RankedTensorType>(value.getType());
    if (type.getRank() == 1)
      return value;
    return ReshapeOp::create(b, loc, value,
                             llvm::ArrayRef<int64_t>{type.getNumElements()});
  };
  for (shard::AllReduceOp op : bucket)
    flat.push_back(flatten(op.getInput()));
  Value joined = ConcatOp::create(b, loc, flat, 0);
  Value reduced = shard::AllReduceOp::create(
      b, loc, joined.getType(), front.getGrid(), front.getGridAxes(), joined,
      shard::ReductionKind::Sum);
  int64_t offset = 0;
  for (shard::AllReduceOp op : bucket) {
    auto type = cast<RankedTensorType>(op.getType());
    int64_t n = type.getNumElements();
    Value piece = SliceOp::create(
        b, loc, RankedTensorType::get({n}, type.getElementType()), reduced,
        b.getDenseI64ArrayAttr({offset}));
    offset += n;
    if (type.getRank() != 1)
      piece = ReshapeOp::create(b, loc, piece, type.getShape());
    op.replaceAllUsesWith(piece);
  }
  // Only now: the insertion point may sit just before one of them.
  for (shard::AllReduceOp op : bucket)
    op.erase();
}

} // namespace

/// Groups the gradient all-reduces of `block` (same axes and element type,
/// in program order) into buckets of at most `bucketBytes` and fuses each.
/// A bucket is placed after the last of its gradients is computed, so it
/// must come before the first optimizer update that reads any of them.
void bucketGradientAllReduces(Block &block, double bucketBytes) {
  llvm::DenseMap<Operation *, int64_t> position;
  int64_t index = 0;
  for (Operation &op : block)
    position[&op] = index++;
  auto defined = [&](Value value) -> int64_t {
    Operation *def = value.getDefiningOp();
    return def ? position[def] : -1;
  };
  auto firstUse = [&](shard::AllReduceOp op) {
    int64_t first = std::numeric_limits<int64_t>::max();
    for (Operation *user : op->getUsers())
      first = std::min(first, position[user]);
    return first;
  };

  struct Bucket {
    llvm::SmallVector<shard::AllReduceOp> ops;
    int64_t lastDefined = -1, firstUse = 0;
    double bytes = 0;
  };
  llvm::SmallVector<Bucket> buckets;
  llvm::MapVector<std::tuple<Attribute, Type, Attribute>, Bucket> open;
  for (Operation &op : block) {
    auto reduce = dyn_cast<shard::AllReduceOp>(op);
    if (!reduce || !isGradientAllReduce(reduce))
      continue;
    auto type = cast<RankedTensorType>(reduce.getType());
    if (type != reduce.getInput().getType())
      continue;
    double bytes = type.getNumElements() *
                   type.getElementType().getIntOrFloatBitWidth() / 8.0;
    // A pipelined step (--loom-pipeline) keeps each stage's gradients in
    // buckets of their own: each stage reduces and updates its parameters.
    Operation *producer = reduce.getInput().getDefiningOp();
    Attribute stage = producer ? producer->getAttr(kStageAttr) : Attribute();
    auto key = std::make_tuple(Attribute(reduce.getGridAxesAttr()),
                               type.getElementType(), stage);
    Bucket &bucket = open[key];
    int64_t def = defined(reduce.getInput()), use = firstUse(reduce);
    bool fits =
        bucket.ops.empty() ||
        (bucket.bytes + bytes <= bucketBytes &&
         std::max(bucket.lastDefined, def) < std::min(bucket.firstUse, use) &&
         bucket.ops.front().getGrid() == reduce.getGrid());
    if (!fits) {
      buckets.push_back(std::move(bucket));
      bucket = Bucket{};
    }
    if (bucket.ops.empty())
      bucket.firstUse = use;
    bucket.ops.push_back(reduce);
    bucket.lastDefined = std::max(bucket.lastDefined, def);
    bucket.firstUse = std::min(bucket.firstUse, use);
    bucket.bytes += bytes;
  }
  for (auto &entry : open)
    buckets.push_back(std::move(entry.second));
  for (Bucket &bucket : buckets) {
    if (bucket.ops.size() < 2)
      continue;
    // After the last gradient is computed (or at the top of the block).
    Operation *after = nullptr;
    for (shard::AllReduceOp op : bucket.ops)
      if (Operation *def = op.getInput().getDefiningOp())
        if (!after || position[def] > position[after])
          after = def;
    OpBuilder b(block.getParentOp()->getContext());
    if (after)
      b.setInsertionPointAfter(after);
    else
      b.setInsertionPointToStart(&block);
    fuseBucket(bucket.ops, b);
  }
}

} // namespace loom
