//===- Problem.cpp - A function as a strategy-choice problem --------------===//

#include "loom/AutoShard/Problem.h"

#include "dialects/Loom/LoomOps.h"

#include "mlir/IR/BuiltinTypes.h"
#include "llvm/ADT/DenseMap.h"
#include "llvm/Support/FormatVariadic.h"

#include <functional>

using namespace mlir;

namespace loom::autoshard {
namespace {

llvm::ArrayRef<int64_t> shapeOf(Value value) {
  if (auto type = dyn_cast<RankedTensorType>(value.getType()))
    return type.getShape();
  return {};
}

llvm::Error opError(Operation *op, const llvm::Twine &message) {
  std::string location;
  llvm::raw_string_ostream os(location);
  op->getLoc().print(os);
  return llvm::createStringError(llvm::formatv(
      "{0}: '{1}' {2}", location, op->getName().getStringRef(), message.str()));
}

/// The argument a returned value carries over to the next step: same
/// `loom.role` (param, m or v) and `loom.name`, as --loom-optimizer marks
/// @train_step.
int loopCarriedArgument(func::FuncOp fn, unsigned result) {
  auto role = fn.getResultAttrOfType<StringAttr>(result, kRoleAttr);
  auto name = fn.getResultAttrOfType<StringAttr>(result, kNameAttr);
  if (!role || !name || role.getValue() == "loss")
    return -1;
  for (unsigned i = 0; i < fn.getNumArguments(); ++i)
    if (fn.getArgAttrOfType<StringAttr>(i, kRoleAttr) == role &&
        fn.getArgAttrOfType<StringAttr>(i, kNameAttr) == name)
      return i;
  return -1;
}

/// Keeps the strategies of node `index` where `keep` is true, and the
/// matching rows and columns of its edges' resharding costs.
void keepStrategies(ShardingProblem &problem, unsigned index,
                    llvm::ArrayRef<bool> keep) {
  auto filter = [&](auto &items) {
    size_t kept = 0;
    for (size_t i = 0; i < items.size(); ++i) {
      if (!keep[i])
        continue;
      // Self-move-assignment would empty a vector.
      if (kept != i)
        items[kept] = std::move(items[i]);
      ++kept;
    }
    items.resize(kept);
  };
  ProblemNode &node = problem.nodes[index];
  filter(node.strategies);
  filter(node.seconds);
  filter(node.memory);
  for (ProblemEdge &edge : problem.edges) {
    if (edge.from == index)
      filter(edge.reshard);
    if (edge.to == index)
      for (std::vector<double> &row : edge.reshard)
        filter(row);
  }
}

/// Why `sharding` cannot lay out a tensor of `shape`, or "" if it can.
std::string indivisibility(const TensorSharding &sharding,
                           llvm::ArrayRef<int64_t> shape,
                           const DeviceMesh &mesh) {
  for (auto [dim, axes] : llvm::enumerate(sharding.dimAxes)) {
    int64_t devices = 1;
    for (int64_t axis : axes)
      devices *= mesh.shape[axis];
    if (shape[dim] % devices != 0)
      return llvm::formatv("dimension {0} of size {1} does not divide over "
                           "{2} devices",
                           dim, shape[dim], devices);
  }
  return "";
}

} // namespace

std::vector<TensorSharding> argumentShardings(llvm::ArrayRef<int64_t> shape,
                                              const DeviceMesh &mesh) {
  std::vector<TensorSharding> shardings;
  TensorSharding current = TensorSharding::replicated(shape.size());
  std::function<void(int64_t)> assign = [&](int64_t axis) {
    if (axis == mesh.numAxes()) {
      if (current.divides(shape, mesh))
        shardings.push_back(current);
      return;
    }
    assign(axis + 1);
    if (mesh.shape[axis] == 1)
      return;
    for (size_t dim = 0; dim < shape.size(); ++dim) {
      current.dimAxes[dim].push_back(axis);
      assign(axis + 1);
      current.dimAxes[dim].pop_back();
    }
  };
  assign(0);
  return shardings;
}

llvm::Expected<ShardingProblem>
buildShardingProblem(func::FuncOp fn, const DeviceMesh &mesh,
                     const cost::ClusterSpec &cluster,
                     const ProblemOptions &options) {
  if (!fn.getBody().hasOneBlock())
    return opError(fn, "must have one block");
  ShardingProblem problem;
  /// Node and result index of each value.
  llvm::DenseMap<Value, std::pair<unsigned, unsigned>> producer;

  for (BlockArgument arg : fn.getArguments()) {
    ProblemNode &node = problem.nodes.emplace_back();
    node.arg = arg;
    double perElement = cost::elementBytes(arg.getType()) +
                        options.argumentOverheadBytesPerElement;
    for (TensorSharding &sharding : argumentShardings(shapeOf(arg), mesh)) {
      Strategy strategy;
      strategy.localShapes.results.push_back(
          sharding.localShape(shapeOf(arg), mesh));
      node.memory.push_back(
          cost::numElements(strategy.localShapes.results.back()) * perElement);
      node.seconds.push_back(0);
      strategy.results.push_back(std::move(sharding));
      node.strategies.push_back(std::move(strategy));
    }
    producer[arg] = {problem.nodes.size() - 1, 0};
  }

  auto addEdge = [&](Value value, unsigned to, int operand,
                     auto &&requiredSharding) {
    auto [from, result] = producer.lookup(value);
    ProblemEdge edge{from, to, value, operand, {}};
    const ProblemNode &source = problem.nodes[from];
    const ProblemNode &target = problem.nodes[to];
    for (const Strategy &produced : source.strategies) {
      std::vector<double> &row = edge.reshard.emplace_back();
      for (const Strategy &consumed : target.strategies)
        row.push_back(planResharding(produced.results[result],
                                     requiredSharding(consumed), shapeOf(value),
                                     cost::elementBytes(value.getType()), mesh,
                                     cluster)
                          .cost());
    }
    problem.edges.push_back(std::move(edge));
  };

  for (Operation &op : fn.getBody().front()) {
    if (auto ret = dyn_cast<func::ReturnOp>(op)) {
      for (auto [index, value] : llvm::enumerate(ret.getOperands())) {
        // Loop-carried state returns in its argument's layout; any other
        // result in some layout of a whole (not partial) value.
        int target = loopCarriedArgument(fn, index);
        if (target < 0) {
          ProblemNode &node = problem.nodes.emplace_back();
          node.op = &op;
          for (TensorSharding &sharding :
               argumentShardings(shapeOf(value), mesh)) {
            Strategy strategy;
            strategy.operands.push_back(std::move(sharding));
            node.strategies.push_back(std::move(strategy));
            node.seconds.push_back(0);
            node.memory.push_back(0);
          }
          target = problem.nodes.size() - 1;
          addEdge(value, target, index, [](const Strategy &s) -> const auto & {
            return s.operands[0];
          });
          continue;
        }
        addEdge(value, target, -1,
                [](const Strategy &s) -> const auto & { return s.results[0]; });
      }
      continue;
    }
    if (isa<func::CallOp>(op))
      return opError(&op, "is a call: inline the function first (--inline)");
    ProblemNode &node = problem.nodes.emplace_back();
    node.op = &op;
    if (auto ruled = dyn_cast<ShardingRuleOpInterface>(op)) {
      OpShardingRule rule = ruled.getShardingRule();
      node.strategies = enumerateStrategies(&op, rule, mesh, cluster.device);
    } else if (op.hasTrait<OpTrait::ConstantLike>() &&
               op.getNumOperands() == 0) {
      Strategy replicated;
      for (Value result : op.getResults())
        replicated.results.push_back(
            TensorSharding::replicated(shapeOf(result).size()));
      node.strategies.push_back(std::move(replicated));
    } else {
      return opError(&op, "has no sharding rule");
    }
    for (const Strategy &strategy : node.strategies) {
      node.seconds.push_back(strategy.computeSeconds);
      node.memory.push_back(0);
    }
    unsigned index = problem.nodes.size() - 1;
    for (OpOperand &use : op.getOpOperands()) {
      unsigned operand = use.getOperandNumber();
      addEdge(use.get(), index, operand,
              [&](const Strategy &s) -> const auto & {
                return s.operands[operand];
              });
    }
    for (auto [result, value] : llvm::enumerate(op.getResults()))
      producer[value] = {index, result};
  }
  return problem;
}

std::vector<UnmetPin> applyPins(ShardingProblem &problem,
                                llvm::ArrayRef<ShardingPin> pins,
                                const DeviceMesh &mesh) {
  std::vector<UnmetPin> unmet;
  for (auto [index, pin] : llvm::enumerate(pins)) {
    // A size-1 mesh axis splits nothing, and strategies never name one.
    TensorSharding wanted = pin.sharding;
    for (auto &axes : wanted.dimAxes)
      llvm::erase_if(axes, [&](int64_t axis) { return mesh.shape[axis] == 1; });
    std::string reason = indivisibility(wanted, shapeOf(pin.value), mesh);
    if (!reason.empty()) {
      unmet.push_back({index, reason});
      continue;
    }
    auto result = dyn_cast<OpResult>(pin.value);
    auto node = llvm::find_if(problem.nodes, [&](const ProblemNode &node) {
      return result ? node.op == result.getOwner()
                    : (!node.op && node.arg == pin.value);
    });
    if (node == problem.nodes.end()) {
      unmet.push_back({index, "the value is not part of the problem"});
      continue;
    }
    unsigned resultNumber = result ? result.getResultNumber() : 0;
    llvm::SmallVector<bool> keep;
    for (const Strategy &strategy : node->strategies)
      keep.push_back(strategy.results[resultNumber] == wanted);
    if (llvm::none_of(keep, [](bool kept) { return kept; })) {
      unmet.push_back(
          {index,
           result ? llvm::formatv("'{0}' has no strategy that leaves "
                                  "result {1} in this layout",
                                  result.getOwner()->getName(), resultNumber)
                        .str()
                  : "an argument cannot take this layout"});
      continue;
    }
    keepStrategies(problem, node - problem.nodes.begin(), keep);
  }
  return unmet;
}

llvm::Expected<solver::StrategyPlan>
solveShardingProblem(const ShardingProblem &problem,
                     const solver::StrategyOptions &options) {
  solver::StrategyGraph graph;
  for (const ProblemNode &node : problem.nodes) {
    std::string name;
    if (node.op)
      name = node.op->getName().getStringRef().str();
    else
      name = "arg" + std::to_string(node.arg.getArgNumber());
    graph.addNode(name, node.seconds, node.memory);
  }
  for (const ProblemEdge &edge : problem.edges) {
    std::vector<double> matrix;
    for (const std::vector<double> &row : edge.reshard)
      llvm::append_range(matrix, row);
    graph.addEdge(edge.from, edge.to, std::move(matrix));
  }
  return solver::solveStrategyGraph(graph, options);
}

} // namespace loom::autoshard
