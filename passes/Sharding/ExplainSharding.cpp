//===- ExplainSharding.cpp - A table of what a sharding costs, op by op ---===//
//
// Implements --loom-explain-sharding: reads the `shard` annotations of a
// function (as --loom-auto-shard writes them, or by hand) and prints, per
// op, the layouts of its operands and results, the collectives that bring
// each operand from its producer's layout to the one the op needs, and the
// predicted compute and communication times on a cluster; then the totals.
// The IR is left unchanged.
//
//===----------------------------------------------------------------------===//

#include "passes/Sharding/Passes.h"

#include "loom/AutoShard/Resharding.h"
#include "loom/AutoShard/Strategies.h"
#include "loom/Support/AtomicFile.h"

#include "dialects/Loom/LoomOps.h"
#include "loom/Support/Diagnostics.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/Dialect/Shard/IR/ShardOps.h"
#include "llvm/ADT/DenseMap.h"
#include "llvm/ADT/StringExtras.h"
#include "llvm/Support/FormatVariadic.h"

#include <array>
#include <set>

#define DEBUG_TYPE "loom-explain-sharding"

namespace loom {
#define GEN_PASS_DEF_LOOMEXPLAINSHARDING
#include "passes/Sharding/Passes.h.inc"
} // namespace loom

using namespace mlir;
using namespace loom::autoshard;

namespace loom {
namespace {

constexpr std::array<ReshardKind, 5> kReshardKinds = {
    ReshardKind::AllReduce, ReshardKind::ReduceScatter, ReshardKind::AllToAll,
    ReshardKind::AllGather, ReshardKind::Slice};

std::string formatSeconds(double seconds) {
  if (seconds < 1e-3)
    return llvm::formatv("{0:F2} us", seconds * 1e6);
  if (seconds < 1)
    return llvm::formatv("{0:F2} ms", seconds * 1e3);
  return llvm::formatv("{0:F2} s", seconds);
}

std::string formatBytes(double bytes) {
  static constexpr const char *kUnits[] = {"B", "KiB", "MiB", "GiB", "TiB"};
  int unit = 0;
  while (bytes >= 1024 && unit < 4) {
    bytes /= 1024;
    ++unit;
  }
  if (unit == 0)
    return llvm::formatv("{0} B", int64_t(bytes));
  return llvm::formatv("{0:F1} {1}", bytes, kUnits[unit]);
}

/// `line:col` of the file location inside `loc`, or `?`.
std::string lineColumn(Location loc) {
  if (auto file = loc->findInstanceOf<FileLineColLoc>())
    return llvm::formatv("{0}:{1}", file.getLine(), file.getColumn());
  return "?";
}

/// The value under any `shard.shard` ops.
Value sourceOf(Value value) {
  while (auto shardOp = value.getDefiningOp<shard::ShardOp>())
    value = shardOp.getSrc();
  return value;
}

/// One row of the table.
struct Row {
  std::string op, location, operands, results, collectives;
  double compute = 0, communication = 0;
};

struct ExplainShardingPass
    : impl::LoomExplainShardingBase<ExplainShardingPass> {
  using LoomExplainShardingBase::LoomExplainShardingBase;

  void runOnOperation() override {
    layouts.clear();
    counts = {};
    impossible = 0;
    converted.clear();
    ModuleOp module = getOperation();
    auto fn = module.lookupSymbol<func::FuncOp>(funcName);
    if (!fn) {
      emitLineError(module)
          << "--loom-explain-sharding: no function @" << funcName;
      return signalPassFailure();
    }
    if (!fn.getBody().hasOneBlock()) {
      emitLineError(fn) << "--loom-explain-sharding: @" << funcName
                        << " must have one block";
      return signalPassFailure();
    }
    FailureOr<shard::GridOp> grid = findGrid(module, fn);
    if (failed(grid))
      return signalPassFailure();
    if (llvm::any_of(grid->getShape(), ShapedType::isDynamic)) {
      emitLineError(*grid) << "--loom-explain-sharding: the grid's shape must "
                              "be static";
      return signalPassFailure();
    }
    mesh = DeviceMesh{llvm::SmallVector<int64_t, 3>(grid->getShape())};
    auto spec = cost::resolveClusterSpec(clusterName);
    if (!spec) {
      emitLineError(fn) << "--loom-explain-sharding: "
                        << llvm::toString(spec.takeError());
      return signalPassFailure();
    }
    cluster = std::move(*spec);
    if (mesh.numDevices() != cluster.numDevices()) {
      emitLineError(*grid) << "--loom-explain-sharding: the grid has "
                           << mesh.numDevices() << " devices, the cluster '"
                           << cluster.name << "' " << cluster.numDevices();
      return signalPassFailure();
    }
    if (failed(readLayouts(fn)))
      return signalPassFailure();

    std::vector<Row> rows;
    for (Operation &op : fn.getBody().front())
      if (!isa<shard::ShardOp, shard::ShardingOp>(op))
        rows.push_back(explain(&op));

    auto write = [&](llvm::raw_ostream &os) {
      printTable(os, fn, *grid, rows);
    };
    if (output == "-") {
      write(llvm::outs());
      llvm::outs().flush();
    } else if (llvm::Error error = writeFileAtomically(output, write)) {
      emitLineError(fn) << "--loom-explain-sharding: "
                        << llvm::toString(std::move(error));
      return signalPassFailure();
    }
    markAllAnalysesPreserved();
  }

  /// The grid the function's shardings name (they must all name one), or
  /// the module's only grid when none does.
  FailureOr<shard::GridOp> findGrid(ModuleOp module, func::FuncOp fn) {
    std::optional<StringRef> name;
    WalkResult walk = fn.walk([&](shard::ShardingOp op) {
      if (name && *name != op.getGrid()) {
        op.emitError() << "--loom-explain-sharding: the shardings name two "
                          "grids, @"
                       << *name << " and @" << op.getGrid();
        return WalkResult::interrupt();
      }
      name = op.getGrid();
      return WalkResult::advance();
    });
    if (walk.wasInterrupted())
      return failure();
    if (name) {
      if (auto grid = module.lookupSymbol<shard::GridOp>(*name))
        return grid;
      emitLineError(fn) << "--loom-explain-sharding: no shard.grid @" << *name;
      return failure();
    }
    auto grids = module.getOps<shard::GridOp>();
    if (grids.empty()) {
      emitLineError(fn) << "--loom-explain-sharding: no shard.grid in the "
                           "module (run --loom-auto-shard first)";
      return failure();
    }
    if (std::next(grids.begin()) != grids.end()) {
      emitLineError(fn) << "--loom-explain-sharding: several shard.grid ops "
                           "and no sharding naming one";
      return failure();
    }
    return *grids.begin();
  }

  /// Reads every value's layout: its `shard.shard` without
  /// annotate_for_users.
  LogicalResult readLayouts(func::FuncOp fn) {
    WalkResult walk = fn.walk([&](shard::ShardOp op) {
      auto sharding = shardingOfShardOp(op, mesh);
      if (!sharding) {
        op.emitError() << "--loom-explain-sharding: "
                       << llvm::toString(sharding.takeError());
        return WalkResult::interrupt();
      }
      if (op.getAnnotateForUsers())
        return WalkResult::advance();
      auto [it, inserted] =
          layouts.try_emplace(sourceOf(op.getSrc()), *sharding);
      if (!inserted && !(it->second == *sharding)) {
        op.emitError() << "--loom-explain-sharding: a second layout "
                       << sharding->str() << " for a value laid out as "
                       << it->second.str();
        return WalkResult::interrupt();
      }
      return WalkResult::advance();
    });
    return failure(walk.wasInterrupted());
  }

  /// The layout `value` was produced in (replicated when unannotated).
  TensorSharding producedLayout(Value value) const {
    value = sourceOf(value);
    auto it = layouts.find(value);
    if (it != layouts.end())
      return it->second;
    return TensorSharding::replicated(
        cast<RankedTensorType>(value.getType()).getRank());
  }

  /// The layouts an operand passes through on its way from its producer:
  /// those of the annotate_for_users `shard.shard` ops that feed it,
  /// outermost (nearest the producer) first.
  llvm::SmallVector<TensorSharding, 2> conversionChain(Value operand) const {
    llvm::SmallVector<TensorSharding, 2> chain;
    for (auto shardOp = operand.getDefiningOp<shard::ShardOp>();
         shardOp && shardOp.getAnnotateForUsers();
         shardOp = shardOp.getSrc().getDefiningOp<shard::ShardOp>())
      chain.push_back(llvm::cantFail(shardingOfShardOp(shardOp, mesh)));
    std::reverse(chain.begin(), chain.end());
    return chain;
  }

  /// The layout an op needs `operand` in: an annotate_for_users
  /// `shard.shard` feeding it, or else the producer's layout.
  TensorSharding requiredLayout(Value operand) const {
    auto shardOp = operand.getDefiningOp<shard::ShardOp>();
    if (shardOp && shardOp.getAnnotateForUsers())
      // Read without error in readLayouts.
      return llvm::cantFail(shardingOfShardOp(shardOp, mesh));
    return producedLayout(operand);
  }

  Row explain(Operation *op) {
    Row row;
    row.op = op->getName().getStringRef().str();
    row.location = lineColumn(op->getLoc());
    llvm::SmallVector<TensorSharding> operands, results;
    llvm::SmallVector<std::string> operandText, resultText, collectives;
    cost::OpShapes local = cost::OpShapes::of(op);
    bool divides = true;
    for (auto [index, operand] : llvm::enumerate(op->getOperands())) {
      auto type = dyn_cast<RankedTensorType>(operand.getType());
      if (!type) {
        operands.push_back({});
        operandText.push_back("-");
        continue;
      }
      TensorSharding required = requiredLayout(operand);
      operandText.push_back(required.str());
      if (required.divides(type.getShape(), mesh))
        local.operands[index] = required.localShape(type.getShape(), mesh);
      else
        divides = false;
      // Each conversion on the way (a value converted for several users
      // first, then per user), counted once per value and target as the
      // partitioner inserts it.
      TensorSharding from = producedLayout(operand);
      for (const TensorSharding &to : conversionChain(operand)) {
        if (from == to)
          continue;
        auto key = std::make_tuple(sourceOf(operand).getAsOpaquePointer(),
                                   from.str(), to.str());
        if (converted.insert(key).second)
          collectives.push_back(
              explainResharding(index, operand, from, to, row.communication));
        else
          collectives.push_back(llvm::formatv("#{0} converted above", index));
        from = to;
      }
      operands.push_back(std::move(required));
    }
    for (auto [index, result] : llvm::enumerate(op->getResults())) {
      auto type = dyn_cast<RankedTensorType>(result.getType());
      if (!type) {
        results.push_back({});
        resultText.push_back("-");
        continue;
      }
      TensorSharding produced = producedLayout(result);
      resultText.push_back(produced.str());
      if (produced.divides(type.getShape(), mesh))
        local.results[index] = produced.localShape(type.getShape(), mesh);
      else
        divides = false;
      results.push_back(std::move(produced));
    }
    row.operands = llvm::join(operandText, ", ");
    row.results = llvm::join(resultText, ", ");
    if (!divides)
      collectives.push_back("(a layout does not divide its tensor)");

    // The op's time: that of its strategy with these layouts, or else at
    // the local shapes the annotations give.
    const Strategy *chosen = nullptr;
    std::vector<Strategy> strategies;
    if (auto ruled = dyn_cast<ShardingRuleOpInterface>(op)) {
      strategies = enumerateStrategies(op, ruled.getShardingRule(), mesh,
                                       cluster.device);
      for (const Strategy &strategy : strategies)
        if (llvm::equal(strategy.operands, operands) &&
            llvm::equal(strategy.results, results))
          chosen = &strategy;
      if (!chosen)
        collectives.push_back("(no strategy of the op has these layouts)");
    }
    row.compute =
        chosen ? chosen->computeSeconds
               : cost::opTime(cost::getOpWork(op, local), cluster.device);
    row.collectives = collectives.empty() ? "-" : llvm::join(collectives, "; ");
    return row;
  }

  /// `#1 all-gather axis 0: 2.0 MiB 12.34 us, ...` for operand `index`, and
  /// the counts and time it adds.
  std::string explainResharding(unsigned index, Value operand,
                                const TensorSharding &from,
                                const TensorSharding &to, double &seconds) {
    auto type = cast<RankedTensorType>(operand.getType());
    ReshardPlan plan = planResharding(from, to, type.getShape(),
                                      cost::elementBytes(type), mesh, cluster);
    std::string text = llvm::formatv("#{0} ", index);
    if (!plan.possible) {
      ++impossible;
      return text + "impossible: " + from.str() + " -> " + to.str();
    }
    llvm::SmallVector<std::string> steps;
    for (const ReshardStep &step : plan.steps) {
      ++counts[size_t(step.kind)];
      std::string stepText = llvm::formatv(
          "{0} axis {1}", stringifyReshardKind(step.kind), step.axis);
      if (step.kind != ReshardKind::Slice)
        stepText +=
            " " + formatBytes(step.bytes) + " " + formatSeconds(step.seconds);
      steps.push_back(std::move(stepText));
    }
    seconds += plan.seconds;
    return text + llvm::join(steps, ", ");
  }

  void printTable(llvm::raw_ostream &os, func::FuncOp fn, shard::GridOp grid,
                  llvm::ArrayRef<Row> rows) const {
    os << "sharding of @" << fn.getName() << " on grid @" << grid.getSymName()
       << " (shape "
       << llvm::join(
              llvm::map_range(mesh.shape,
                              [](int64_t s) { return std::to_string(s); }),
              "x")
       << ") of cluster '" << cluster.name << "'\n";
    std::vector<std::array<std::string, 7>> cells;
    cells.push_back({"op", "loc", "operands", "results", "compute",
                     "communication", "collectives"});
    double compute = 0, communication = 0;
    for (const Row &row : rows) {
      cells.push_back({row.op, row.location, row.operands, row.results,
                       formatSeconds(row.compute),
                       formatSeconds(row.communication), row.collectives});
      compute += row.compute;
      communication += row.communication;
    }
    std::array<size_t, 7> width{};
    for (const auto &line : cells)
      for (size_t column = 0; column < line.size(); ++column)
        width[column] = std::max(width[column], line[column].size());
    for (const auto &line : cells) {
      // The last column is not padded.
      for (size_t column = 0; column + 1 < line.size(); ++column)
        os << llvm::left_justify(line[column], width[column]) << "  ";
      os << line.back() << "\n";
    }
    os << "total: compute " << formatSeconds(compute) << ", communication "
       << formatSeconds(communication) << "; collectives:";
    for (ReshardKind kind : kReshardKinds)
      os << " " << stringifyReshardKind(kind) << " " << counts[size_t(kind)]
         << (kind == kReshardKinds.back() ? "" : ",");
    if (impossible)
      os << "; impossible reshardings: " << impossible;
    os << "\n";
  }

  DeviceMesh mesh;
  cost::ClusterSpec cluster;
  llvm::DenseMap<Value, TensorSharding> layouts;
  std::array<int64_t, kReshardKinds.size()> counts{};
  int64_t impossible = 0;
  /// (value, from, to) of every conversion counted so far.
  std::set<std::tuple<const void *, std::string, std::string>> converted;
};

} // namespace
} // namespace loom
