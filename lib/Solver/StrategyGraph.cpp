//===- StrategyGraph.cpp - Alpa's intra-operator sharding ILP -------------===//
//
// Reference: L. Zheng et al., "Alpa: Automating Inter- and Intra-Operator
// Parallelism for Distributed Deep Learning", OSDI 2022, §4.2 (the ILP) and
// its implementation's simplifications (single-strategy nodes fixed, edges
// whose matrix is zero dropped). Ties between nodes (followerOf) make
// identical layers share one set of variables: a tied class of nodes is one
// choice, its costs and memory summed over the members.
//
// The steps: group nodes into classes (a node and its followers); fold
// edges inside a class onto the diagonal, merge parallel edges between two
// classes, fold edges at a fixed class (one allowed strategy) into the
// other end's costs until nothing changes; build the ILP on what is left;
// read back one strategy per class. Costs and memory of the answer are
// recomputed from the graph, in double, not taken from the solver.
//
//===----------------------------------------------------------------------===//

#include "loom/Solver/StrategyGraph.h"

#include "llvm/ADT/DenseMap.h"
#include "llvm/ADT/DenseSet.h"
#include "llvm/ADT/STLExtras.h"
#include "llvm/Support/FormatVariadic.h"
#include "llvm/Support/raw_ostream.h"

#include <algorithm>
#include <cmath>
#include <map>

namespace loom::solver {

char MemoryBudgetError::ID = 0;

static std::string bytes(double value) {
  return llvm::formatv("{0:F0} bytes ({1:F3} GiB)", value,
                       value / double(1ull << 30))
      .str();
}

void MemoryBudgetError::log(llvm::raw_ostream &os) const {
  os << "memory budget of " << bytes(budget)
     << " per device is infeasible: every allowed strategy choice needs at "
        "least "
     << bytes(minimumMemory);
}

static llvm::Error invalid(const llvm::Twine &message) {
  return llvm::make_error<ILPError>(ILPFailure::InvalidModel, message.str());
}

//===----------------------------------------------------------------------===//
// The graph
//===----------------------------------------------------------------------===//

int StrategyGraph::addNode(std::string name, std::vector<double> cost,
                           std::vector<double> memory,
                           std::optional<int> followerOf) {
  nodes.push_back(
      {std::move(name), std::move(cost), std::move(memory), followerOf});
  return numNodes() - 1;
}

void StrategyGraph::addEdge(int from, int to, std::vector<double> reshard) {
  addSharedEdge(
      from, to,
      std::make_shared<const std::vector<double>>(std::move(reshard)));
}

void StrategyGraph::addSharedEdge(
    int from, int to, std::shared_ptr<const std::vector<double>> reshard) {
  edges.push_back({from, to, std::move(reshard)});
}

llvm::Error StrategyGraph::verify() const {
  for (auto [v, node] : llvm::enumerate(nodes)) {
    int k = node.numStrategies();
    if (k == 0 || node.memory.size() != node.cost.size())
      return invalid(llvm::formatv("node '{0}' has {1} costs and {2} memory "
                                   "values (needs as many, at least one)",
                                   node.name, k, node.memory.size()));
    if (llvm::any_of(node.cost,
                     [](double c) { return std::isnan(c) || c == -kInfinity; }))
      return invalid(
          llvm::formatv("node '{0}' has a NaN or -inf cost", node.name));
    if (llvm::none_of(node.cost, [](double c) { return std::isfinite(c); }))
      return invalid(llvm::formatv(
          "node '{0}' allows no strategy (every cost is inf)", node.name));
    if (llvm::any_of(node.memory,
                     [](double m) { return !std::isfinite(m) || m < 0; }))
      return invalid(llvm::formatv("node '{0}' has memory that is not a "
                                   "finite number of bytes",
                                   node.name));
    if (!node.followerOf)
      continue;
    int leader = *node.followerOf;
    if (leader < 0 || leader >= numNodes() || leader == int(v))
      return invalid(
          llvm::formatv("node '{0}' follows no other node", node.name));
    if (nodes[leader].numStrategies() != k)
      return invalid(llvm::formatv("node '{0}' ({1} strategies) follows '{2}' "
                                   "({3} strategies)",
                                   node.name, k, nodes[leader].name,
                                   nodes[leader].numStrategies()));
    // A cycle of followers never reaches a node that follows nobody.
    int steps = 0;
    for (int w = leader; nodes[w].followerOf; w = *nodes[w].followerOf)
      if (++steps > numNodes())
        return invalid(
            llvm::formatv("node '{0}' is on a cycle of followers", node.name));
  }
  llvm::DenseSet<const std::vector<double> *> checked;
  for (const StrategyEdge &edge : edges) {
    if (edge.from < 0 || edge.from >= numNodes() || edge.to < 0 ||
        edge.to >= numNodes() || edge.from == edge.to)
      return invalid(llvm::formatv("edge {0} -> {1} does not join two nodes",
                                   edge.from, edge.to));
    size_t size = size_t(nodes[edge.from].numStrategies()) *
                  nodes[edge.to].numStrategies();
    size_t given = edge.reshard ? edge.reshard->size() : 0;
    if (given != size)
      return invalid(llvm::formatv("edge '{0}' -> '{1}' has {2} resharding "
                                   "costs, not {3}",
                                   nodes[edge.from].name, nodes[edge.to].name,
                                   given, size));
    // A matrix shared by many edges is checked once.
    if (!checked.insert(edge.reshard.get()).second)
      continue;
    if (llvm::any_of(*edge.reshard,
                     [](double c) { return std::isnan(c) || c == -kInfinity; }))
      return invalid(llvm::formatv("edge '{0}' -> '{1}' has a NaN or -inf "
                                   "resharding cost",
                                   nodes[edge.from].name, nodes[edge.to].name));
  }
  return llvm::Error::success();
}

double StrategyGraph::computeCostOf(llvm::ArrayRef<int> choice) const {
  double sum = 0;
  for (auto [node, i] : llvm::zip_equal(nodes, choice))
    sum += node.cost[i];
  return sum;
}

double StrategyGraph::reshardCostOf(llvm::ArrayRef<int> choice) const {
  double sum = 0;
  for (const StrategyEdge &edge : edges)
    sum += (*edge.reshard)[choice[edge.from] * nodes[edge.to].numStrategies() +
                           choice[edge.to]];
  return sum;
}

double StrategyGraph::memoryOf(llvm::ArrayRef<int> choice) const {
  double sum = 0;
  for (auto [node, i] : llvm::zip_equal(nodes, choice))
    sum += node.memory[i];
  return sum;
}

//===----------------------------------------------------------------------===//
// Reduction to the classes that need variables
//===----------------------------------------------------------------------===//

namespace {

/// A node and its followers: one choice. cost[i] is +inf when strategy i
/// is forbidden for a member, by an edge inside the class, or by an edge to
/// a fixed class.
struct Class {
  std::vector<double> cost;
  std::vector<double> memory;
  /// The strategy when only one is allowed.
  std::optional<int> fixed;
  /// ILP variable of s[i], -1 when strategy i has none (forbidden, or the
  /// class is fixed).
  std::vector<int> var;

  int k() const { return static_cast<int>(cost.size()); }
  int numAllowed() const {
    return llvm::count_if(cost, [](double c) { return std::isfinite(c); });
  }
};

/// The summed resharding matrix between classes a < b: m[i * k_b + j].
using PairKey = std::pair<int, int>;

struct Reduced {
  std::vector<int> classOf; // node -> class
  std::vector<Class> classes;
  std::map<PairKey, std::vector<double>> pairs;
};

/// Groups nodes into classes and merges edges.
Reduced group(const StrategyGraph &graph) {
  Reduced r;
  llvm::DenseMap<int, int> classOfRoot;
  for (int v = 0; v < graph.numNodes(); ++v) {
    int root = v;
    while (graph.node(root).followerOf)
      root = *graph.node(root).followerOf;
    auto [it, inserted] = classOfRoot.try_emplace(root, r.classes.size());
    if (inserted) {
      int k = graph.node(root).numStrategies();
      r.classes.push_back({std::vector<double>(k, 0.0),
                           std::vector<double>(k, 0.0),
                           std::nullopt,
                           {}});
    }
    r.classOf.push_back(it->second);
    Class &c = r.classes[it->second];
    for (int i = 0; i < c.k(); ++i) {
      c.cost[i] += graph.node(v).cost[i];
      c.memory[i] += graph.node(v).memory[i];
    }
  }
  for (const StrategyEdge &edge : graph.getEdges()) {
    int a = r.classOf[edge.from], b = r.classOf[edge.to];
    int kFrom = graph.node(edge.from).numStrategies();
    int kTo = graph.node(edge.to).numStrategies();
    const std::vector<double> &reshard = *edge.reshard;
    if (a == b) { // both ends take the same index: the diagonal
      for (int i = 0; i < kFrom; ++i)
        r.classes[a].cost[i] += reshard[i * kTo + i];
      continue;
    }
    bool swap = a > b;
    auto key = swap ? PairKey{b, a} : PairKey{a, b};
    std::vector<double> &m = r.pairs[key];
    m.resize(size_t(kFrom) * kTo, 0.0);
    for (int i = 0; i < kFrom; ++i)
      for (int j = 0; j < kTo; ++j)
        m[swap ? j * kFrom + i : i * kTo + j] += reshard[i * kTo + j];
  }
  return r;
}

/// Folds edges at fixed classes into the other end until no class becomes
/// newly fixed, and drops edges that are zero on every allowed pair. Fails
/// when a class is left without an allowed strategy.
llvm::Error simplify(Reduced &r, const StrategyGraph &graph) {
  bool changed = true;
  while (changed) {
    changed = false;
    for (auto [index, c] : llvm::enumerate(r.classes)) {
      if (c.numAllowed() == 0) {
        int node = llvm::find(r.classOf, int(index)) - r.classOf.begin();
        return llvm::make_error<ILPError>(
            ILPFailure::Infeasible,
            llvm::formatv("no strategy of node '{0}' is allowed together "
                          "with its fixed neighbours' strategies",
                          graph.node(node).name)
                .str());
      }
      if (!c.fixed && c.numAllowed() == 1)
        c.fixed =
            llvm::find_if(c.cost, [](double x) { return std::isfinite(x); }) -
            c.cost.begin();
    }
    for (auto it = r.pairs.begin(); it != r.pairs.end();) {
      auto [a, b] = it->first;
      Class &ca = r.classes[a], &cb = r.classes[b];
      const std::vector<double> &m = it->second;
      if (ca.fixed || cb.fixed) {
        if (ca.fixed)
          for (int j = 0; j < cb.k(); ++j)
            cb.cost[j] += m[*ca.fixed * cb.k() + j];
        else
          for (int i = 0; i < ca.k(); ++i)
            ca.cost[i] += m[i * cb.k() + *cb.fixed];
        it = r.pairs.erase(it);
        changed = true;
        continue;
      }
      bool zero = true;
      for (int i = 0; i < ca.k(); ++i)
        for (int j = 0; j < cb.k(); ++j)
          zero &= !std::isfinite(ca.cost[i]) || !std::isfinite(cb.cost[j]) ||
                  m[i * cb.k() + j] == 0;
      it = zero ? r.pairs.erase(it) : std::next(it);
    }
  }
  return llvm::Error::success();
}

/// The ILP over the free classes of `r`: one-hot s per class, Alpa's edge
/// variables per pair, and the memory row when `memoryBudget` (what is left
/// after the fixed classes) is finite. `memoryObjective` minimizes memory
/// instead of cost (and then has no memory row).
ILP buildILP(Reduced &r, double memoryBudget, bool memoryObjective) {
  ILP ilp;
  // Scale the objective and the memory row to coefficients of at most 1:
  // seconds and bytes are far from CBC's absolute tolerances otherwise.
  double costScale = 0, memoryScale = 0;
  for (const Class &c : r.classes) {
    if (c.fixed)
      continue;
    for (int i = 0; i < c.k(); ++i) {
      if (!std::isfinite(c.cost[i]))
        continue;
      costScale = std::max(costScale, std::fabs(c.cost[i]));
      memoryScale = std::max(memoryScale, c.memory[i]);
    }
  }
  for (const auto &[key, m] : r.pairs)
    for (double x : m)
      if (std::isfinite(x))
        costScale = std::max(costScale, std::fabs(x));
  costScale = costScale > 0 ? 1 / costScale : 1;
  memoryScale = memoryScale > 0 ? 1 / memoryScale : 1;

  std::vector<std::pair<int, double>> memoryRow;
  for (Class &c : r.classes) {
    c.var.assign(c.k(), -1);
    if (c.fixed)
      continue;
    std::vector<std::pair<int, double>> oneHot;
    for (int i = 0; i < c.k(); ++i) {
      if (!std::isfinite(c.cost[i]))
        continue; // forbidden: s[i] = 0, so no variable at all
      c.var[i] = ilp.addBinary(memoryObjective ? c.memory[i] * memoryScale
                                               : c.cost[i] * costScale);
      oneHot.push_back({c.var[i], 1.0});
      if (c.memory[i] != 0)
        memoryRow.push_back({c.var[i], c.memory[i] * memoryScale});
    }
    ilp.addRow(oneHot, 1, 1);
  }
  for (const auto &[key, m] : r.pairs) {
    const Class &ca = r.classes[key.first], &cb = r.classes[key.second];
    // e[i][j] in [0, 1], sum_j e[i][j] = s_a[i], sum_i e[i][j] = s_b[j]:
    // with one-hot s these force e to the one pair chosen, so e needs no
    // integrality. A forbidden pair has no e: its row and column sums then
    // exclude choosing both.
    std::vector<std::vector<std::pair<int, double>>> rowSum(ca.k()),
        colSum(cb.k());
    for (int i = 0; i < ca.k(); ++i) {
      for (int j = 0; j < cb.k(); ++j) {
        double cost = m[i * cb.k() + j];
        if (ca.var[i] < 0 || cb.var[j] < 0 || !std::isfinite(cost))
          continue;
        int e = ilp.addVariable(VarKind::Continuous, 0, 1,
                                memoryObjective ? 0 : cost * costScale);
        rowSum[i].push_back({e, 1.0});
        colSum[j].push_back({e, 1.0});
      }
    }
    for (int i = 0; i < ca.k(); ++i)
      if (ca.var[i] >= 0) {
        rowSum[i].push_back({ca.var[i], -1.0});
        ilp.addRow(rowSum[i], 0, 0);
      }
    for (int j = 0; j < cb.k(); ++j)
      if (cb.var[j] >= 0) {
        colSum[j].push_back({cb.var[j], -1.0});
        ilp.addRow(colSum[j], 0, 0);
      }
  }
  if (!memoryObjective && std::isfinite(memoryBudget) && !memoryRow.empty())
    ilp.addRow(memoryRow, -kInfinity, memoryBudget * memoryScale);
  return ilp;
}

/// The strategy of every class: the fixed one, or the s[i] set to 1.
std::vector<int> readChoice(const Reduced &r, const ILPSolution *solution) {
  std::vector<int> choice;
  for (const Class &c : r.classes) {
    if (c.fixed) {
      choice.push_back(*c.fixed);
      continue;
    }
    int chosen = 0;
    for (int i = 0; i < c.k(); ++i)
      if (c.var[i] >= 0 && solution->isOne(c.var[i]))
        chosen = i;
    choice.push_back(chosen);
  }
  return choice;
}

std::vector<int> perNode(const Reduced &r, llvm::ArrayRef<int> classChoice) {
  std::vector<int> strategy;
  for (int c : r.classOf)
    strategy.push_back(classChoice[c]);
  return strategy;
}

double fixedMemory(const Reduced &r) {
  double sum = 0;
  for (const Class &c : r.classes)
    if (c.fixed)
      sum += c.memory[*c.fixed];
  return sum;
}

/// The least memory of any allowed choice. Without forbidden pairs between
/// free classes the classes are independent and the minimum is the sum of
/// per-class minima; otherwise it is an ILP minimizing memory.
llvm::Expected<double> minimumMemory(Reduced r, const StrategyGraph &graph,
                                     const SolveOptions &options) {
  bool coupled = false;
  for (const auto &[key, m] : r.pairs)
    coupled |= llvm::any_of(m, [](double x) { return !std::isfinite(x); });
  if (!coupled) {
    double sum = 0;
    for (const Class &c : r.classes) {
      double best = kInfinity;
      for (int i = 0; i < c.k(); ++i)
        if (std::isfinite(c.cost[i]))
          best = std::min(best, c.memory[i]);
      sum += best;
    }
    return sum;
  }
  ILP ilp = buildILP(r, kInfinity, /*memoryObjective=*/true);
  llvm::Expected<ILPSolution> solution = solve(ilp, options);
  if (!solution)
    return llvm::handleErrors(
        solution.takeError(), [](std::unique_ptr<ILPError> e) -> llvm::Error {
          if (e->kind() != ILPFailure::Infeasible)
            return llvm::Error(std::move(e));
          return llvm::make_error<ILPError>(
              ILPFailure::Infeasible,
              "no choice of strategies avoids every forbidden resharding "
              "pair");
        });
  return graph.memoryOf(perNode(r, readChoice(r, &*solution)));
}

} // namespace

llvm::Expected<StrategyPlan>
solveStrategyGraph(const StrategyGraph &graph, const StrategyOptions &options) {
  if (llvm::Error error = graph.verify())
    return std::move(error);
  if (std::isnan(options.memoryBudget) || options.memoryBudget < 0)
    return invalid(llvm::formatv("memory budget {0} is not a number of bytes",
                                 options.memoryBudget));
  Reduced r = group(graph);
  if (llvm::Error error = simplify(r, graph))
    return std::move(error);

  StrategyPlan plan;
  double budgetLeft = options.memoryBudget - fixedMemory(r);
  ILP ilp = buildILP(r, budgetLeft, /*memoryObjective=*/false);
  plan.numVariables = ilp.numVariables();
  plan.numRows = ilp.numRows();
  std::optional<ILPSolution> solution;
  if (ilp.numVariables() > 0) {
    llvm::Expected<ILPSolution> solved = solve(ilp, options.solve);
    if (!solved) {
      bool infeasible = false;
      llvm::Error error = llvm::handleErrors(
          solved.takeError(), [&](std::unique_ptr<ILPError> e) -> llvm::Error {
            infeasible = e->kind() == ILPFailure::Infeasible;
            return infeasible ? llvm::Error::success()
                              : llvm::Error(std::move(e));
          });
      if (error)
        return std::move(error);
      // Infeasible: forbidden pairs, or the budget. The exact minimum
      // memory tells which (and fails itself in the first case).
      llvm::Expected<double> minimum = minimumMemory(r, graph, options.solve);
      if (!minimum)
        return minimum.takeError();
      if (*minimum > options.memoryBudget)
        return llvm::make_error<MemoryBudgetError>(options.memoryBudget,
                                                   *minimum);
      return llvm::make_error<ILPError>(
          ILPFailure::Infeasible,
          llvm::formatv("CBC found the sharding ILP infeasible, yet a choice "
                        "needing {0} fits the budget of {1}",
                        bytes(*minimum), bytes(options.memoryBudget))
              .str());
    }
    solution = std::move(*solved);
    plan.status = solution->status;
    plan.solveSeconds = solution->seconds;
  } else if (budgetLeft < 0) {
    return llvm::make_error<MemoryBudgetError>(options.memoryBudget,
                                               fixedMemory(r));
  }
  plan.strategy = perNode(r, readChoice(r, solution ? &*solution : nullptr));
  plan.computeCost = graph.computeCostOf(plan.strategy);
  plan.reshardCost = graph.reshardCostOf(plan.strategy);
  plan.memory = graph.memoryOf(plan.strategy);
  return plan;
}

} // namespace loom::solver
