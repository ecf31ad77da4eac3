//===- MultiRank.cpp - The reference interpreter on N ranks ---------------===//
//
// runRanks starts one thread per rank, each running the shared driver with
// a RankOps hook that gives the shard ops their meaning on that rank. The
// collectives meet in a Rendezvous; each rank then computes its own result
// from the inputs of its group, in member order, so that the arithmetic is
// the same whatever the threads' timing. Each rank thread also carries its
// position in the grid (DevicePosition.h) for the kernels whose values
// depend on it.
//
//===----------------------------------------------------------------------===//

#include "loom/Interpreter/MultiRank.h"

#include "DevicePosition.h"
#include "Driver.h"
#include "Rendezvous.h"
#include "ShardLayout.h"

#include "mlir/Dialect/Shard/IR/ShardDialect.h"
#include "mlir/IR/Builders.h"
#include "mlir/IR/BuiltinOps.h"
#include "mlir/IR/SymbolTable.h"
#include "llvm/ADT/TypeSwitch.h"

#include <cassert>
#include <cmath>
#include <thread>

using namespace mlir;

namespace loom::interp {
namespace {

/// The members of a collective's group, in member order, and the position
/// of the running rank among them.
struct Group {
  llvm::SmallVector<int64_t> members;
  int64_t index = 0;
  int64_t size() const { return static_cast<int64_t>(members.size()); }
};

/// Runs the shard ops of one rank.
class RankOps : public OpHook {
public:
  RankOps(shard::GridOp grid, Rendezvous &rendezvous, int64_t rank,
          Precision precision)
      : grid(grid), gridShape(grid.getShape()), rendezvous(rendezvous),
        rank(rank), multiIndex(gridMultiIndex(gridShape, rank)),
        precision(precision) {}

  bool handles(Operation *op) const override {
    return isa<shard::ShardDialect>(op->getDialect());
  }
  llvm::Expected<Results> run(Operation *op, Operands operands) override;

private:
  /// The group of this rank for `axes`.
  llvm::Expected<Group> groupOf(Operation *op, ArrayRef<int16_t> axes) const;
  /// The rank at in-group multi-index `position` (a root, a source, a
  /// destination) of the group for `axes`.
  llvm::Expected<int64_t> memberAt(Operation *op, ArrayRef<int16_t> axes,
                                   ArrayRef<int64_t> position) const;
  /// Deposits `input` at the collective `op` and checks that every member
  /// of `group` brought a tensor like this rank's.
  llvm::Expected<const std::vector<Contribution> *>
  exchange(Operation *op, const Tensor &input, const Group &group,
           bool sameShapes = true);
  /// The element-wise reduction of the group's inputs, in member order, in
  /// the result's element type.
  llvm::Expected<Tensor> reduce(Operation *op,
                                const std::vector<Contribution> &inputs,
                                const Group &group, shard::ReductionKind kind);

  llvm::Expected<Results> runCollective(Operation *op, Operands operands);

  shard::GridOp grid;
  ArrayRef<int64_t> gridShape;
  Rendezvous &rendezvous;
  int64_t rank;
  llvm::SmallVector<int64_t> multiIndex;
  Precision precision;
};

} // namespace

/// The values of a static list with dynamic entries (`root`, `source`,
/// `destination`): the dynamic ones are `dynamic`'s index scalars in order.
static llvm::SmallVector<int64_t> mixedValues(ArrayRef<int64_t> staticValues,
                                              Operands dynamic) {
  llvm::SmallVector<int64_t> values;
  size_t next = 0;
  for (int64_t v : staticValues) {
    // The verifier checks one operand per dynamic entry.
    assert((!ShapedType::isDynamic(v) || next < dynamic.size()) &&
           "one operand per dynamic entry");
    values.push_back(ShapedType::isDynamic(v) ? scalarInt(*dynamic[next++])
                                              : v);
  }
  return values;
}

/// An `index` result.
static Tensor indexValue(MLIRContext *context, int64_t value) {
  return Tensor::ints(IndexType::get(context), {}, {value});
}

llvm::Expected<Group> RankOps::groupOf(Operation *op,
                                       ArrayRef<int16_t> axes) const {
  llvm::SmallVector<int64_t> sizes;
  for (int16_t axis : axes) {
    if (axis < 0 || axis >= static_cast<int64_t>(gridShape.size()))
      return opError(op, "names grid axis " + llvm::Twine(axis) + " of a " +
                             llvm::Twine(gridShape.size()) + "-d grid");
    sizes.push_back(gridShape[axis]);
  }
  Group group;
  llvm::SmallVector<int64_t> coords;
  for (int16_t axis : axes)
    coords.push_back(multiIndex[axis]);
  group.index = linearIndexOf(sizes, coords);
  for (int64_t k = 0, n = numElementsOf(sizes); k < n; ++k) {
    llvm::SmallVector<int64_t> member = multiIndex;
    for (auto [axis, coord] : llvm::zip(axes, gridMultiIndex(sizes, k)))
      member[axis] = coord;
    group.members.push_back(linearIndexOf(gridShape, member));
  }
  return group;
}

llvm::Expected<int64_t> RankOps::memberAt(Operation *op, ArrayRef<int16_t> axes,
                                          ArrayRef<int64_t> position) const {
  if (position.size() != axes.size())
    return opError(op, "names a device by " + llvm::Twine(position.size()) +
                           " coordinates in a group of " +
                           llvm::Twine(axes.size()) + " grid axes");
  llvm::SmallVector<int64_t> member = multiIndex;
  for (auto [axis, coord] : llvm::zip(axes, position)) {
    if (coord < 0 || coord >= gridShape[axis])
      return opError(op, "names device coordinate " + llvm::Twine(coord) +
                             " on grid axis " + llvm::Twine(axis) +
                             " of size " + llvm::Twine(gridShape[axis]));
    member[axis] = coord;
  }
  return linearIndexOf(gridShape, member);
}

llvm::Expected<const std::vector<Contribution> *>
RankOps::exchange(Operation *op, const Tensor &input, const Group &group,
                  bool sameShapes) {
  llvm::Expected<const std::vector<Contribution> *> all =
      rendezvous.exchange(rank, op, input);
  if (!all)
    return all.takeError();
  for (int64_t r = 0; r < static_cast<int64_t>((*all)->size()); ++r)
    if ((**all)[r].op != op)
      return opError(op, "is met by rank " + llvm::Twine(r) + " at " +
                             llvm::toString(opError((**all)[r].op, "")));
  if (!sameShapes)
    return all;
  for (int64_t member : group.members) {
    const Tensor &other = (**all)[member].input;
    if (other.shape() != input.shape() || other.isFloat() != input.isFloat())
      return opError(op, "gets a " + shapeString(other.shape()) +
                             " input from rank " + llvm::Twine(member) +
                             " and a " + shapeString(input.shape()) +
                             " one from rank " + llvm::Twine(rank));
  }
  return all;
}

/// Folds `x` into the running reduction `acc`.
template <typename T> static T combine(shard::ReductionKind kind, T acc, T x) {
  switch (kind) {
  case shard::ReductionKind::Max:
    if constexpr (std::is_floating_point_v<T>)
      if (std::isnan(x))
        return x;
    return std::max(acc, x);
  case shard::ReductionKind::Min:
    if constexpr (std::is_floating_point_v<T>)
      if (std::isnan(x))
        return x;
    return std::min(acc, x);
  case shard::ReductionKind::Product:
    return acc * x;
  default:
    if constexpr (std::is_integral_v<T>) {
      if (kind == shard::ReductionKind::BitwiseAnd)
        return acc & x;
      if (kind == shard::ReductionKind::BitwiseOr)
        return acc | x;
      if (kind == shard::ReductionKind::BitwiseXor)
        return acc ^ x;
    }
    return acc + x; // Sum and Average
  }
}

llvm::Expected<Tensor> RankOps::reduce(Operation *op,
                                       const std::vector<Contribution> &inputs,
                                       const Group &group,
                                       shard::ReductionKind kind) {
  Type resultType = elementTypeOf(op->getResult(0));
  const Tensor &mine = inputs[rank].input;
  bool bitwise = kind == shard::ReductionKind::BitwiseAnd ||
                 kind == shard::ReductionKind::BitwiseOr ||
                 kind == shard::ReductionKind::BitwiseXor;
  if (kind == shard::ReductionKind::Generic)
    return opError(op, "has a generic reduction, which the interpreter "
                       "does not run");
  if (isa<FloatType>(resultType)) {
    if (bitwise)
      return opError(op, "reduces floats bitwise");
    // Each input is converted to the result's element type first.
    auto converted = [&](int64_t member) {
      const Tensor &t = inputs[member].input;
      std::vector<double> values =
          t.isFloat() ? t.f() : std::vector<double>(t.i().begin(), t.i().end());
      if (precision == Precision::F32)
        for (double &v : values)
          v = roundToElementType(v, resultType);
      return values;
    };
    std::vector<double> acc = converted(group.members.front());
    for (int64_t member : llvm::drop_begin(group.members)) {
      std::vector<double> x = converted(member);
      for (size_t e = 0; e < acc.size(); ++e)
        acc[e] = combine(kind, acc[e], x[e]);
    }
    if (kind == shard::ReductionKind::Average)
      for (double &v : acc)
        v /= static_cast<double>(group.size());
    return Tensor::floats(resultType, mine.shape(), std::move(acc));
  }
  if (mine.isFloat())
    return opError(op, "reduces floats into integers");
  if (kind == shard::ReductionKind::Average)
    return opError(op, "averages integers");
  std::vector<int64_t> acc = inputs[group.members.front()].input.i();
  for (int64_t member : llvm::drop_begin(group.members)) {
    const std::vector<int64_t> &x = inputs[member].input.i();
    for (size_t e = 0; e < acc.size(); ++e)
      acc[e] = combine(kind, acc[e], x[e]);
  }
  return Tensor::ints(resultType, mine.shape(), std::move(acc));
}

/// Checks that `dim` of `t` splits into `pieces` pieces.
static llvm::Error checkSplits(Operation *op, const Tensor &t, int64_t dim,
                               int64_t pieces) {
  if (dim < 0 || dim >= t.rank() || t.shape()[dim] % pieces != 0)
    return opError(op, "cannot split dimension " + llvm::Twine(dim) + " of a " +
                           shapeString(t.shape()) + " tensor into " +
                           llvm::Twine(pieces) + " pieces");
  return llvm::Error::success();
}

llvm::Expected<Results> RankOps::runCollective(Operation *op,
                                               Operands operands) {
  auto axesAttr = op->getAttrOfType<shard::GridAxesAttr>("grid_axes");
  ArrayRef<int16_t> axes =
      axesAttr ? axesAttr.asArrayRef() : ArrayRef<int16_t>();
  llvm::Expected<Group> group = groupOf(op, axes);
  if (!group)
    return group.takeError();
  const Tensor &input = *operands.front();
  Operands dynamic = operands.drop_front();
  using Result = llvm::Expected<Tensor>;
  // Runs the collective: deposits the input, then `compute(all inputs)`.
  auto collective = [&](auto compute, bool sameShapes = true) -> Result {
    auto all = exchange(op, input, *group, sameShapes);
    if (!all)
      return all.takeError();
    return compute(**all);
  };
  auto inputsOf = [&](const std::vector<Contribution> &all) {
    llvm::SmallVector<const Tensor *> parts;
    for (int64_t member : group->members)
      parts.push_back(&all[member].input);
    return parts;
  };
  Result result =
      llvm::TypeSwitch<Operation *, Result>(op)
          .Case([&](shard::AllReduceOp reduceOp) {
            return collective([&](const std::vector<Contribution> &all) {
              return reduce(op, all, *group, reduceOp.getReduction());
            });
          })
          .Case([&](shard::ReduceOp reduceOp) {
            return collective([&](const std::vector<Contribution> &all) {
              return reduce(op, all, *group, reduceOp.getReduction());
            });
          })
          .Case([&](shard::ReduceScatterOp scatterOp) -> Result {
            int64_t axis = scatterOp.getScatterAxis().getSExtValue();
            if (llvm::Error error = checkSplits(op, input, axis, group->size()))
              return std::move(error);
            return collective([&](const std::vector<Contribution> &all) {
              Result reduced =
                  reduce(op, all, *group, scatterOp.getReduction());
              if (!reduced)
                return reduced;
              return Result(
                  pieceAlong(*reduced, axis, group->size(), group->index));
            });
          })
          .Case<shard::AllGatherOp, shard::GatherOp>([&](auto gatherOp) {
            int64_t axis = gatherOp.getGatherAxis().getSExtValue();
            return collective([&](const std::vector<Contribution> &all) {
              return Result(concatAlong(inputsOf(all), axis));
            });
          })
          .Case([&](shard::AllToAllOp allToAll) -> Result {
            int64_t split = allToAll.getSplitAxis().getSExtValue();
            int64_t concat = allToAll.getConcatAxis().getSExtValue();
            if (llvm::Error error =
                    checkSplits(op, input, split, group->size()))
              return std::move(error);
            return collective([&](const std::vector<Contribution> &all) {
              std::vector<Tensor> pieces;
              for (const Tensor *part : inputsOf(all))
                pieces.push_back(
                    pieceAlong(*part, split, group->size(), group->index));
              llvm::SmallVector<const Tensor *> parts;
              for (const Tensor &piece : pieces)
                parts.push_back(&piece);
              return Result(concatAlong(parts, concat));
            });
          })
          .Case([&](shard::AllSliceOp slice) -> Result {
            // Local: no rank waits for another.
            int64_t axis = slice.getSliceAxis().getSExtValue();
            if (llvm::Error error = checkSplits(op, input, axis, group->size()))
              return std::move(error);
            return pieceAlong(input, axis, group->size(), group->index);
          })
          .Case([&](shard::BroadcastOp broadcast) -> Result {
            llvm::Expected<int64_t> root =
                memberAt(op, axes, mixedValues(broadcast.getRoot(), dynamic));
            if (!root)
              return root.takeError();
            return collective([&](const std::vector<Contribution> &all) {
              return Result(all[*root].input);
            });
          })
          .Case([&](shard::ScatterOp scatter) -> Result {
            llvm::Expected<int64_t> root =
                memberAt(op, axes, mixedValues(scatter.getRoot(), dynamic));
            if (!root)
              return root.takeError();
            int64_t axis = scatter.getScatterAxis().getSExtValue();
            return collective(
                [&](const std::vector<Contribution> &all) -> Result {
                  const Tensor &whole = all[*root].input;
                  if (llvm::Error error =
                          checkSplits(op, whole, axis, group->size()))
                    return std::move(error);
                  return pieceAlong(whole, axis, group->size(), group->index);
                },
                /*sameShapes=*/false);
          })
          .Case([&](shard::SendOp send) -> Result {
            llvm::Expected<int64_t> to =
                memberAt(op, axes, mixedValues(send.getDestination(), dynamic));
            if (!to)
              return to.takeError();
            rendezvous.send(rank, *to, input);
            return input;
          })
          .Case([&](shard::RecvOp recv) -> Result {
            if (!recv.getSource())
              return opError(op, "has no source; the interpreter receives "
                                 "from a named device only");
            llvm::Expected<int64_t> from =
                memberAt(op, axes, mixedValues(*recv.getSource(), dynamic));
            if (!from)
              return from.takeError();
            return rendezvous.receive(rank, *from, op);
          })
          .Default([&](Operation *) {
            return opError(op, "is not supported by the multi-rank "
                               "interpreter");
          });
  if (!result)
    return result.takeError();
  auto type = cast<RankedTensorType>(op->getResult(0).getType());
  if (result->shape() != type.getShape() ||
      result->isFloat() != isa<FloatType>(type.getElementType()))
    return opError(op, "computes a " + shapeString(result->shape()) +
                           " result on rank " + llvm::Twine(rank) +
                           " where the op declares " +
                           shapeString(type.getShape()));
  return Results{std::move(*result)};
}

llvm::Expected<Results> RankOps::run(Operation *op, Operands operands) {
  auto gridRef = op->getAttrOfType<FlatSymbolRefAttr>("grid");
  if (gridRef && gridRef.getValue() != grid.getSymName())
    return opError(op, "runs on @" + gridRef.getValue() +
                           " but the ranks form @" + grid.getSymName());
  MLIRContext *context = op->getContext();
  auto axisValues = [&](ArrayRef<int16_t> axes, auto valueOf) {
    Results results;
    if (axes.empty())
      for (int64_t axis = 0; axis < static_cast<int64_t>(gridShape.size());
           ++axis)
        results.push_back(indexValue(context, valueOf(axis)));
    for (int16_t axis : axes)
      results.push_back(indexValue(context, valueOf(axis)));
    return results;
  };
  if (auto index = dyn_cast<shard::ProcessMultiIndexOp>(op))
    return axisValues(index.getAxes(),
                      [&](int64_t axis) { return multiIndex[axis]; });
  if (auto shape = dyn_cast<shard::GridShapeOp>(op))
    return axisValues(shape.getAxes(),
                      [&](int64_t axis) { return gridShape[axis]; });
  if (isa<shard::ProcessLinearIndexOp>(op))
    return Results{indexValue(context, rank)};
  if (op->getNumResults() != 1 || operands.empty() ||
      !isa<RankedTensorType>(op->getResult(0).getType()))
    return opError(op, "is not supported by the multi-rank interpreter");
  return runCollective(op, operands);
}

//===----------------------------------------------------------------------===//
// runRanks
//===----------------------------------------------------------------------===//

llvm::Expected<std::vector<std::vector<Tensor>>>
runRanks(func::FuncOp fn, shard::GridOp grid,
         ArrayRef<std::vector<Tensor>> argsPerRank, Precision precision) {
  if (llvm::any_of(grid.getShape(), ShapedType::isDynamic))
    return llvm::createStringError("@" + grid.getSymName() +
                                   " has a dynamic shape; the interpreter "
                                   "runs a static grid");
  int64_t numRanks = numElementsOf(grid.getShape());
  if (static_cast<int64_t>(argsPerRank.size()) != numRanks)
    return llvm::createStringError(
        "@" + grid.getSymName() + " has " + llvm::Twine(numRanks) +
        " devices, got arguments for " + llvm::Twine(argsPerRank.size()));
  // Verified once here: the threads only read the IR.
  Operation *scope = fn->getParentOfType<ModuleOp>();
  if (llvm::Error error = verifyForInterpreter(scope ? scope : fn))
    return std::move(error);

  Rendezvous rendezvous(numRanks);
  std::vector<std::vector<Tensor>> results(numRanks);
  std::vector<std::thread> threads;
  int64_t microBatch = currentMicroBatch();
  for (int64_t rank = 0; rank < numRanks; ++rank)
    threads.emplace_back([&, rank] {
      // The dropout kernels draw masks by global index from these.
      DevicePosition position{grid.getSymName(), grid.getShape(), rank};
      ScopedDevicePosition scope(position);
      ScopedMicroBatch micro(microBatch);
      RankOps ops(grid, rendezvous, rank, precision);
      DriverOptions options;
      options.precision = precision;
      options.hook = &ops;
      options.verify = false;
      llvm::Expected<std::vector<Tensor>> mine =
          runFunction(fn, argsPerRank[rank], options);
      if (mine)
        results[rank] = std::move(*mine);
      else
        rendezvous.fail(rank, llvm::toString(mine.takeError()));
      rendezvous.finish(rank);
    });
  for (std::thread &thread : threads)
    thread.join();
  if (std::optional<std::string> failure = rendezvous.failure())
    return llvm::createStringError(*failure);
  return results;
}

} // namespace loom::interp
