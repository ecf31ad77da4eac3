//===- StrategyGraph.h - Alpa's intra-operator sharding ILP -----*- C++ -*-===//
//
// The intra-operator pass of Alpa (Zheng et al., OSDI'22, §4.2) as plain
// data: every op is a node with k_v sharding strategies, each with a cost
// (compute + the communication the strategy itself needs) and the bytes it
// keeps on a device; every producer -> consumer edge has a k_u x k_v
// resharding cost matrix. solveStrategyGraph picks one strategy per node
// minimizing total cost under a memory budget, through the ILP in ILP.h.
// docs/ilp.md writes out the formulation.
//
//===----------------------------------------------------------------------===//

#ifndef LOOM_SOLVER_STRATEGYGRAPH_H
#define LOOM_SOLVER_STRATEGYGRAPH_H

#include "loom/Solver/ILP.h"

#include <memory>
#include <optional>
#include <string>
#include <vector>

namespace loom::solver {

/// One op. cost[i] = +inf forbids strategy i.
struct StrategyNode {
  std::string name;
  std::vector<double> cost;
  /// Bytes strategy i keeps on one device.
  std::vector<double> memory;
  /// When set, this node takes the same strategy index as that node (an op
  /// of a transformer layer tied to the same op of the first layer); its
  /// costs and memory still count.
  std::optional<int> followerOf;

  int numStrategies() const { return static_cast<int>(cost.size()); }
};

/// A producer -> consumer edge. (*reshard)[i * k_to + j] is the cost of
/// converting `from`'s output under its strategy i into the layout `to`'s
/// strategy j expects; +inf forbids the pair. The matrix may be shared
/// with other edges (the same edge in every identical layer).
struct StrategyEdge {
  int from = 0;
  int to = 0;
  std::shared_ptr<const std::vector<double>> reshard;
};

class StrategyGraph {
public:
  /// Adds a node and returns its index.
  int addNode(std::string name, std::vector<double> cost,
              std::vector<double> memory,
              std::optional<int> followerOf = std::nullopt);
  /// Adds an edge; `reshard` is row-major k_from x k_to.
  void addEdge(int from, int to, std::vector<double> reshard);
  /// Adds an edge whose matrix other edges may share.
  void addSharedEdge(int from, int to,
                     std::shared_ptr<const std::vector<double>> reshard);

  int numNodes() const { return static_cast<int>(nodes.size()); }
  const StrategyNode &node(int index) const { return nodes[index]; }
  llvm::ArrayRef<StrategyEdge> getEdges() const { return edges; }

  /// Checks sizes (cost, memory and matrices agree with k), values (no NaN,
  /// no -inf, finite non-negative memory), that every node keeps an allowed
  /// strategy, and that followers name an earlier-or-later node with the
  /// same k without a cycle.
  llvm::Error verify() const;

  /// Total cost and memory of `choice` (one strategy per node); +inf when
  /// the choice uses a forbidden strategy or pair.
  double computeCostOf(llvm::ArrayRef<int> choice) const;
  double reshardCostOf(llvm::ArrayRef<int> choice) const;
  double memoryOf(llvm::ArrayRef<int> choice) const;

private:
  std::vector<StrategyNode> nodes;
  std::vector<StrategyEdge> edges;
};

struct StrategyOptions {
  /// Bound on the sum over nodes of the chosen strategy's memory (one
  /// aggregate constraint; see docs/ilp.md for what it leaves out).
  double memoryBudget = kInfinity;
  SolveOptions solve;
};

struct StrategyPlan {
  /// The strategy index of every node.
  std::vector<int> strategy;
  double computeCost = 0;
  double reshardCost = 0;
  double memory = 0;
  SolveStatus status = SolveStatus::Optimal;
  /// Size of the ILP after the simplifications (0 when none was needed).
  int numVariables = 0;
  int numRows = 0;
  double solveSeconds = 0;

  double totalCost() const { return computeCost + reshardCost; }
};

/// The memory budget admits no choice. minimumMemory is the least memory
/// any allowed choice needs (exact).
class MemoryBudgetError : public llvm::ErrorInfo<MemoryBudgetError> {
public:
  static char ID;
  MemoryBudgetError(double budget, double minimumMemory)
      : budget(budget), minimumMemory(minimumMemory) {}
  void log(llvm::raw_ostream &os) const override;
  std::error_code convertToErrorCode() const override {
    return llvm::inconvertibleErrorCode();
  }

  double budget;
  double minimumMemory;
};

/// Picks the cheapest strategy per node within the memory budget. Errors:
/// the graph fails verify(); no choice avoids the forbidden strategies and
/// pairs (an ILPError, Infeasible); the budget is too small (a
/// MemoryBudgetError); CBC failed (an ILPError).
llvm::Expected<StrategyPlan>
solveStrategyGraph(const StrategyGraph &graph,
                   const StrategyOptions &options = {});

} // namespace loom::solver

#endif // LOOM_SOLVER_STRATEGYGRAPH_H
