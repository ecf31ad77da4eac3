//===- ShardingRule.cpp - Factor-based sharding rules of ops --------------===//

#include "dialects/Loom/ShardingRule.h"

#include "mlir/IR/BuiltinTypes.h"
#include "mlir/IR/Diagnostics.h"
#include "llvm/ADT/STLExtras.h"
#include "llvm/Support/raw_ostream.h"

using namespace mlir;

namespace loom {

int64_t OpShardingRule::addFactor(int64_t size, bool whole) {
  if (size == 1)
    return kNoFactor;
  factorSizes.push_back(size);
  factorWhole.push_back(whole);
  return factorSizes.size() - 1;
}

SmallVector<int64_t> OpShardingRule::addFactors(ArrayRef<int64_t> shape,
                                                bool whole) {
  return llvm::map_to_vector(
      shape, [&](int64_t size) { return addFactor(size, whole); });
}

void OpShardingRule::setWhole(int64_t factor) {
  if (factor != kNoFactor)
    factorWhole[factor] = true;
}

static TensorMapping withoutNoFactor(ArrayRef<DimMapping> dims) {
  TensorMapping tensor;
  for (const DimMapping &dim : dims) {
    DimMapping &kept = tensor.emplace_back();
    for (int64_t factor : dim)
      if (factor != OpShardingRule::kNoFactor)
        kept.push_back(factor);
  }
  return tensor;
}

void OpShardingRule::addOperand(ArrayRef<DimMapping> dims) {
  operands.push_back(withoutNoFactor(dims));
}

void OpShardingRule::addResult(ArrayRef<DimMapping> dims) {
  results.push_back(withoutNoFactor(dims));
}

TensorMapping OpShardingRule::alignRight(ArrayRef<int64_t> shape,
                                         ArrayRef<int64_t> factors) const {
  TensorMapping tensor;
  int64_t shift = factors.size() - shape.size();
  for (auto [i, size] : llvm::enumerate(shape)) {
    int64_t factor = factors[shift + i];
    if (size == 1 || factor == kNoFactor)
      tensor.push_back({});
    else
      tensor.push_back({factor});
  }
  return tensor;
}

TensorMapping OpShardingRule::alignLeft(ArrayRef<int64_t> shape,
                                        ArrayRef<int64_t> factors) {
  TensorMapping tensor;
  for (size_t i = 0; i < shape.size(); ++i)
    tensor.push_back({factors[i]});
  return tensor;
}

bool OpShardingRule::mapsFactor(const TensorMapping &tensor,
                                int64_t factor) const {
  return llvm::any_of(tensor, [&](const DimMapping &dim) {
    return llvm::is_contained(dim, factor);
  });
}

FactorKind OpShardingRule::getFactorKind(int64_t factor) const {
  if (factorWhole[factor])
    return FactorKind::Whole;
  bool inEveryResult = llvm::all_of(
      results, [&](const TensorMapping &t) { return mapsFactor(t, factor); });
  return inEveryResult ? FactorKind::Parallel : FactorKind::Reduction;
}

/// Checks one side (operands or results) of a rule against its types.
static LogicalResult
verifyTensors(ArrayRef<TensorMapping> mappings, TypeRange types,
              ArrayRef<int64_t> factorSizes, StringRef side,
              SmallVectorImpl<bool> &used,
              function_ref<InFlightDiagnostic()> emitError) {
  if (mappings.size() != types.size())
    return emitError() << "sharding rule maps " << mappings.size() << " "
                       << side << "s but the op has " << types.size();
  for (auto [index, mapping, type] : llvm::enumerate(mappings, types)) {
    auto shaped = cast<RankedTensorType>(type);
    if (static_cast<int64_t>(mapping.size()) != shaped.getRank())
      return emitError() << "sharding rule gives " << side << " #" << index
                         << " " << mapping.size() << " dimensions, its rank is "
                         << shaped.getRank();
    SmallVector<bool> seen(factorSizes.size(), false);
    for (auto [dim, factors] : llvm::enumerate(mapping)) {
      int64_t product = 1;
      for (int64_t factor : factors) {
        if (factor < 0 || factor >= static_cast<int64_t>(factorSizes.size()))
          return emitError()
                 << "sharding rule names an unknown factor " << factor;
        if (seen[factor])
          return emitError() << "sharding rule maps factor " << factor
                             << " twice in " << side << " #" << index;
        seen[factor] = used[factor] = true;
        product *= factorSizes[factor];
      }
      if (product != shaped.getDimSize(dim))
        return emitError() << "sharding rule makes dimension " << dim << " of "
                           << side << " #" << index << " " << product
                           << " elements, it has " << shaped.getDimSize(dim);
    }
  }
  return success();
}

LogicalResult
OpShardingRule::verify(TypeRange operandTypes, TypeRange resultTypes,
                       function_ref<InFlightDiagnostic()> emitError) const {
  SmallVector<bool> used(factorSizes.size(), false);
  if (failed(verifyTensors(operands, operandTypes, factorSizes, "operand", used,
                           emitError)) ||
      failed(verifyTensors(results, resultTypes, factorSizes, "result", used,
                           emitError)))
    return failure();
  for (auto [factor, isUsed] : llvm::enumerate(used))
    if (!isUsed)
      return emitError() << "sharding rule factor " << factor
                         << " maps no dimension";
  return success();
}

/// Letters for factors in the printed form; later ones get `f<N>`.
static std::string factorName(int64_t factor) {
  static const char letters[] = "ijklmnopqrstuvwxyzabcdefgh";
  if (factor < 26)
    return std::string(1, letters[factor]);
  return "f" + std::to_string(factor);
}

static void printTensors(llvm::raw_ostream &os,
                         ArrayRef<TensorMapping> tensors) {
  os << "(";
  llvm::interleaveComma(tensors, os, [&](const TensorMapping &tensor) {
    os << "[";
    llvm::interleaveComma(tensor, os, [&](const DimMapping &dim) {
      if (dim.empty())
        os << "1";
      for (int64_t factor : dim)
        os << factorName(factor);
    });
    os << "]";
  });
  os << ")";
}

void OpShardingRule::print(llvm::raw_ostream &os) const {
  printTensors(os, operands);
  os << " -> ";
  printTensors(os, results);
  os << " {";
  llvm::interleaveComma(
      llvm::seq<int64_t>(0, getNumFactors()), os, [&](int64_t factor) {
        os << factorName(factor) << "=" << factorSizes[factor];
      });
  os << "}";
  auto printKind = [&](FactorKind kind, StringRef label) {
    SmallVector<int64_t> ofKind;
    for (int64_t factor = 0; factor < getNumFactors(); ++factor)
      if (getFactorKind(factor) == kind)
        ofKind.push_back(factor);
    if (ofKind.empty())
      return;
    os << " " << label << "={";
    llvm::interleaveComma(ofKind, os,
                          [&](int64_t factor) { os << factorName(factor); });
    os << "}";
  };
  printKind(FactorKind::Reduction, "reduction");
  if (reductionKind != mlir::shard::ReductionKind::Sum &&
      llvm::any_of(llvm::seq<int64_t>(0, getNumFactors()), [&](int64_t f) {
        return getFactorKind(f) == FactorKind::Reduction;
      }))
    os << "(" << mlir::shard::stringifyReductionKind(reductionKind) << ")";
  printKind(FactorKind::Whole, "whole");
}

static ArrayRef<int64_t> shapeOf(Type type) {
  return cast<RankedTensorType>(type).getShape();
}

OpShardingRule getAlignedRule(Operation *op, ArrayRef<int64_t> shape,
                              ArrayRef<int64_t> wholeDims) {
  OpShardingRule rule;
  SmallVector<int64_t> factors = rule.addFactors(shape);
  for (int64_t dim : wholeDims)
    rule.setWhole(factors[dim]);
  for (Type type : op->getOperandTypes())
    rule.addOperand(rule.alignRight(shapeOf(type), factors));
  for (Type type : op->getResultTypes())
    rule.addResult(rule.alignRight(shapeOf(type), factors));
  return rule;
}

OpShardingRule getReduceRule(Operation *op, ArrayRef<int64_t> dims,
                             mlir::shard::ReductionKind kind) {
  OpShardingRule rule;
  ArrayRef<int64_t> shape = shapeOf(op->getOperand(0).getType());
  SmallVector<int64_t> factors = rule.addFactors(shape);
  rule.addOperand(OpShardingRule::alignLeft(shape, factors));
  TensorMapping result;
  for (auto [dim, factor] : llvm::enumerate(factors)) {
    if (!llvm::is_contained(dims, static_cast<int64_t>(dim)))
      result.push_back({factor});
    else if (shapeOf(op->getResult(0).getType()).size() == shape.size())
      result.push_back({}); // keep_dims: a size-1 dimension
  }
  rule.addResult(result);
  rule.setReductionKind(kind);
  return rule;
}

std::string OpShardingRule::str() const {
  std::string text;
  llvm::raw_string_ostream os(text);
  print(os);
  return text;
}

} // namespace loom
