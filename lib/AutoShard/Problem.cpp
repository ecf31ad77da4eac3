//===- Problem.cpp - A function as a strategy-choice problem --------------===//

#include "loom/AutoShard/Problem.h"

#include "StrategyCache.h"

#include "loom/AutoShard/Layers.h"

#include "dialects/Loom/LoomOps.h"

#include "mlir/IR/BuiltinTypes.h"
#include "llvm/ADT/DenseMap.h"
#include "llvm/ADT/DenseSet.h"
#include "llvm/Support/FormatVariadic.h"

#include <functional>
#include <limits>

using namespace mlir;

namespace loom::autoshard {
namespace {

llvm::Error opError(Operation *op, const llvm::Twine &message) {
  std::string location;
  llvm::raw_string_ostream os(location);
  op->getLoc().print(os);
  return llvm::createStringError(llvm::formatv(
      "{0}: '{1}' {2}", location, op->getName().getStringRef(), message.str()));
}

/// The argument each returned value carries over to the next step (-1:
/// none): same `loom.role` (param, m or v) and `loom.name`, as
/// --loom-optimizer marks @train_step. One pass over each list, so that a
/// deep model's thousands of results cost no quadratic search.
std::vector<int> loopCarriedArguments(func::FuncOp fn) {
  llvm::DenseMap<std::pair<Attribute, Attribute>, int> argumentOf;
  for (unsigned i = 0; i < fn.getNumArguments(); ++i)
    argumentOf.try_emplace({fn.getArgAttrOfType<StringAttr>(i, kRoleAttr),
                            fn.getArgAttrOfType<StringAttr>(i, kNameAttr)},
                           i);
  std::vector<int> targets(fn.getNumResults(), -1);
  for (unsigned result = 0; result < fn.getNumResults(); ++result) {
    auto role = fn.getResultAttrOfType<StringAttr>(result, kRoleAttr);
    auto name = fn.getResultAttrOfType<StringAttr>(result, kNameAttr);
    if (role && name && role.getValue() != "loss")
      targets[result] = argumentOf.lookup_or({role, name}, -1);
  }
  return targets;
}

/// The values the backward pass reads from the forward pass: defined
/// before the loss and used after it, live together at the loss, where a
/// training step's memory peaks. The loss is the returned value marked
/// `loom.role = "loss"` (@train_step), or else a returned 0-d float
/// (@forward_backward's first result). Empty without a loss.
llvm::DenseSet<Value> savedActivations(func::FuncOp fn) {
  llvm::DenseSet<Value> saved;
  auto ret = cast<func::ReturnOp>(fn.getBody().front().getTerminator());
  Value loss;
  for (auto [index, value] : llvm::enumerate(ret.getOperands())) {
    auto role = fn.getResultAttrOfType<StringAttr>(index, kRoleAttr);
    auto type = dyn_cast<RankedTensorType>(value.getType());
    if ((role && role.getValue() == "loss") ||
        (!role && !loss && type && type.getRank() == 0 &&
         isa<FloatType>(type.getElementType())))
      loss = value;
  }
  Operation *lossOp = loss ? loss.getDefiningOp() : nullptr;
  if (!lossOp)
    return saved;
  llvm::DenseMap<Operation *, int64_t> position;
  int64_t index = 0;
  for (Operation &op : fn.getBody().front())
    position[&op] = index++;
  int64_t at = position[lossOp];
  for (Operation &op : fn.getBody().front()) {
    if (position[&op] >= at)
      break;
    for (Value result : op.getResults())
      if (isa<RankedTensorType>(result.getType()) &&
          llvm::any_of(result.getUsers(),
                       [&](Operation *user) { return position[user] > at; }))
        saved.insert(result);
  }
  return saved;
}

/// Ties the nodes of repeated layers to their representative's
/// (lib/AutoShard/Layers.cpp). A node is tied only when it holds the very
/// same strategies as its leader, so that strategy i means the same layout
/// at both.
void tieLayers(ShardingProblem &problem, func::FuncOp fn,
               const llvm::DenseMap<Operation *, unsigned> &nodeOf) {
  LayerTies ties = findRepeatedLayers(fn);
  problem.numLayers = ties.numLayers;
  problem.numRepresentativeLayers = ties.numRepresentatives;
  auto tie = [&](unsigned follower, unsigned leader) {
    ProblemNode &node = problem.nodes[follower];
    if (node.strategies.sameAs(problem.nodes[leader].strategies))
      node.leader = leader;
  };
  for (auto [member, leader] : ties.arguments)
    tie(member, leader); // argument nodes come first, in order
  for (auto [member, leader] : ties.ops) {
    auto follower = nodeOf.find(member), representative = nodeOf.find(leader);
    if (follower != nodeOf.end() && representative != nodeOf.end())
      tie(follower->second, representative->second);
  }
}

/// Forbids the strategies of node `index` where `keep` is false (an
/// infinite cost: the strategy sets are shared between nodes, and a tied
/// node's costs count for its whole group, so a pin on one layer holds for
/// every layer tied to it).
void keepStrategies(ShardingProblem &problem, unsigned index,
                    llvm::ArrayRef<bool> keep) {
  ProblemNode &node = problem.nodes[index];
  for (auto [i, kept] : llvm::enumerate(keep))
    if (!kept)
      node.seconds[i] = std::numeric_limits<double>::infinity();
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
  // Ops with the same strategies (every layer of a transformer) share one
  // copy of them and of the matrices between them.
  StrategyCache cache(mesh, cluster, options);
  std::vector<int> setOf; // node -> strategy set
  auto addNode = [&](int set) -> ProblemNode & {
    setOf.push_back(set);
    ProblemNode &node = problem.nodes.emplace_back();
    node.strategies = cache.set(set).strategies;
    node.seconds = cache.set(set).seconds;
    node.memory = cache.set(set).memory;
    return node;
  };
  /// Node and result index of each value.
  llvm::DenseMap<Value, std::pair<unsigned, unsigned>> producer;

  for (BlockArgument arg : fn.getArguments()) {
    addNode(cache.ofArgument(arg.getType())).arg = arg;
    producer[arg] = {problem.nodes.size() - 1, 0};
  }

  auto addEdge = [&](Value value, unsigned to, int operand,
                     int requiredOperand) {
    auto [from, result] = producer.lookup(value);
    problem.edges.push_back(
        {from, to, value, operand,
         cache.matrix(setOf[from], result, setOf[to], requiredOperand)});
  };
  // A tensor with several uses reaches them through its fan-out node, made
  // at the first use.
  llvm::DenseMap<Value, unsigned> fanoutOf;
  auto addUse = [&](Value value, unsigned to, int operand,
                    int requiredOperand) {
    if (!isa<RankedTensorType>(value.getType()) || value.hasOneUse()) {
      addEdge(value, to, operand, requiredOperand);
      return;
    }
    auto [it, inserted] = fanoutOf.try_emplace(value, 0);
    if (inserted) {
      auto [from, result] = producer.lookup(value);
      ProblemNode &node = addNode(cache.ofFanout(value.getType()));
      node.fanoutOf = value;
      node.fanoutSource = from;
      node.fanoutResult = result;
      it->second = problem.nodes.size() - 1;
      addEdge(value, it->second, 0, 0);
    }
    problem.edges.push_back(
        {it->second, to, value, operand,
         cache.matrix(setOf[it->second], 0, setOf[to], requiredOperand)});
  };

  llvm::DenseMap<Operation *, unsigned> nodeOf;
  std::vector<int> loopCarried = loopCarriedArguments(fn);
  llvm::DenseSet<Value> saved = savedActivations(fn);
  for (Operation &op : fn.getBody().front()) {
    if (auto ret = dyn_cast<func::ReturnOp>(op)) {
      for (auto [index, value] : llvm::enumerate(ret.getOperands())) {
        // Loop-carried state returns in its argument's layout; any other
        // result in some layout of a whole (not partial) value.
        int target = loopCarried[index];
        if (target < 0) {
          addNode(cache.ofReturned(value.getType())).op = &op;
          addUse(value, problem.nodes.size() - 1, index,
                 /*requiredOperand=*/0);
          continue;
        }
        addUse(value, target, -1, /*requiredOperand=*/-1);
      }
      continue;
    }
    if (isa<func::CallOp>(op))
      return opError(&op, "is a call: inline the function first (--inline)");
    int set = cache.ofOp(&op);
    if (set < 0)
      return opError(&op, "has no sharding rule");
    ProblemNode &node = addNode(set);
    node.op = &op;
    unsigned index = problem.nodes.size() - 1;
    // What each strategy keeps of the results the backward pass reads.
    for (auto [result, value] : llvm::enumerate(op.getResults()))
      if (saved.contains(value))
        for (auto [i, strategy] : llvm::enumerate(node.strategies))
          node.memory[i] +=
              cost::numElements(strategy.results[result].localShape(
                  cast<RankedTensorType>(value.getType()).getShape(), mesh)) *
              cost::elementBytes(value.getType());
    nodeOf[&op] = index;
    for (OpOperand &use : op.getOpOperands())
      addUse(use.get(), index, use.getOperandNumber(), use.getOperandNumber());
    for (auto [result, value] : llvm::enumerate(op.getResults()))
      producer[value] = {index, result};
  }

  if (options.reuseLayers) {
    tieLayers(problem, fn, nodeOf);
    // The fan-out of a tied producer's result follows the leader's.
    llvm::DenseMap<std::pair<int, unsigned>, unsigned> fanoutAt;
    for (auto [index, node] : llvm::enumerate(problem.nodes))
      if (node.isFanout())
        fanoutAt[{node.fanoutSource, node.fanoutResult}] = index;
    for (ProblemNode &node : problem.nodes) {
      if (!node.isFanout() || problem.nodes[node.fanoutSource].leader < 0)
        continue;
      auto leader = fanoutAt.find(
          {problem.nodes[node.fanoutSource].leader, node.fanoutResult});
      if (leader != fanoutAt.end() &&
          node.strategies.sameAs(problem.nodes[leader->second].strategies))
        node.leader = leader->second;
    }
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
    std::string reason = indivisibility(
        wanted, cast<RankedTensorType>(pin.value.getType()).getShape(), mesh);
    if (!reason.empty()) {
      unmet.push_back({index, reason});
      continue;
    }
    Value pinned =
        pin.value; // a structured binding; lambdas capture it in C++20
    auto result = dyn_cast<OpResult>(pinned);
    auto node = llvm::find_if(problem.nodes, [&](const ProblemNode &node) {
      return result ? node.op == result.getOwner()
                    : (node.isArgument() && node.arg == pinned);
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
    else if (node.isFanout())
      name = "fanout";
    else
      name = "arg" + std::to_string(node.arg.getArgNumber());
    std::optional<int> leader;
    if (node.leader >= 0)
      leader = node.leader;
    graph.addNode(name, node.seconds, node.memory, leader);
  }
  for (const ProblemEdge &edge : problem.edges)
    graph.addSharedEdge(edge.from, edge.to, edge.reshard.flat());
  return solver::solveStrategyGraph(graph, options);
}

} // namespace loom::autoshard
