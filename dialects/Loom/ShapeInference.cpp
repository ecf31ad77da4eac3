//===- ShapeInference.cpp - Result types of loom ops ----------------------===//

#include "dialects/Loom/ShapeInference.h"

#include "mlir/IR/Operation.h"
#include "llvm/ADT/STLExtras.h"
#include "llvm/ADT/SmallSet.h"
#include "llvm/Support/raw_ostream.h"

#include <cstdio>

using namespace mlir;

namespace loom {

/// Formats a shape as `2x16x768` in messages.
static std::string shapeText(ArrayRef<int64_t> shape) {
  std::string text;
  llvm::raw_string_ostream os(text);
  llvm::interleave(shape, os, [&](int64_t d) { os << d; }, "x");
  return text;
}

static std::string shapeOf(Type type) {
  auto shape = cast<RankedTensorType>(type).getShape();
  return shape.empty() ? "scalar" : shapeText(shape);
}

/// Emits an error when there is an emitter; always returns failure.
static InFlightDiagnostic fail(EmitErrorFn emitError) {
  if (emitError)
    return emitError();
  return InFlightDiagnostic();
}

FailureOr<RankedTensorType> inferBroadcastType(Type lhs, Type rhs,
                                               EmitErrorFn emitError) {
  auto lhsType = cast<RankedTensorType>(lhs);
  auto rhsType = cast<RankedTensorType>(rhs);
  if (lhsType.getElementType() != rhsType.getElementType()) {
    fail(emitError) << "operands have different element types: "
                    << lhsType.getElementType() << " and "
                    << rhsType.getElementType();
    return failure();
  }
  int64_t rank = std::max(lhsType.getRank(), rhsType.getRank());
  SmallVector<int64_t> shape(rank);
  for (int64_t i = 0; i < rank; ++i) {
    int64_t li = lhsType.getRank() - rank + i,
            ri = rhsType.getRank() - rank + i;
    int64_t l = li >= 0 ? lhsType.getDimSize(li) : 1;
    int64_t r = ri >= 0 ? rhsType.getDimSize(ri) : 1;
    if (l != r && l != 1 && r != 1) {
      fail(emitError) << "shapes " << shapeOf(lhs) << " and " << shapeOf(rhs)
                      << " do not broadcast: " << l << " vs " << r
                      << " at dimension " << i - rank
                      << " (counted from the last)";
      return failure();
    }
    shape[i] = l == 1 ? r : l;
  }
  return lhsType.clone(shape);
}

FailureOr<RankedTensorType> inferTransposeType(Type x,
                                               ArrayRef<int64_t> permutation,
                                               EmitErrorFn emitError) {
  auto type = cast<RankedTensorType>(x);
  if (static_cast<int64_t>(permutation.size()) != type.getRank()) {
    fail(emitError) << "permutation has " << permutation.size()
                    << " entries for an operand of rank " << type.getRank();
    return failure();
  }
  SmallVector<bool> seen(permutation.size(), false);
  SmallVector<int64_t> shape;
  for (int64_t p : permutation) {
    if (p < 0 || p >= type.getRank() || seen[p]) {
      fail(emitError) << "permutation is not a permutation of 0.."
                      << type.getRank() - 1;
      return failure();
    }
    seen[p] = true;
    shape.push_back(type.getDimSize(p));
  }
  return type.clone(shape);
}

FailureOr<RankedTensorType> inferConcatType(TypeRange inputs, int64_t axis,
                                            EmitErrorFn emitError) {
  if (inputs.empty()) {
    fail(emitError) << "needs at least one input";
    return failure();
  }
  auto first = cast<RankedTensorType>(inputs.front());
  if (axis < 0 || axis >= first.getRank()) {
    fail(emitError) << "axis " << axis << " is out of range for rank "
                    << first.getRank();
    return failure();
  }
  SmallVector<int64_t> shape(first.getShape());
  shape[axis] = 0;
  for (auto [index, input] : llvm::enumerate(inputs)) {
    auto type = cast<RankedTensorType>(input);
    if (type.getElementType() != first.getElementType() ||
        type.getRank() != first.getRank()) {
      fail(emitError) << "input #" << index
                      << " differs from input #0 in rank or element type";
      return failure();
    }
    for (int64_t d = 0; d < type.getRank(); ++d) {
      if (d != axis && type.getDimSize(d) != first.getDimSize(d)) {
        fail(emitError) << "input #" << index << " has " << type.getDimSize(d)
                        << " elements in dimension " << d << ", input #0 has "
                        << first.getDimSize(d);
        return failure();
      }
    }
    shape[axis] += type.getDimSize(axis);
  }
  return first.clone(shape);
}

FailureOr<RankedTensorType> inferReduceType(Type x, ArrayRef<int64_t> dims,
                                            bool keepDims,
                                            EmitErrorFn emitError) {
  auto type = cast<RankedTensorType>(x);
  llvm::SmallSet<int64_t, 4> reduced;
  for (int64_t d : dims) {
    if (d < 0 || d >= type.getRank()) {
      fail(emitError) << "reduced dimension " << d
                      << " is out of range for rank " << type.getRank();
      return failure();
    }
    if (!reduced.insert(d).second) {
      fail(emitError) << "reduced dimension " << d << " is listed twice";
      return failure();
    }
  }
  SmallVector<int64_t> shape;
  for (int64_t d = 0; d < type.getRank(); ++d) {
    if (!reduced.contains(d))
      shape.push_back(type.getDimSize(d));
    else if (keepDims)
      shape.push_back(1);
  }
  return type.clone(shape);
}

FailureOr<RankedTensorType> inferMatmulType(Type lhs, Type rhs,
                                            bool transposeLhs,
                                            bool transposeRhs,
                                            EmitErrorFn emitError) {
  auto lhsType = cast<RankedTensorType>(lhs);
  auto rhsType = cast<RankedTensorType>(rhs);
  if (lhsType.getRank() < 2 || rhsType.getRank() < 2) {
    fail(emitError) << "operands need rank >= 2, got ranks "
                    << lhsType.getRank() << " and " << rhsType.getRank();
    return failure();
  }
  if (lhsType.getElementType() != rhsType.getElementType()) {
    fail(emitError) << "operands have different element types: "
                    << lhsType.getElementType() << " and "
                    << rhsType.getElementType();
    return failure();
  }
  ArrayRef<int64_t> ls = lhsType.getShape(), rs = rhsType.getShape();
  ArrayRef<int64_t> lhsBatch = ls.drop_back(2), rhsBatch = rs.drop_back(2);
  if (!rhsBatch.empty() && rhsBatch != lhsBatch) {
    fail(emitError) << "rhs batch dimensions [" << shapeText(rhsBatch)
                    << "] differ from lhs batch dimensions ["
                    << shapeText(lhsBatch) << "]";
    return failure();
  }
  int64_t m = transposeLhs ? ls.back() : ls[ls.size() - 2];
  int64_t lhsK = transposeLhs ? ls[ls.size() - 2] : ls.back();
  int64_t rhsK = transposeRhs ? rs.back() : rs[rs.size() - 2];
  int64_t n = transposeRhs ? rs[rs.size() - 2] : rs.back();
  if (lhsK != rhsK) {
    fail(emitError) << "contraction sizes differ: lhs has " << lhsK
                    << ", rhs has " << rhsK;
    return failure();
  }
  SmallVector<int64_t> shape(lhsBatch);
  shape.append({m, n});
  return lhsType.clone(shape);
}

FailureOr<SmallVector<Type, 2>> inferAttentionTypes(Type q, Type k, Type v,
                                                    bool causal,
                                                    EmitErrorFn emitError) {
  auto qType = cast<RankedTensorType>(q), kType = cast<RankedTensorType>(k),
       vType = cast<RankedTensorType>(v);
  if (qType.getRank() != 4 || kType.getRank() != 4 || vType.getRank() != 4) {
    fail(emitError) << "q, k and v must be [batch, seq, heads, head_dim]";
    return failure();
  }
  if (kType != vType) {
    fail(emitError) << "k and v have different types: " << kType << " and "
                    << vType;
    return failure();
  }
  if (qType.getElementType() != kType.getElementType()) {
    fail(emitError) << "q and k have different element types";
    return failure();
  }
  int64_t batch = qType.getDimSize(0), seq = qType.getDimSize(1),
          heads = qType.getDimSize(2), headDim = qType.getDimSize(3);
  int64_t kvHeads = kType.getDimSize(2);
  if (kType.getDimSize(0) != batch || kType.getDimSize(3) != headDim) {
    fail(emitError) << "k is " << shapeOf(k) << ", which does not match q "
                    << shapeOf(q) << " in batch or head_dim";
    return failure();
  }
  if (kvHeads <= 0 || heads % kvHeads != 0) {
    fail(emitError) << kvHeads << " key/value heads do not divide " << heads
                    << " query heads";
    return failure();
  }
  // A causal attention's queries are its keys' positions, or on a device
  // of a context-parallel program one slice of them.
  if (causal && (seq <= 0 || kType.getDimSize(1) % seq != 0)) {
    fail(emitError)
        << "causal attention needs as many keys as queries (or, on a "
           "device, a multiple of them), got "
        << seq << " and " << kType.getDimSize(1);
    return failure();
  }
  Type lse = RankedTensorType::get({batch, heads, seq},
                                   Float32Type::get(q.getContext()));
  return SmallVector<Type, 2>{qType, lse};
}

FailureOr<RankedTensorType> inferEmbeddingType(Type table, Type ids,
                                               EmitErrorFn emitError) {
  auto tableType = cast<RankedTensorType>(table);
  if (tableType.getRank() != 2) {
    fail(emitError) << "table must be [vocab, dim], got " << shapeOf(table);
    return failure();
  }
  SmallVector<int64_t> shape(cast<RankedTensorType>(ids).getShape());
  shape.push_back(tableType.getDimSize(1));
  return tableType.clone(shape);
}

LogicalResult verifyNormParam(Type x, Type param, StringRef name,
                              EmitErrorFn emitError) {
  auto xType = cast<RankedTensorType>(x);
  auto paramType = cast<RankedTensorType>(param);
  if (xType.getRank() < 1)
    return fail(emitError) << "input must have rank >= 1";
  if (paramType.getRank() != 1 ||
      paramType.getDimSize(0) != xType.getShape().back())
    return fail(emitError) << name << " must be [" << xType.getShape().back()
                           << "] (the normalized dimension), got "
                           << shapeOf(param);
  if (paramType.getElementType() != xType.getElementType())
    return fail(emitError) << name << " has element type "
                           << paramType.getElementType() << ", input has "
                           << xType.getElementType();
  return success();
}

LogicalResult verifyLabels(Type logits, Type labels, EmitErrorFn emitError) {
  auto logitsType = cast<RankedTensorType>(logits);
  if (logitsType.getRank() < 2)
    return fail(emitError) << "logits must be [tokens..., vocab], got "
                           << shapeOf(logits);
  if (cast<RankedTensorType>(labels).getShape() !=
      logitsType.getShape().drop_back())
    return fail(emitError) << "labels " << shapeOf(labels)
                           << " must have the shape of logits "
                           << shapeOf(logits) << " without the vocabulary";
  return success();
}

LogicalResult verifyDropoutRate(Operation *op, StringRef name, double rate) {
  if (!(rate >= 0.0 && rate < 1.0))
    return op->emitOpError()
           << name << " " << formatNumber(rate) << " is not in [0, 1)";
  return success();
}

std::string formatNumber(double value) {
  char text[32];
  std::snprintf(text, sizeof(text), "%g", value);
  return text;
}

LogicalResult verifyInferredTypes(Operation *op, TypeRange inferred) {
  for (auto [index, stated, expected] :
       llvm::enumerate(op->getResultTypes(), inferred))
    if (stated != expected)
      return op->emitOpError() << "result #" << index << " has type " << stated
                               << ", the operands give " << expected;
  return success();
}

LogicalResult verifyInferredTypes(Operation *op,
                                  FailureOr<RankedTensorType> inferred) {
  if (failed(inferred))
    return failure();
  Type type = *inferred;
  return verifyInferredTypes(op, TypeRange(type));
}

LogicalResult verifyInferredTypes(Operation *op,
                                  FailureOr<SmallVector<Type, 2>> inferred) {
  if (failed(inferred))
    return failure();
  return verifyInferredTypes(op, TypeRange(*inferred));
}

LogicalResult verifyBroadcastingOp(Operation *op) {
  return verifyInferredTypes(
      op, inferBroadcastType(op->getOperand(0).getType(),
                             op->getOperand(1).getType(),
                             [&] { return op->emitOpError(); }));
}

} // namespace loom
