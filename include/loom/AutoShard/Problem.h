//===- Problem.h - A function as a strategy-choice problem -------*- C++
//-*-===//
//
// The auto-sharding problem of one function (Alpa, Zheng et al. OSDI'22
// §4.2), in plain data: a node per op with a sharding rule (its strategies)
// and per function argument (the layouts it may be stored in), an edge per
// use with the cost of resharding between every pair of choices, and per
// choice the compute time and the bytes it keeps on a device. A returned
// value must come back in its argument's layout (loop-carried training
// state), which is one more edge. A value with several uses reaches them
// through a fan-out node, so that a conversion they all need costs once. Solved
// by an ILP (lib/Solver); the pass writes the choice back as `shard`
// annotations.
//
//===----------------------------------------------------------------------===//

#ifndef LOOM_AUTOSHARD_PROBLEM_H
#define LOOM_AUTOSHARD_PROBLEM_H

#include "loom/AutoShard/Resharding.h"
#include "loom/AutoShard/Strategies.h"
#include "loom/Solver/StrategyGraph.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "llvm/Support/Error.h"

#include <memory>
#include <vector>

namespace loom::autoshard {

/// A read-only array that nodes with the same strategies share: a model
/// with n identical layers keeps one copy of each op's strategies, not n.
template <typename T> class SharedArray {
public:
  SharedArray() : data(std::make_shared<const std::vector<T>>()) {}
  SharedArray(std::vector<T> values)
      : data(std::make_shared<const std::vector<T>>(std::move(values))) {}

  size_t size() const { return data->size(); }
  bool empty() const { return data->empty(); }
  const T &operator[](size_t i) const { return (*data)[i]; }
  const T &front() const { return data->front(); }
  const T &back() const { return data->back(); }
  typename std::vector<T>::const_iterator begin() const {
    return data->begin();
  }
  typename std::vector<T>::const_iterator end() const { return data->end(); }
  /// Whether both hold the same copy.
  bool sameAs(const SharedArray &other) const { return data == other.data; }

private:
  std::shared_ptr<const std::vector<T>> data;
};

/// A read-only rows x columns matrix, row-major, shared by the edges of
/// identical layers (and handed to the solver without a copy).
class ReshardMatrix {
public:
  ReshardMatrix() = default;
  ReshardMatrix(std::shared_ptr<const std::vector<double>> values,
                size_t columns)
      : values(std::move(values)), columns(columns) {}

  size_t size() const { return columns ? values->size() / columns : 0; }
  llvm::ArrayRef<double> operator[](size_t row) const {
    return llvm::ArrayRef<double>(*values).slice(row * columns, columns);
  }
  const std::shared_ptr<const std::vector<double>> &flat() const {
    return values;
  }

private:
  std::shared_ptr<const std::vector<double>> values;
  size_t columns = 0;
};

struct ProblemNode {
  /// The op (func.return for the node of a returned value, whose strategies
  /// are the whole layouts it may leave in, as operand 0), or null for a
  /// function argument or a fan-out.
  mlir::Operation *op = nullptr;
  /// The argument when `op` is null and this is not a fan-out.
  mlir::BlockArgument arg;
  /// A fan-out: the value with several uses whose layout on the way to them
  /// this node chooses. Its producer's edge comes in, one edge per use goes
  /// out, so that a conversion all uses need is paid once (the partitioner
  /// converts a value once per target layout), not once per use.
  mlir::Value fanoutOf;
  /// For a fan-out: the node and result that produce the value.
  int fanoutSource = -1;
  unsigned fanoutResult = 0;
  bool isArgument() const { return !op && !fanoutOf; }
  bool isFanout() const { return static_cast<bool>(fanoutOf); }
  SharedArray<Strategy> strategies;
  /// Per strategy: seconds of compute, and bytes kept on one device: an
  /// argument's own storage plus `argumentOverheadBytesPerElement`; for an
  /// op, its results the backward pass reads (defined before the loss, used
  /// after it: all live at the loss, where a step's memory peaks).
  /// Temporaries that die before the loss are not counted.
  std::vector<double> seconds, memory;
  /// The node of a representative layer this one is tied to: it takes the
  /// same strategy index (its own costs and memory still count); -1 when
  /// untied. A leader has the very same strategies.
  int leader = -1;
};

struct ProblemEdge {
  unsigned from, to;
  /// The value carried (the producer's result or argument).
  mlir::Value value;
  /// Which operand of `to` (an op node); for the loop-carried edge into an
  /// argument node, -1.
  int operand = -1;
  /// reshard[i][j]: seconds to go from the producer's strategy i to what the
  /// consumer's strategy j needs; ReshardPlan::kImpossible when no
  /// collectives get there.
  ReshardMatrix reshard;
};

struct ShardingProblem {
  std::vector<ProblemNode> nodes;
  std::vector<ProblemEdge> edges;
  /// Repeated layers found (ProblemOptions::reuseLayers), and how many of
  /// them the nodes of the others are tied to.
  int numLayers = 0;
  int numRepresentativeLayers = 0;
};

struct ProblemOptions {
  /// Bytes per element an argument keeps besides itself, e.g. gradients
  /// while they are live; 0 counts the argument alone.
  double argumentOverheadBytesPerElement = 0;
  /// Tie the ops of repeated layers to a representative layer's
  /// (lib/AutoShard/Layers.cpp), so that the ILP does not grow with depth.
  bool reuseLayers = true;
};

/// Builds the problem of `fn` (one block, no calls: inline first). Errors
/// name the op that cannot take part (an op of another dialect with tensor
/// results and no sharding rule, a call).
llvm::Expected<ShardingProblem>
buildShardingProblem(mlir::func::FuncOp fn, const DeviceMesh &mesh,
                     const cost::ClusterSpec &cluster,
                     const ProblemOptions &options);

/// A layout the user fixed for one value (a function argument or an op
/// result).
struct ShardingPin {
  mlir::Value value;
  TensorSharding sharding;
};

/// A pin no strategy meets, and why.
struct UnmetPin {
  size_t pin;
  std::string reason;
};

/// Keeps, in the node of each pinned value, only the strategies that leave
/// the value in its pinned layout (and the matching rows and columns of the
/// node's edges). A pin no strategy meets (a split that does not divide its
/// dimension, a layout the op cannot produce) leaves its node as it was and
/// is returned with the reason, so that the caller can warn and plan
/// without it.
std::vector<UnmetPin> applyPins(ShardingProblem &problem,
                                llvm::ArrayRef<ShardingPin> pins,
                                const DeviceMesh &mesh);

/// The cheapest choice of one strategy per node (ILP through CBC), within
/// `options.memoryBudget` bytes per device.
llvm::Expected<solver::StrategyPlan>
solveShardingProblem(const ShardingProblem &problem,
                     const solver::StrategyOptions &options = {});

/// The layouts an argument of `shape` may take on `mesh`: each axis splits
/// one dimension (that it divides, after the other axes) or none. The
/// replicated layout comes first.
std::vector<TensorSharding> argumentShardings(llvm::ArrayRef<int64_t> shape,
                                              const DeviceMesh &mesh);

} // namespace loom::autoshard

#endif // LOOM_AUTOSHARD_PROBLEM_H
