//===- ILP.h - Mixed-integer linear programs solved by CBC ------*- C++ -*-===//
//
// A small builder for minimization MILPs (binary, integer and continuous
// variables with bounds, linear rows with lower and upper bounds) and one
// entry point that solves them with CBC through its C API. Plain data: no
// MLIR, no CBC types in this header.
//
// Outcomes a caller must handle are distinct: a solution (optimal, or
// feasible with a gap when a limit stopped the search) is the value of the
// Expected; an infeasible model, an unbounded one, a time limit reached with
// no solution, CBC giving up, or a malformed model is an ILPError whose
// kind() says which.
//
//===----------------------------------------------------------------------===//

#ifndef LOOM_SOLVER_ILP_H
#define LOOM_SOLVER_ILP_H

#include "llvm/ADT/ArrayRef.h"
#include "llvm/ADT/StringRef.h"
#include "llvm/Support/Error.h"

#include <limits>
#include <optional>
#include <string>
#include <utility>
#include <vector>

namespace loom::solver {

inline constexpr double kInfinity = std::numeric_limits<double>::infinity();

enum class VarKind { Binary, Integer, Continuous };

/// One variable: lower <= x <= upper (either may be infinite), `objective`
/// its coefficient in the minimized objective.
struct Variable {
  VarKind kind = VarKind::Continuous;
  double lower = 0;
  double upper = kInfinity;
  double objective = 0;
  std::string name;
};

/// One row: lower <= sum(coefficient * x[index]) <= upper. Terms are sorted
/// by index with duplicates merged (CBC rejects duplicate entries).
struct Row {
  std::vector<std::pair<int, double>> terms;
  double lower = -kInfinity;
  double upper = kInfinity;
};

/// A minimization MILP. Indices returned by add* are dense from 0.
class ILP {
public:
  /// Adds a variable and returns its index. Binary variables get bounds
  /// [max(lower, 0), min(upper, 1)].
  int addVariable(VarKind kind, double lower, double upper, double objective,
                  llvm::StringRef name = "");
  int addBinary(double objective, llvm::StringRef name = "") {
    return addVariable(VarKind::Binary, 0, 1, objective, name);
  }
  /// Adds lower <= sum(terms) <= upper and returns the row index.
  int addRow(llvm::ArrayRef<std::pair<int, double>> terms, double lower,
             double upper);

  /// Fixes variable `index` to `value` (both bounds).
  void fix(int index, double value);

  int numVariables() const { return static_cast<int>(variables.size()); }
  int numRows() const { return static_cast<int>(rows.size()); }
  const Variable &variable(int index) const { return variables[index]; }
  const Row &row(int index) const { return rows[index]; }

  /// Problems in the model CBC would misread: NaN anywhere, -inf objective
  /// coefficients, lower > upper, an integer variable whose bounds hold no
  /// integer. Success when there are none.
  llvm::Error verify() const;

  /// The objective at `values` (one per variable).
  double objectiveAt(llvm::ArrayRef<double> values) const;
  /// The largest violation of a bound, a row or (for integer variables)
  /// integrality at `values`, scaled by max(1, |bound|).
  double maxViolation(llvm::ArrayRef<double> values) const;

private:
  std::vector<Variable> variables;
  std::vector<Row> rows;
};

struct SolveOptions {
  /// Wall-clock limit of the search; infinity for none.
  double timeLimitSeconds = kInfinity;
  /// Stop when (objective - bound) / |objective| falls below this (CBC's
  /// ratioGap); 0 proves optimality.
  double relativeGap = 0;
  int threads = 1;
  /// Let CBC print its log on stdout (silent otherwise).
  bool log = false;
};

enum class SolveStatus {
  /// Proven optimal (within relativeGap when it is 0; see FeasibleWithGap).
  Optimal,
  /// A solution, but the search stopped on a limit (time, or relativeGap)
  /// before proving it optimal; `bestBound` bounds the optimum from below.
  FeasibleWithGap,
};
llvm::StringRef stringifySolveStatus(SolveStatus status);

struct ILPSolution {
  SolveStatus status = SolveStatus::Optimal;
  /// One value per variable; integer and binary ones rounded to integers.
  std::vector<double> values;
  /// The objective at `values`.
  double objective = 0;
  /// CBC's lower bound on the optimum (equals objective when optimal).
  double bestBound = 0;
  /// Branch-and-bound nodes CBC explored.
  int nodes = 0;
  double seconds = 0;

  bool isOne(int index) const { return values[index] > 0.5; }
};

enum class ILPFailure {
  /// The model has no feasible point (CBC proved it).
  Infeasible,
  /// The LP relaxation is unbounded.
  Unbounded,
  /// The time limit passed before any feasible point was found.
  TimeLimitWithoutSolution,
  /// CBC stopped for another reason (numerical trouble, an internal limit)
  /// without a usable solution, or returned one that violates the model.
  SolverFailed,
  /// ILP::verify rejected the model; CBC was not called.
  InvalidModel,
};
llvm::StringRef stringifyILPFailure(ILPFailure failure);

/// Why solve() returned no solution. Match it with llvm::handleErrors.
class ILPError : public llvm::ErrorInfo<ILPError> {
public:
  static char ID;
  ILPError(ILPFailure failure, std::string message)
      : failure(failure), message(std::move(message)) {}
  ILPFailure kind() const { return failure; }
  void log(llvm::raw_ostream &os) const override;
  std::error_code convertToErrorCode() const override {
    return llvm::inconvertibleErrorCode();
  }

private:
  ILPFailure failure;
  std::string message;
};

/// The kind of `error` if it is an ILPError (consuming it), nullopt
/// otherwise (the error is consumed too).
std::optional<ILPFailure> takeILPFailure(llvm::Error error);

/// Solves `ilp` with CBC. Thread-safe: each call owns its CBC model.
llvm::Expected<ILPSolution> solve(const ILP &ilp,
                                  const SolveOptions &options = {});

} // namespace loom::solver

#endif // LOOM_SOLVER_ILP_H
