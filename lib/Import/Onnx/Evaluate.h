//===- Evaluate.h - Types and folding of ONNX nodes -------------*- C++ -*-===//
//
// The importer specializes a graph to static shapes before it builds any
// IR: every node's result types follow from its operands' types (and, for
// Reshape, Slice, Expand, ..., from operands that must be constants), and a
// node whose operands are all known constants is evaluated on the host.
// That folds the shape arithmetic PyTorch's exporters write (Shape, Gather,
// Concat, Range, Equal, Where, ConstantOfShape, Expand, ...), causal masks
// and rotary tables.
//
//===----------------------------------------------------------------------===//

#ifndef LOOM_LIB_IMPORT_ONNX_EVALUATE_H
#define LOOM_LIB_IMPORT_ONNX_EVALUATE_H

#include "OnnxGraph.h"

namespace loom::onnx_import {

/// A value's static type.
struct ValueType {
  DType dtype = DType::Unsupported;
  llvm::SmallVector<int64_t, 4> shape;

  int64_t numElements() const;
  bool operator==(const ValueType &other) const {
    return dtype == other.dtype && shape == other.shape;
  }
};

/// One operand of a node: absent (an omitted optional input), or its type
/// and, when known at import time, its data.
struct Operand {
  bool present = false;
  ValueType type;
  const HostTensor *data = nullptr;
};

struct Evaluation {
  llvm::SmallVector<ValueType, 2> types;
  /// The results' data, when requested and every operand is known.
  std::optional<llvm::SmallVector<HostTensor, 2>> data;
};

/// Whether the importer knows `opType` (types, and folding or lowering).
bool isSupportedOp(llvm::StringRef opType);

/// Whether the op only moves or selects elements (reshapes, transposes,
/// slices, casts between float types, ...): applied to a parameter it
/// stays the parameter, not a constant.
bool isLayoutOp(llvm::StringRef opType);

/// Whether `evaluate` can compute the op's results on the host.
bool isFoldableOp(llvm::StringRef opType);

/// The result types of `node`, and with `wantData` the results themselves
/// when every present operand is known. Fails with a message (without the
/// node's name, which the caller adds) when an operand that must be a
/// constant is not, or shapes and attributes do not fit.
llvm::Expected<Evaluation> evaluate(const OnnxNode &node,
                                    llvm::ArrayRef<Operand> inputs,
                                    int64_t opset, bool wantData);

/// The permutation of a Transpose node (its attribute, or reversed dims).
llvm::SmallVector<int64_t, 4> transposePermutation(const OnnxNode &node,
                                                   int64_t rank);

/// Axes given by attribute (older opsets) or by a constant input
/// (`inputIndex`, newer opsets), normalized to [0, rank); `std::nullopt`
/// when neither is given.
llvm::Expected<std::optional<llvm::SmallVector<int64_t, 4>>>
nodeAxes(const OnnxNode &node, llvm::ArrayRef<Operand> inputs,
         size_t inputIndex, int64_t rank);

/// The box a Slice node takes: per dimension the first index, the step
/// and the size (ONNX's clamping of negative and out-of-range indices).
struct SliceBox {
  llvm::SmallVector<int64_t, 4> starts, steps, sizes;
};
llvm::Expected<SliceBox> sliceBox(llvm::ArrayRef<Operand> inputs,
                                  llvm::ArrayRef<int64_t> shape);

/// Fails when `node` reads past a table of positions shorter than the
/// sequence: a Gather of known rows (a learned position embedding) or a
/// Slice of a known table up to `seqLen` (a fixed causal mask, a rotary
/// table), as a graph exported for 64 positions does under --seq-len 100.
/// `tableKnown`: the first input is known at import (a constant or a
/// parameter), not an activation. The message names the table (the node's
/// first input).
llvm::Error checkSequenceFits(const OnnxNode &node,
                              llvm::ArrayRef<Operand> inputs, int64_t seqLen,
                              bool tableKnown);

/// The shortest decimal that rounds to the same float32 as `value`: the
/// number a user wrote (1e-5) for an attribute stored as a float
/// (9.99999974737875e-06).
double shortestDecimal(double value);

/// A shape as text: "[2, 16, 64]".
std::string shapeText(llvm::ArrayRef<int64_t> shape);

} // namespace loom::onnx_import

#endif // LOOM_LIB_IMPORT_ONNX_EVALUATE_H
