//===- MatmulEpilogue.h - What a matmul epilogue takes and gives -*- C++
//-*-===//
//
// matmul's epilogues (loom_cpu_kernels.h) add operands and results to the
// product: a bias, a residual, the pre-activation a gelu gradient is taken
// at; a second result (the sum before a gelu, a bias gradient). The CPU
// and CUDA kernels read that shape from here and check the tensors with
// checkMatmulEpilogue, so both refuse the same calls with the same words.
// Header-only, as KernelMeta.h, for the same reason: errors go into the
// caller's buffer.
//
//===----------------------------------------------------------------------===//

#ifndef LOOM_RUNTIME_COMMON_MATMULEPILOGUE_H
#define LOOM_RUNTIME_COMMON_MATMULEPILOGUE_H

#include "KernelMeta.h"

#include "loom/loom_cpu_kernels.h"

namespace loom::kernels {

/// The operands and results of one epilogue: the index of each operand it
/// adds (-1 without), and what its second result is.
struct EpilogueForm {
  const char *name = "none";
  int operands = 2, results = 1;
  int bias = -1, residual = -1, pre = -1;
  /// gelu of the sum (bias_gelu, bias_gelu_aux), the sum kept as result 0
  /// (bias_gelu_aux).
  bool gelu = false, keepsSum = false;
  /// Result 1 is db [n] (bias_grad: of the rhs; dgelu_bias_grad: of dpre).
  bool biasGrad = false;
};

/// The form of `epilogue`; false when there is no such epilogue.
inline bool epilogueForm(int64_t epilogue, EpilogueForm &form) {
  form = EpilogueForm();
  switch (epilogue) {
  case LOOM_EPILOGUE_NONE:
    return true;
  case LOOM_EPILOGUE_BIAS:
    form = {"bias", 3, 1, 2};
    return true;
  case LOOM_EPILOGUE_BIAS_GELU:
    form = {"bias_gelu", 3, 1, 2};
    form.gelu = true;
    return true;
  case LOOM_EPILOGUE_BIAS_GELU_AUX:
    form = {"bias_gelu_aux", 3, 2, 2};
    form.gelu = form.keepsSum = true;
    return true;
  case LOOM_EPILOGUE_RESIDUAL:
    form = {"residual", 3, 1, -1, 2};
    return true;
  case LOOM_EPILOGUE_BIAS_RESIDUAL:
    form = {"bias_residual", 4, 1, 2, 3};
    return true;
  case LOOM_EPILOGUE_BIAS_GRAD:
    form = {"bias_grad", 2, 2};
    form.biasGrad = true;
    return true;
  case LOOM_EPILOGUE_DGELU_BIAS_GRAD:
    form = {"dgelu_bias_grad", 3, 2, -1, -1, 2};
    form.biasGrad = true;
    return true;
  default:
    return false;
  }
}

/// Whether `a` and `b` have one shape and element type.
inline bool sameTensorType(const View &a, const View &b) {
  if (a.dtype != b.dtype || a.rank != b.rank)
    return false;
  for (int64_t d = 0; d < a.rank; ++d)
    if (a.dims[d] != b.dims[d])
      return false;
  return true;
}

/// Checks a matmul call's epilogue tensors against its product (result 0's
/// shape; result 0 is dpre for dgelu_bias_grad, which has that shape too):
/// the counts, a bias or db [n] and a residual, pre or second gelu result
/// of the product's shape, all of the product's element type, and for
/// bias_grad an untransposed rhs of rank 2. Writes "PREFIX_matmul: ..."
/// into `error` and returns false on a mismatch.
inline bool checkMatmulEpilogue(const KernelArgs &args, int64_t epilogue,
                                bool transposeRhs, const char *prefix,
                                char *error, size_t errorSize) {
  EpilogueForm form;
  if (!epilogueForm(epilogue, form))
    return failWith(error, errorSize, "%s_matmul: unknown epilogue %lld",
                    prefix, static_cast<long long>(epilogue));
  if (args.numOperands() != form.operands || args.numResults() != form.results)
    return failWith(error, errorSize,
                    "%s_matmul: epilogue %s takes %d operands and %d "
                    "results, got %lld and %lld",
                    prefix, form.name, form.operands, form.results,
                    static_cast<long long>(args.numOperands()),
                    static_cast<long long>(args.numResults()));
  const View &product = args.out(0);
  int64_t n = product.rank ? product.dims[product.rank - 1] : 0;
  auto isRow = [&](const View &v) {
    return v.rank == 1 && v.dims[0] == n && v.dtype == product.dtype;
  };
  if (form.bias >= 0 && !isRow(args.in(form.bias)))
    return failWith(error, errorSize,
                    "%s_matmul: the bias must be [%lld] of the result's "
                    "element type (the result's last dimension)",
                    prefix, static_cast<long long>(n));
  if (form.biasGrad && !isRow(args.out(1)))
    return failWith(error, errorSize,
                    "%s_matmul: %s's bias gradient must be [%lld] of the "
                    "result's element type",
                    prefix, form.name, static_cast<long long>(n));
  const View *sameAsProduct[] = {form.residual >= 0 ? &args.in(form.residual)
                                                    : nullptr,
                                 form.pre >= 0 ? &args.in(form.pre) : nullptr,
                                 form.keepsSum ? &args.out(1) : nullptr};
  for (const View *view : sameAsProduct)
    if (view && !sameTensorType(*view, product))
      return failWith(error, errorSize,
                      "%s_matmul: %s's %s must have the result's shape and "
                      "element type",
                      prefix, form.name,
                      view == sameAsProduct[0]   ? "residual"
                      : view == sameAsProduct[1] ? "pre-activation"
                                                 : "two results");
  if (epilogue == LOOM_EPILOGUE_BIAS_GRAD &&
      (transposeRhs || args.in(1).rank != 2))
    return failWith(error, errorSize,
                    "%s_matmul: bias_grad sums the rows of an untransposed "
                    "[k, n] rhs",
                    prefix);
  return true;
}

} // namespace loom::kernels

#endif // LOOM_RUNTIME_COMMON_MATMULEPILOGUE_H
