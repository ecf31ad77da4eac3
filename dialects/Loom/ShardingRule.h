//===- ShardingRule.h - Factor-based sharding rules of ops ------*- C++ -*-===//
//
// An op's sharding rule, in the spirit of Shardy's OpShardingRule: the op is
// seen as a loop nest over *factors*; every operand and result dimension is
// a product of factors (major to minor). Which factors may be split, and
// what splitting them costs, is all the sharding planner needs to know.
//
//===----------------------------------------------------------------------===//

#ifndef LOOM_DIALECT_SHARDINGRULE_H
#define LOOM_DIALECT_SHARDINGRULE_H

#include "mlir/Dialect/Shard/IR/ShardOps.h"
#include "mlir/IR/Operation.h"
#include "mlir/Support/LLVM.h"
#include "llvm/ADT/SmallVector.h"

#include <string>

namespace loom {

/// What splitting a factor over a mesh axis means.
enum class FactorKind {
  /// Every result maps the factor: splitting it splits those results and
  /// needs no communication inside the op.
  Parallel,
  /// Some result does not map the factor: splitting it leaves partial values
  /// in those results, combined with the rule's reduction kind.
  Reduction,
  /// The factor must stay whole on every device.
  Whole,
};

/// The factors one tensor dimension is made of, major to minor. A dimension
/// of size 1 maps to no factor.
using DimMapping = llvm::SmallVector<int64_t, 2>;
/// The mapping of every dimension of one tensor.
using TensorMapping = llvm::SmallVector<DimMapping, 4>;

/// The sharding rule of one op for its current shapes.
class OpShardingRule {
public:
  /// Returned by `addFactor` for a factor of size 1, which is never split
  /// and therefore not recorded; mapping helpers drop it.
  static constexpr int64_t kNoFactor = -1;

  /// Adds a factor of `size`; `whole` marks it as never splittable. Returns
  /// its index, or kNoFactor when `size` is 1.
  int64_t addFactor(int64_t size, bool whole = false);
  /// Adds one factor per dimension of `shape`.
  llvm::SmallVector<int64_t> addFactors(llvm::ArrayRef<int64_t> shape,
                                        bool whole = false);
  /// Marks a factor (if it exists) as never splittable.
  void setWhole(int64_t factor);

  /// Appends the mapping of the next operand / result. Entries equal to
  /// kNoFactor are dropped from each dimension.
  void addOperand(llvm::ArrayRef<DimMapping> dims);
  void addResult(llvm::ArrayRef<DimMapping> dims);

  /// Maps a tensor of `shape` onto `factors` aligned at the last dimension
  /// (numpy broadcasting): dimension i of a rank-r tensor takes factor
  /// factors[n - r + i] unless the dimension has size 1.
  TensorMapping alignRight(llvm::ArrayRef<int64_t> shape,
                           llvm::ArrayRef<int64_t> factors) const;
  /// Maps dimension i of a tensor onto factors[i].
  static TensorMapping alignLeft(llvm::ArrayRef<int64_t> shape,
                                 llvm::ArrayRef<int64_t> factors);

  int64_t getNumFactors() const { return factorSizes.size(); }
  int64_t getFactorSize(int64_t factor) const { return factorSizes[factor]; }
  /// Whole if marked so; otherwise Parallel when every result maps the
  /// factor and Reduction when some result does not.
  FactorKind getFactorKind(int64_t factor) const;
  bool mapsFactor(const TensorMapping &tensor, int64_t factor) const;

  llvm::ArrayRef<TensorMapping> getOperands() const { return operands; }
  llvm::ArrayRef<TensorMapping> getResults() const { return results; }

  /// How partial results of reduction factors are combined.
  mlir::shard::ReductionKind getReductionKind() const { return reductionKind; }
  void setReductionKind(mlir::shard::ReductionKind kind) {
    reductionKind = kind;
  }

  /// Checks the rule against the op's operand and result types: one mapping
  /// per tensor and per dimension, every dimension the product of its
  /// factors, every factor used, no factor twice in one tensor.
  mlir::LogicalResult
  verify(mlir::TypeRange operandTypes, mlir::TypeRange resultTypes,
         llvm::function_ref<mlir::InFlightDiagnostic()> emitError) const;

  /// Prints the rule in Shardy's notation with letters for factors, e.g.
  /// `([i, k], [k, j]) -> ([i, j]) {i=4, j=16, k=8} reduction={k}`. A
  /// dimension made of several factors prints them side by side (`[i, jk]`),
  /// a size-1 dimension prints `1`.
  void print(llvm::raw_ostream &os) const;
  std::string str() const;

private:
  llvm::SmallVector<int64_t> factorSizes;
  llvm::SmallVector<bool> factorWhole;
  llvm::SmallVector<TensorMapping> operands;
  llvm::SmallVector<TensorMapping> results;
  mlir::shard::ReductionKind reductionKind = mlir::shard::ReductionKind::Sum;
};

/// The C++ side of the ODS trait Loom_Linear (ShardingRuleInterface.td): the
/// op is linear in all its tensor operands jointly.
template <typename ConcreteType>
class Linear : public mlir::OpTrait::TraitBase<ConcreteType, Linear> {};

/// The rule of an op whose operands and results all align with `shape` at
/// their last dimension (elementwise ops with broadcasting, normalizations,
/// optimizer updates): one factor per dimension of `shape`, those of
/// `wholeDims` (indices into `shape`) never split.
OpShardingRule getAlignedRule(mlir::Operation *op,
                              llvm::ArrayRef<int64_t> shape,
                              llvm::ArrayRef<int64_t> wholeDims = {});

/// The rule of a reduction of operand 0 over `dims`: reduced factors leave
/// partial values combined by `kind`.
OpShardingRule getReduceRule(mlir::Operation *op, llvm::ArrayRef<int64_t> dims,
                             mlir::shard::ReductionKind kind);

} // namespace loom

#endif // LOOM_DIALECT_SHARDINGRULE_H
