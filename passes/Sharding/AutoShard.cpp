//===- AutoShard.cpp - Choose every value's sharding by an ILP ------------===//
//
// Implements --loom-auto-shard: adapts a function to lib/AutoShard's
// problem, solves it (lib/Solver, CBC), and writes the choice back as
// `shard` annotations.
//
//===----------------------------------------------------------------------===//

#include "passes/Sharding/Passes.h"

#include "loom/AutoShard/Problem.h"
#include "loom/AutoShard/SequenceSplit.h"

#include "dialects/Loom/LoomOps.h"
#include "loom/Support/Diagnostics.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/Dialect/Shard/IR/ShardOps.h"
#include "mlir/IR/Builders.h"
#include "llvm/ADT/StringExtras.h"
#include "llvm/Support/FormatVariadic.h"

#include <chrono>
#include <cmath>
#include <cstdio>

#define DEBUG_TYPE "loom-auto-shard"

namespace loom {
#define GEN_PASS_DEF_LOOMAUTOSHARD
#include "passes/Sharding/Passes.h.inc"
} // namespace loom

using namespace mlir;
using namespace loom::autoshard;

namespace loom {
namespace {

constexpr llvm::StringLiteral kGridName = "mesh";

/// `2x4` to {2, 4}; empty on a malformed shape.
llvm::SmallVector<int64_t, 3> parseMeshShape(llvm::StringRef text) {
  llvm::SmallVector<int64_t, 3> shape;
  llvm::SmallVector<llvm::StringRef> parts;
  text.split(parts, 'x');
  for (llvm::StringRef part : parts) {
    int64_t size;
    if (part.getAsInteger(10, size) || size < 1)
      return {};
    shape.push_back(size);
  }
  return shape;
}

/// Inserts a `shard.sharding` and a `shard.shard` of `value` at the
/// builder's point.
shard::ShardOp annotate(OpBuilder &b, Location loc, Value value,
                        const TensorSharding &sharding, bool forUsers) {
  llvm::SmallVector<shard::GridAxesAttr> splitAxes;
  for (const auto &axes : sharding.dimAxes) {
    llvm::SmallVector<int16_t> axes16(axes.begin(), axes.end());
    splitAxes.push_back(shard::GridAxesAttr::get(b.getContext(), axes16));
  }
  if (splitAxes.empty()) // upstream wants at least one sub-array
    splitAxes.push_back(shard::GridAxesAttr::get(b.getContext(), {}));
  auto shardingOp = shard::ShardingOp::create(b, loc, kGridName, splitAxes);
  auto shardOp = shard::ShardOp::create(b, loc, value, shardingOp.getResult(),
                                        forUsers ? b.getUnitAttr() : nullptr);
  if (!sharding.partialAxes.empty())
    shardOp->setAttr(kPartialAxesAttr,
                     b.getDenseI64ArrayAttr(sharding.partialAxes));
  return shardOp;
}

/// Pins the plan cannot keep that get a line of their own; a count stands
/// for the rest.
constexpr size_t kMaxPinDiagnostics = 4;

/// How a diagnostic names a pinned value: an argument by its parameter's
/// name (`loom.name`) when it has one, as the user's model does.
std::string describe(Value value) {
  if (auto arg = dyn_cast<BlockArgument>(value)) {
    std::string number = "argument " + std::to_string(arg.getArgNumber());
    auto fn = dyn_cast<func::FuncOp>(arg.getOwner()->getParentOp());
    if (auto name =
            fn ? fn.getArgAttrOfType<StringAttr>(arg.getArgNumber(), kNameAttr)
               : StringAttr())
      return "'" + name.str() + "' (" + number + ")";
    return number;
  }
  auto result = cast<OpResult>(value);
  return "result " + std::to_string(result.getResultNumber()) + " of '" +
         result.getOwner()->getName().getStringRef().str() + "'";
}

Location locationOf(Value value) {
  if (auto result = dyn_cast<OpResult>(value))
    return result.getOwner()->getLoc();
  return value.getLoc();
}

/// Reads the layouts the input pins (kSplitAxesAttr on arguments, a
/// `shard.shard` without annotate_for_users on any value) and removes them:
/// the user's `shard` ops, which the problem has no rule for, and the
/// argument attributes, so that the output carries one set of annotations.
/// A malformed pin is an error (and leaves the function as it was).
FailureOr<std::vector<ShardingPin>> takePins(func::FuncOp fn,
                                             const DeviceMesh &mesh) {
  std::vector<ShardingPin> pins;
  llvm::DenseMap<Value, size_t> pinOf;
  auto add = [&](Value value, TensorSharding sharding,
                 Location loc) -> LogicalResult {
    auto [it, inserted] = pinOf.try_emplace(value, pins.size());
    if (inserted)
      pins.push_back({value, std::move(sharding)});
    else if (!(pins[it->second].sharding == sharding))
      return emitLineError(loc)
             << "--loom-auto-shard: " << describe(value)
             << " is pinned twice, to " << pins[it->second].sharding.str()
             << " and to " << sharding.str();
    return success();
  };

  for (BlockArgument arg : fn.getArguments()) {
    Attribute attr = fn.getArgAttr(arg.getArgNumber(), kSplitAxesAttr);
    if (!attr)
      continue;
    auto type = dyn_cast<RankedTensorType>(arg.getType());
    if (!type)
      return emitLineError(arg.getLoc())
             << "--loom-auto-shard: '" << kSplitAxesAttr << "' on "
             << describe(arg) << ", which is not a ranked tensor";
    auto sharding = parseSplitAxesAttr(attr, type.getRank(), mesh);
    if (!sharding)
      return emitLineError(arg.getLoc())
             << "--loom-auto-shard: bad pin " << kSplitAxesAttr << " = " << attr
             << " on " << describe(arg) << ": "
             << llvm::toString(sharding.takeError());
    if (failed(add(arg, std::move(*sharding), arg.getLoc())))
      return failure();
  }

  llvm::SmallVector<shard::ShardOp> shardOps;
  fn.walk([&](shard::ShardOp op) { shardOps.push_back(op); });
  for (shard::ShardOp op : shardOps) {
    if (op.getAnnotateForUsers())
      return op.emitError()
             << "--loom-auto-shard: 'annotate_for_users' (the layout one "
                "user needs) is not supported as a pin; pin the value's own "
                "layout with a 'shard.shard' without it";
    if (op->hasAttr(kPartialAxesAttr))
      return op.emitError() << "--loom-auto-shard: a pin cannot hold "
                               "partial sums ('"
                            << kPartialAxesAttr << "')";
    auto sharding = shardingOfShardOp(op, mesh);
    if (!sharding)
      return op.emitError() << "--loom-auto-shard: bad pin: "
                            << llvm::toString(sharding.takeError());
    Value value = op.getSrc();
    while (auto inner = value.getDefiningOp<shard::ShardOp>())
      value = inner.getSrc();
    if (failed(add(value, std::move(*sharding), op.getLoc())))
      return failure();
  }

  // Every pin is valid: remove them. In program order, so that a shard of
  // a shard ends up using the original value.
  for (BlockArgument arg : fn.getArguments())
    fn.removeArgAttr(arg.getArgNumber(), kSplitAxesAttr);
  for (shard::ShardOp op : shardOps)
    op.getResult().replaceAllUsesWith(op.getSrc());
  for (shard::ShardOp op : shardOps)
    op.erase();
  llvm::SmallVector<shard::ShardingOp> unused;
  fn.walk([&](shard::ShardingOp op) {
    if (op->use_empty())
      unused.push_back(op);
  });
  for (shard::ShardingOp op : unused)
    op.erase();
  return pins;
}

/// The planner works on the whole, unpartitioned step: a partitioned one
/// holds local shapes and collectives, which have no sharding rule. A
/// pipelined step partitioned in place keeps its `loom.state`, so its
/// collectives tell it too.
LogicalResult checkUnpartitioned(ModuleOp module, func::FuncOp fn) {
  ModuleState state = getModuleState(module);
  if (state == ModuleState::Partitioned || state == ModuleState::Split)
    return emitLineError(module)
           << "--loom-auto-shard: the module is " << stringifyModuleState(state)
           << " already (loom.state): plan the step before --loom-partition";
  Operation *collective = nullptr;
  fn.walk([&](Operation *op) {
    if (isa<shard::ShardDialect>(op->getDialect()) &&
        !isa<shard::ShardOp, shard::ShardingOp>(op)) {
      collective = op;
      return WalkResult::interrupt();
    }
    return WalkResult::advance();
  });
  if (collective)
    return emitLineError(fn)
           << "--loom-auto-shard: @" << fn.getSymName()
           << " is partitioned already (it holds '" << collective->getName()
           << "'): plan the step before --loom-partition";
  return success();
}

struct AutoShardPass : impl::LoomAutoShardBase<AutoShardPass> {
  using LoomAutoShardBase::LoomAutoShardBase;

  void runOnOperation() override {
    ModuleOp module = getOperation();
    // The options' errors concern the module as a whole: one line naming
    // its file, as the other passes' option errors do.
    auto optionError = [&] { return emitLineError(module); };
    auto fn = module.lookupSymbol<func::FuncOp>(funcName);
    if (!fn) {
      optionError() << "--loom-auto-shard: no function @" << funcName;
      return signalPassFailure();
    }
    if (failed(checkUnpartitioned(module, fn)))
      return signalPassFailure();
    if (!std::isfinite(memoryBudget) || memoryBudget < 0) {
      char text[32];
      std::snprintf(text, sizeof(text), "%g", double(memoryBudget));
      emitLineError(fn) << "--loom-auto-shard: memory-budget=" << text
                        << " must be a number of bytes >= 0 (0: the device's "
                           "memory)";
      return signalPassFailure();
    }
    DeviceMesh mesh{parseMeshShape(meshShape)};
    if (mesh.shape.empty()) {
      optionError() << "--loom-auto-shard: mesh=\"" << meshShape
                    << "\" is not a list of axis sizes such as 2x4";
      return signalPassFailure();
    }
    auto cluster = cost::resolveClusterSpec(clusterName);
    if (!cluster) {
      optionError() << "--loom-auto-shard: "
                    << llvm::toString(cluster.takeError());
      return signalPassFailure();
    }
    // One rule for every step: the mesh is one pipeline rank's grid (the
    // whole step's when it is not pipelined), and the job's pipeline ranks
    // times the mesh must fit in the cluster, which describes the machine.
    int64_t pipelineRanks = 1;
    if (auto pipeline = module->getAttrOfType<DictionaryAttr>(kPipelineAttr))
      if (auto ranks = pipeline.getAs<IntegerAttr>("ranks"))
        pipelineRanks = std::max<int64_t>(1, ranks.getInt());
    if (mesh.numDevices() * pipelineRanks > cluster->numDevices()) {
      auto diag = optionError() << "--loom-auto-shard: the step needs ";
      if (pipelineRanks > 1)
        diag << pipelineRanks << " pipeline ranks x ";
      diag << "the mesh " << meshShape << " = "
           << mesh.numDevices() * pipelineRanks << " devices, the cluster '"
           << cluster->name << "' has " << cluster->numDevices();
      return signalPassFailure();
    }
    if (auto grid = module.lookupSymbol<shard::GridOp>(kGridName);
        grid && grid.getShape() != llvm::ArrayRef<int64_t>(mesh.shape)) {
      emitLineError(grid) << "--loom-auto-shard: this grid is not the mesh "
                          << meshShape << " the pass plans on";
      return signalPassFailure();
    }
    if (contextAxis < -1 ||
        contextAxis >= static_cast<int64_t>(mesh.shape.size())) {
      optionError() << "--loom-auto-shard: context-axis="
                    << static_cast<int64_t>(contextAxis)
                    << " is not an axis of the mesh " << meshShape;
      return signalPassFailure();
    }
    auto sequenceSplit = parseSequenceSplit(sequenceParallel);
    if (!sequenceSplit) {
      optionError() << "--loom-auto-shard: "
                    << llvm::toString(sequenceSplit.takeError());
      return signalPassFailure();
    }
    FailureOr<std::vector<ShardingPin>> pins = takePins(fn, mesh);
    if (failed(pins))
      return signalPassFailure();
    ProblemOptions problemOptions;
    problemOptions.reuseLayers = reuseLayers;
    auto start = std::chrono::steady_clock::now();
    auto problem = buildShardingProblem(fn, mesh, *cluster, problemOptions);
    auto built = std::chrono::steady_clock::now();
    if (!problem) {
      emitLineError(fn) << "--loom-auto-shard: "
                        << llvm::toString(problem.takeError());
      return signalPassFailure();
    }
    restrictSequenceSplits(*problem, *sequenceSplit, fn);
    if (contextAxis >= 0)
      restrictContextAxis(*problem, contextAxis, fn);
    // A pin is the user's decision: one the plan cannot keep is an error,
    // unless the user asked for the best the planner can do. A scheme pinned
    // on a mesh it does not fit misses a pin on every parameter: the first
    // few, one line each, say what to change, and one line counts the rest.
    std::vector<UnmetPin> unmet = applyPins(*problem, *pins, mesh);
    for (auto [i, miss] : llvm::enumerate(unmet)) {
      const ShardingPin &pin = (*pins)[miss.pin];
      if (i == kMaxPinDiagnostics) {
        size_t rest = unmet.size() - i;
        if (bestEffortPins)
          emitLineWarning(fn.getLoc())
              << "--loom-auto-shard: " << rest << " more pin"
              << (rest == 1 ? "" : "s") << " cannot be kept; planning without "
              << (rest == 1 ? "it" : "them");
        else
          emitLineError(fn) << "--loom-auto-shard: " << rest << " more pin"
                            << (rest == 1 ? "" : "s") << " cannot be kept";
        break;
      }
      if (bestEffortPins) {
        emitLineWarning(locationOf(pin.value))
            << "--loom-auto-shard: cannot pin " << describe(pin.value) << " to "
            << pin.sharding.str() << ": " << miss.reason
            << "; planning without this pin";
        continue;
      }
      emitLineError(locationOf(pin.value))
          << "--loom-auto-shard: cannot pin " << describe(pin.value) << " to "
          << pin.sharding.str() << ": " << miss.reason
          << " (best-effort-pins=true plans without it)";
    }
    if (!unmet.empty() && !bestEffortPins)
      return signalPassFailure();
    solver::StrategyOptions options;
    options.memoryBudget =
        memoryBudget > 0 ? double(memoryBudget) : cluster->device.memoryBytes;
    auto plan = solveShardingProblem(*problem, options);
    if (!plan) {
      emitLineError(fn) << "--loom-auto-shard: "
                        << llvm::toString(plan.takeError());
      return signalPassFailure();
    }
    if (report)
      emitReport(fn, *problem, *plan, built - start,
                 std::chrono::steady_clock::now() - built);
    writeBack(module, fn, *problem, *plan, mesh);
  }

  void emitReport(func::FuncOp fn, const ShardingProblem &problem,
                  const solver::StrategyPlan &plan,
                  std::chrono::duration<double> building,
                  std::chrono::duration<double> solving) {
    int64_t tied = llvm::count_if(problem.nodes, [](const ProblemNode &node) {
      return node.leader >= 0;
    });
    emitLineRemark(fn.getLoc()) << llvm::formatv(
        "--loom-auto-shard: {0} nodes, {1} edges, {2} layers ({3} solved for, "
        "{4} nodes tied), ILP {5} variables {6} rows; cost {7:e1} s (compute "
        "{8:e1} s, resharding {9:e1} s), memory {10:e1} bytes per device; "
        "built in {11:F2} s, solved in {12:F2} s (CBC {13:F2} s)",
        problem.nodes.size(), problem.edges.size(), problem.numLayers,
        problem.numRepresentativeLayers, tied, plan.numVariables, plan.numRows,
        plan.totalCost(), plan.computeCost, plan.reshardCost, plan.memory,
        building.count(), solving.count(), plan.solveSeconds);
  }

  /// A value with several uses that the plan converts once for all of
  /// them: one more annotation after its producer's, which its uses take.
  void annotateFanout(OpBuilder &b, const ShardingProblem &problem,
                      const solver::StrategyPlan &plan, const ProblemNode &node,
                      const TensorSharding &passed) {
    const ProblemNode &source = problem.nodes[node.fanoutSource];
    const TensorSharding &produced =
        source.strategies[plan.strategy[node.fanoutSource]]
            .results[node.fanoutResult];
    if (produced == passed)
      return;
    // The producer's annotation (written before: nodes are in order) is
    // now the value's only user.
    auto annotated = cast<shard::ShardOp>(*node.fanoutOf.getUsers().begin());
    OpBuilder::InsertionGuard guard(b);
    b.setInsertionPointAfter(annotated);
    auto shardOp = annotate(b, annotated.getLoc(), annotated.getResult(),
                            passed, /*forUsers=*/true);
    annotated.getResult().replaceAllUsesExcept(shardOp.getResult(), shardOp);
  }

  void writeBack(ModuleOp module, func::FuncOp fn,
                 const ShardingProblem &problem,
                 const solver::StrategyPlan &plan, const DeviceMesh &mesh) {
    OpBuilder b(module.getContext());
    if (!module.lookupSymbol(kGridName)) {
      b.setInsertionPointToStart(module.getBody());
      shard::GridOp::create(b, module.getLoc(), kGridName, mesh.shape);
    }
    // Arguments' annotations open the body, in argument order.
    b.setInsertionPointToStart(&fn.getBody().front());
    for (auto [index, node] : llvm::enumerate(problem.nodes)) {
      const Strategy &chosen = node.strategies[plan.strategy[index]];
      if (node.isFanout()) {
        annotateFanout(b, problem, plan, node, chosen.results[0]);
        continue;
      }
      if (!node.op) {
        Value arg = node.arg;
        auto shardOp = annotate(b, arg.getLoc(), arg, chosen.results[0],
                                /*forUsers=*/false);
        arg.replaceAllUsesExcept(shardOp.getResult(), shardOp);
        b.setInsertionPointAfter(shardOp);
        continue;
      }
      if (isa<func::ReturnOp>(node.op))
        continue;
      b.setInsertionPointAfter(node.op);
      for (auto [result, sharding] :
           llvm::zip(node.op->getResults(), chosen.results)) {
        if (!isa<RankedTensorType>(result.getType()))
          continue;
        auto shardOp = annotate(b, node.op->getLoc(), result, sharding,
                                /*forUsers=*/false);
        result.replaceAllUsesExcept(shardOp.getResult(), shardOp);
        b.setInsertionPointAfter(shardOp);
      }
    }
    // Operands that must arrive in another layout than they left in.
    for (const ProblemEdge &edge : problem.edges) {
      const ProblemNode &to = problem.nodes[edge.to];
      if (!to.op || edge.operand < 0)
        continue;
      // The layout the carried value left its producer (or argument) or
      // fan-out in.
      unsigned result = isa<OpResult>(edge.value)
                            ? cast<OpResult>(edge.value).getResultNumber()
                            : 0;
      if (problem.nodes[edge.from].isFanout())
        result = 0;
      const TensorSharding &produced = problem.nodes[edge.from]
                                           .strategies[plan.strategy[edge.from]]
                                           .results[result];
      // A returned value's node has one operand, the value, whichever
      // operand of the return it is.
      const TensorSharding &required =
          to.strategies[plan.strategy[edge.to]]
              .operands[isa<func::ReturnOp>(to.op) ? 0 : edge.operand];
      if (produced == required)
        continue;
      Value current = to.op->getOperand(edge.operand);
      b.setInsertionPoint(to.op);
      auto shardOp = annotate(b, to.op->getLoc(), current, required,
                              /*forUsers=*/true);
      to.op->setOperand(edge.operand, shardOp.getResult());
    }
  }
};

} // namespace
} // namespace loom
