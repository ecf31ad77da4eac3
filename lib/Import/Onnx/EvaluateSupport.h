//===- EvaluateSupport.h - Helpers of the node evaluators -------*- C++ -*-===//
//
// Shared by Evaluate.cpp (dispatch, elementwise), EvaluateValues.cpp
// (constants, masks, products, reductions) and EvaluateLayout.cpp
// (reshapes, slices, gathers): shape arithmetic, broadcasting, and host
// tensors built element by element.
//
//===----------------------------------------------------------------------===//

#ifndef LOOM_LIB_IMPORT_ONNX_EVALUATESUPPORT_H
#define LOOM_LIB_IMPORT_ONNX_EVALUATESUPPORT_H

#include "Evaluate.h"

#include <functional>

namespace loom::onnx_import::detail {

llvm::Error failure(const llvm::Twine &message);
llvm::Expected<int64_t> normalizeAxis(int64_t axis, int64_t rank,
                                      llvm::StringRef what = "axis");
/// Row-major strides of `shape`.
llvm::SmallVector<int64_t, 4> stridesOf(llvm::ArrayRef<int64_t> shape);
/// numpy broadcasting of two shapes.
llvm::Expected<llvm::SmallVector<int64_t, 4>>
broadcast(llvm::ArrayRef<int64_t> a, llvm::ArrayRef<int64_t> b);
/// For each element of `out`, the index of the element of a tensor of
/// `shape` that broadcasts to it.
std::vector<int64_t> broadcastIndices(llvm::ArrayRef<int64_t> shape,
                                      llvm::ArrayRef<int64_t> out);
/// Rounds a folded float to its dtype's precision.
double roundTo(DType type, double value);
/// A zero tensor.
HostTensor makeLike(DType dtype, llvm::ArrayRef<int64_t> shape);
void setValue(HostTensor &t, int64_t e, double value);
/// A copy of element `from` of `in` to element `to` of `out`, exact for
/// int64.
void copyElement(const HostTensor &in, int64_t from, HostTensor &out,
                 int64_t to);
/// The data of a constant operand, or an error naming its role.
llvm::Expected<const HostTensor *>
constantOperand(llvm::ArrayRef<Operand> inputs, size_t index,
                llvm::StringRef role);
llvm::Expected<llvm::SmallVector<int64_t, 4>>
intsOf(llvm::ArrayRef<Operand> inputs, size_t index, llvm::StringRef role);
/// Evaluation with one result of `type` whose element e is element
/// `source(e)` of operand 0 (reshapes, transposes, slices, ...).
llvm::Expected<Evaluation>
rearrange(llvm::ArrayRef<Operand> in, ValueType type, bool wantData,
          const std::function<int64_t(int64_t)> &source);
/// Gathers a tensor's elements by a per-element source index.
HostTensor gatherElements(const HostTensor &in, DType dtype,
                          llvm::ArrayRef<int64_t> shape,
                          const std::function<int64_t(int64_t)> &source);

/// One result holding `t`.
llvm::Expected<Evaluation> single(HostTensor t);

llvm::Expected<Evaluation> evaluateConstant(const OnnxNode &node);
llvm::Expected<Evaluation> evaluateShape(const OnnxNode &node,
                                         llvm::ArrayRef<Operand> in);
llvm::Expected<Evaluation> evaluateConstantOfShape(const OnnxNode &node,
                                                   llvm::ArrayRef<Operand> in,
                                                   bool wantData);
llvm::Expected<Evaluation> evaluateRange(llvm::ArrayRef<Operand> in,
                                         bool wantData);
llvm::Expected<Evaluation>
evaluateTrilu(const OnnxNode &node, llvm::ArrayRef<Operand> in, bool wantData);
llvm::Expected<Evaluation> evaluateWhere(llvm::ArrayRef<Operand> in,
                                         bool wantData);
llvm::Expected<Evaluation>
evaluateCast(const OnnxNode &node, llvm::ArrayRef<Operand> in, bool wantData);
llvm::Expected<Evaluation> evaluateMatMul(llvm::ArrayRef<Operand> in,
                                          bool wantData);
llvm::Expected<Evaluation>
evaluateReduce(const OnnxNode &node, llvm::ArrayRef<Operand> in, bool wantData);

llvm::Expected<Evaluation> evaluateReshape(const OnnxNode &node,
                                           llvm::ArrayRef<Operand> in,
                                           bool wantData);
llvm::Expected<Evaluation> evaluateTranspose(const OnnxNode &node,
                                             llvm::ArrayRef<Operand> in,
                                             bool wantData);
llvm::Expected<Evaluation> evaluateSqueezeLike(const OnnxNode &node,
                                               llvm::ArrayRef<Operand> in,
                                               bool wantData);
llvm::Expected<Evaluation> evaluateSlice(llvm::ArrayRef<Operand> in,
                                         bool wantData);
llvm::Expected<Evaluation>
evaluateSplit(const OnnxNode &node, llvm::ArrayRef<Operand> in, bool wantData);
llvm::Expected<Evaluation>
evaluateConcat(const OnnxNode &node, llvm::ArrayRef<Operand> in, bool wantData);
llvm::Expected<Evaluation> evaluateExpand(llvm::ArrayRef<Operand> in,
                                          bool wantData);
llvm::Expected<Evaluation>
evaluateGather(const OnnxNode &node, llvm::ArrayRef<Operand> in, bool wantData);

} // namespace loom::onnx_import::detail

#endif // LOOM_LIB_IMPORT_ONNX_EVALUATESUPPORT_H
