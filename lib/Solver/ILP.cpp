//===- ILP.cpp - Mixed-integer linear programs solved by CBC --------------===//
//
// The CBC C API (coin/Cbc_C_Interface.h, CBC 2.10) is the only CBC surface
// used, so this file builds with -fno-exceptions. The functions called, in
// order:
//   Cbc_newModel, Cbc_loadProblem (column-compressed matrix, row bounds),
//   Cbc_setInteger, Cbc_setLogLevel, Cbc_setParameter ("timeMode", "sec",
//   "ratioGap", "threads"), Cbc_solve, then Cbc_status,
//   Cbc_secondaryStatus, Cbc_isProvenOptimal, Cbc_isProvenInfeasible,
//   Cbc_isContinuousUnbounded, Cbc_isSecondsLimitReached,
//   Cbc_bestSolution, Cbc_getColSolution, Cbc_getBestPossibleObjValue,
//   Cbc_getNodeCount, and Cbc_deleteModel (through a unique_ptr).
// Preconditions CBC does not check itself are checked here before the call:
// at least one column (Cbc_solve on an empty model is not defined; such a
// model is solved here), matrix entries without duplicates or NaN, infinite
// bounds passed as DBL_MAX (CoinUtils' COIN_DBL_MAX), a parameter value CBC
// parses (printed with %.17g).
//
//===----------------------------------------------------------------------===//

#include "loom/Solver/ILP.h"

#include "llvm/ADT/STLExtras.h"
#include "llvm/Support/FormatVariadic.h"
#include "llvm/Support/raw_ostream.h"

#include <coin/Cbc_C_Interface.h>

#include <algorithm>
#include <cfloat>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <map>
#include <memory>

namespace loom::solver {

char ILPError::ID = 0;

void ILPError::log(llvm::raw_ostream &os) const { os << message; }

llvm::StringRef stringifySolveStatus(SolveStatus status) {
  switch (status) {
  case SolveStatus::Optimal:
    return "optimal";
  case SolveStatus::FeasibleWithGap:
    return "feasible with gap";
  }
  llvm_unreachable("unknown SolveStatus");
}

llvm::StringRef stringifyILPFailure(ILPFailure failure) {
  switch (failure) {
  case ILPFailure::Infeasible:
    return "infeasible";
  case ILPFailure::Unbounded:
    return "unbounded";
  case ILPFailure::TimeLimitWithoutSolution:
    return "time limit without solution";
  case ILPFailure::SolverFailed:
    return "solver failed";
  case ILPFailure::InvalidModel:
    return "invalid model";
  }
  llvm_unreachable("unknown ILPFailure");
}

std::optional<ILPFailure> takeILPFailure(llvm::Error error) {
  std::optional<ILPFailure> failure;
  llvm::handleAllErrors(
      std::move(error), [&](const ILPError &e) { failure = e.kind(); },
      [](const llvm::ErrorInfoBase &) {});
  return failure;
}

static llvm::Error failed(ILPFailure failure, const llvm::Twine &message) {
  return llvm::make_error<ILPError>(failure, message.str());
}

//===----------------------------------------------------------------------===//
// The model
//===----------------------------------------------------------------------===//

int ILP::addVariable(VarKind kind, double lower, double upper, double objective,
                     llvm::StringRef name) {
  if (kind == VarKind::Binary) {
    lower = std::max(lower, 0.0);
    upper = std::min(upper, 1.0);
  }
  variables.push_back({kind, lower, upper, objective, name.str()});
  return numVariables() - 1;
}

int ILP::addRow(llvm::ArrayRef<std::pair<int, double>> terms, double lower,
                double upper) {
  std::map<int, double> merged;
  for (auto [index, coefficient] : terms) {
    assert(index >= 0 && index < numVariables() && "row names no variable");
    merged[index] += coefficient;
  }
  Row row;
  row.lower = lower;
  row.upper = upper;
  for (auto [index, coefficient] : merged)
    if (coefficient != 0)
      row.terms.push_back({index, coefficient});
  rows.push_back(std::move(row));
  return numRows() - 1;
}

void ILP::fix(int index, double value) {
  assert(index >= 0 && index < numVariables() && "no such variable");
  variables[index].lower = variables[index].upper = value;
}

llvm::Error ILP::verify() const {
  for (auto [i, v] : llvm::enumerate(variables)) {
    if (std::isnan(v.lower) || std::isnan(v.upper) || std::isnan(v.objective))
      return failed(ILPFailure::InvalidModel,
                    llvm::formatv("variable {0} has a NaN bound or cost", i));
    if (std::isinf(v.objective))
      return failed(ILPFailure::InvalidModel,
                    llvm::formatv("variable {0} has an infinite cost", i));
    double lower = v.lower, upper = v.upper;
    if (v.kind != VarKind::Continuous) {
      lower = std::ceil(lower - 1e-9);
      upper = std::floor(upper + 1e-9);
    }
    if (lower > upper)
      return failed(ILPFailure::InvalidModel,
                    llvm::formatv("variable {0} has empty bounds [{1}, {2}]", i,
                                  v.lower, v.upper));
  }
  for (auto [i, row] : llvm::enumerate(rows)) {
    if (std::isnan(row.lower) || std::isnan(row.upper) || row.lower > row.upper)
      return failed(ILPFailure::InvalidModel,
                    llvm::formatv("row {0} has bounds [{1}, {2}]", i, row.lower,
                                  row.upper));
    for (auto [index, coefficient] : row.terms)
      if (!std::isfinite(coefficient))
        return failed(
            ILPFailure::InvalidModel,
            llvm::formatv("row {0} has coefficient {1}", i, coefficient));
  }
  return llvm::Error::success();
}

double ILP::objectiveAt(llvm::ArrayRef<double> values) const {
  double sum = 0;
  for (auto [v, x] : llvm::zip_equal(variables, values))
    sum += v.objective * x;
  return sum;
}

double ILP::maxViolation(llvm::ArrayRef<double> values) const {
  auto below = [](double x, double bound) {
    return std::isinf(bound) ? 0.0
                             : (bound - x) / std::max(1.0, std::fabs(bound));
  };
  double worst = 0;
  for (auto [v, x] : llvm::zip_equal(variables, values)) {
    worst = std::max({worst, below(x, v.lower), below(-x, -v.upper)});
    if (v.kind != VarKind::Continuous)
      worst = std::max(worst, std::fabs(x - std::round(x)));
  }
  for (const Row &row : rows) {
    double activity = 0;
    for (auto [index, coefficient] : row.terms)
      activity += coefficient * values[index];
    worst = std::max(
        {worst, below(activity, row.lower), below(-activity, -row.upper)});
  }
  return worst;
}

//===----------------------------------------------------------------------===//
// Solving
//===----------------------------------------------------------------------===//

namespace {

struct ModelDeleter {
  void operator()(Cbc_Model *model) const { Cbc_deleteModel(model); }
};
using ModelPtr = std::unique_ptr<Cbc_Model, ModelDeleter>;

double toCoin(double bound) {
  return std::isinf(bound) ? std::copysign(DBL_MAX, bound) : bound;
}

void setParameter(Cbc_Model *model, const char *name, double value) {
  char text[64];
  std::snprintf(text, sizeof(text), "%.17g", value);
  Cbc_setParameter(model, name, text);
}

/// Without columns the model is its rows' bounds against 0.
llvm::Expected<ILPSolution> solveEmpty(const ILP &ilp) {
  for (int i = 0; i < ilp.numRows(); ++i)
    if (ilp.row(i).lower > 0 || ilp.row(i).upper < 0)
      return failed(ILPFailure::Infeasible,
                    llvm::formatv("ILP is infeasible: row {0} excludes 0 and "
                                  "the model has no variables",
                                  i));
  return ILPSolution{};
}

/// Loads `ilp` into a fresh CBC model.
ModelPtr load(const ILP &ilp) {
  int numCols = ilp.numVariables(), numRows = ilp.numRows();
  // Column-compressed matrix from the rows (rows hold no duplicate index).
  std::vector<std::vector<std::pair<int, double>>> columns(numCols);
  for (int r = 0; r < numRows; ++r)
    for (auto [index, coefficient] : ilp.row(r).terms)
      columns[index].push_back({r, coefficient});
  std::vector<CoinBigIndex> start{0};
  std::vector<int> index;
  std::vector<double> value, colLower, colUpper, objective;
  for (int c = 0; c < numCols; ++c) {
    for (auto [r, coefficient] : columns[c]) {
      index.push_back(r);
      value.push_back(coefficient);
    }
    start.push_back(static_cast<CoinBigIndex>(index.size()));
    const Variable &v = ilp.variable(c);
    colLower.push_back(toCoin(v.lower));
    colUpper.push_back(toCoin(v.upper));
    objective.push_back(v.objective);
  }
  std::vector<double> rowLower, rowUpper;
  for (int r = 0; r < numRows; ++r) {
    rowLower.push_back(toCoin(ilp.row(r).lower));
    rowUpper.push_back(toCoin(ilp.row(r).upper));
  }

  ModelPtr model(Cbc_newModel());
  Cbc_loadProblem(model.get(), numCols, numRows, start.data(), index.data(),
                  value.data(), colLower.data(), colUpper.data(),
                  objective.data(), rowLower.data(), rowUpper.data());
  for (int c = 0; c < numCols; ++c)
    if (ilp.variable(c).kind != VarKind::Continuous)
      Cbc_setInteger(model.get(), c);
  return model;
}

} // namespace

llvm::Expected<ILPSolution> solve(const ILP &ilp, const SolveOptions &options) {
  if (llvm::Error error = ilp.verify())
    return std::move(error);
  if (!(options.timeLimitSeconds > 0) || !(options.relativeGap >= 0) ||
      options.threads < 1)
    return failed(ILPFailure::InvalidModel,
                  llvm::formatv("bad solve options: time limit {0} s, "
                                "relative gap {1}, {2} threads",
                                options.timeLimitSeconds, options.relativeGap,
                                options.threads));
  if (ilp.numVariables() == 0)
    return solveEmpty(ilp);

  auto begin = std::chrono::steady_clock::now();
  ModelPtr model = load(ilp);
  Cbc_Model *m = model.get();
  Cbc_setLogLevel(m, options.log ? 1 : 0);
  // CBC's default clock is CPU time; a planner's budget is wall time.
  Cbc_setParameter(m, "timeMode", "elapsed");
  if (std::isfinite(options.timeLimitSeconds))
    setParameter(m, "sec", options.timeLimitSeconds);
  setParameter(m, "ratioGap", options.relativeGap);
  setParameter(m, "threads", options.threads);
  Cbc_solve(m);

  int status = Cbc_status(m), secondary = Cbc_secondaryStatus(m);
  auto describe = [&] {
    return llvm::formatv("CBC status {0}, secondary status {1}", status,
                         secondary)
        .str();
  };
  if (Cbc_isProvenInfeasible(m))
    return failed(ILPFailure::Infeasible,
                  "ILP is infeasible (CBC proved no point satisfies every "
                  "row and bound)");
  if (Cbc_isContinuousUnbounded(m))
    return failed(ILPFailure::Unbounded,
                  "ILP is unbounded (its linear relaxation is)");

  // Cbc_bestSolution is the incumbent of the branch and bound; a model
  // without integer variables is an LP whose solution is the column one.
  bool hasIntegers = false;
  for (int c = 0; c < ilp.numVariables(); ++c)
    hasIntegers |= ilp.variable(c).kind != VarKind::Continuous;
  const double *found = Cbc_bestSolution(m);
  if (!found && !hasIntegers && Cbc_isProvenOptimal(m))
    found = Cbc_getColSolution(m);
  if (!found) {
    if (secondary == 4 || Cbc_isSecondsLimitReached(m))
      return failed(ILPFailure::TimeLimitWithoutSolution,
                    llvm::formatv("CBC found no solution within the time "
                                  "limit of {0} s",
                                  options.timeLimitSeconds));
    return failed(ILPFailure::SolverFailed,
                  "CBC stopped without a solution (" + describe() + ")");
  }

  ILPSolution solution;
  solution.values.assign(found, found + ilp.numVariables());
  for (int c = 0; c < ilp.numVariables(); ++c)
    if (ilp.variable(c).kind != VarKind::Continuous)
      solution.values[c] = std::round(solution.values[c]);
  double violation = ilp.maxViolation(solution.values);
  if (violation > 1e-6)
    return failed(ILPFailure::SolverFailed,
                  llvm::formatv("CBC returned a point that violates the model "
                                "by {0} ({1})",
                                violation, describe()));
  solution.objective = ilp.objectiveAt(solution.values);
  bool proven = status == 0 && Cbc_isProvenOptimal(m);
  solution.bestBound =
      proven ? solution.objective
             : std::min(solution.objective, Cbc_getBestPossibleObjValue(m));
  // With a nonzero ratioGap CBC calls a solution within the gap optimal.
  bool withinGap = solution.objective - solution.bestBound <=
                   1e-9 * std::max(1.0, std::fabs(solution.objective));
  if (proven && options.relativeGap > 0 && secondary == 2) {
    solution.bestBound =
        std::min(solution.objective, Cbc_getBestPossibleObjValue(m));
    withinGap = false;
  }
  solution.status =
      proven && withinGap ? SolveStatus::Optimal : SolveStatus::FeasibleWithGap;
  solution.nodes = Cbc_getNodeCount(m);
  solution.seconds =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - begin)
          .count();
  return solution;
}

} // namespace loom::solver
