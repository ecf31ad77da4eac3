//===- Elementwise.cpp - Pointwise ops, activations and dropout -----------===//
//
// Binary arithmetic with numpy broadcasting, unary math, casts, the GELU and
// SiLU activations with their gradients, and dropout with its gradient.
// Casts compute nothing: the driver rounds every result to its type in the
// F32 mode, which is exactly what a cast does.
//
//===----------------------------------------------------------------------===//

#include "DevicePosition.h"
#include "Kernels.h"

#include "dialects/Loom/LoomOps.h"
#include "loom/DropoutMask.h"

#include <cmath>

using namespace mlir;

namespace loom::interp {

/// `fn(lhs, rhs)` on the operands broadcast to the result's shape.
template <typename Fn>
static Tensor binary(Value result, const Tensor &lhs, const Tensor &rhs,
                     Fn fn) {
  std::vector<double> a = broadcastTo(lhs, shapeOf(result));
  std::vector<double> b = broadcastTo(rhs, shapeOf(result));
  for (size_t e = 0; e < a.size(); ++e)
    a[e] = fn(a[e], b[e]);
  return floatsLike(result, std::move(a));
}

/// `fn(x)` for every element of `x`.
template <typename Fn>
static Tensor unary(Value result, const Tensor &x, Fn fn) {
  std::vector<double> y(x.f().size());
  for (size_t e = 0; e < y.size(); ++e)
    y[e] = fn(x.f()[e]);
  return floatsLike(result, std::move(y));
}

/// `fn(dy, x)` for every pair of elements: the gradient of an activation.
template <typename Fn>
static Tensor pointwiseGrad(Value result, const Tensor &dy, const Tensor &x,
                            Fn derivative) {
  std::vector<double> dx(x.f().size());
  for (size_t e = 0; e < dx.size(); ++e)
    dx[e] = dy.f()[e] * derivative(x.f()[e]);
  return floatsLike(result, std::move(dx));
}

//===----------------------------------------------------------------------===//
// Activations
//===----------------------------------------------------------------------===//

/// GPT-2's gelu_new: 0.5 x (1 + tanh(sqrt(2/pi) (x + 0.044715 x^3))).
constexpr double kGeluScale = 0.7978845608028654; // sqrt(2 / pi)
constexpr double kGeluCubic = 0.044715;

static double gelu(double x) {
  return 0.5 * x * (1.0 + std::tanh(kGeluScale * (x + kGeluCubic * x * x * x)));
}

/// d/dx of gelu: 0.5 (1 + t) + 0.5 x (1 - t^2) sqrt(2/pi) (1 + 3 * 0.044715
/// x^2), with t the tanh above.
static double geluDerivative(double x) {
  double t = std::tanh(kGeluScale * (x + kGeluCubic * x * x * x));
  return 0.5 * (1.0 + t) + 0.5 * x * (1.0 - t * t) * kGeluScale *
                               (1.0 + 3.0 * kGeluCubic * x * x);
}

/// The exact GELU, x Phi(x) = 0.5 x erfc(-x / sqrt(2)): erfc keeps the
/// relative precision of the small values at negative x, where 1 + erf
/// cancels.
static double geluErf(double x) { return 0.5 * x * std::erfc(-x * M_SQRT1_2); }

/// Phi(x) + x phi(x), phi the standard normal density.
static double geluErfDerivative(double x) {
  return 0.5 * std::erfc(-x * M_SQRT1_2) +
         x * std::exp(-0.5 * x * x) * (0.5 * M_2_SQRTPI * M_SQRT1_2);
}

static double sigmoid(double x) { return 1.0 / (1.0 + std::exp(-x)); }

/// silu = x sigmoid(x); its derivative is s (1 + x (1 - s)), s = sigmoid(x).
static double silu(double x) { return x * sigmoid(x); }

static double siluDerivative(double x) {
  double s = sigmoid(x);
  return s * (1.0 + x * (1.0 - s));
}

//===----------------------------------------------------------------------===//
// Dropout
//===----------------------------------------------------------------------===//

/// `x` times the mask of DropoutMask.h, kept elements scaled by
/// 1 / (1 - rate). `dropout` and `dropout_grad` both apply it: the op is
/// linear in `x`, so its gradient applies the same mask to `dy`. On a
/// shard (`loom.mask_split_axes`), element e draws at its global index.
template <typename DropoutLikeOp>
static llvm::Expected<Results>
applyDropoutMask(DropoutLikeOp op, const Tensor &x, const Tensor &step) {
  auto global = maskIndices(op, x.shape());
  if (!global)
    return global.takeError();
  double rate = op.getRate().convertToDouble();
  double scale = 1.0 / (1.0 - rate);
  uint64_t stepValue = static_cast<uint64_t>(scalarInt(step));
  std::vector<double> y(x.f().size());
  for (size_t e = 0; e < y.size(); ++e) {
    uint64_t index = global->empty() ? e : (*global)[e];
    y[e] = dropoutKeeps(op.getSeed(), op.getKey(), stepValue, index, rate)
               ? x.f()[e] * scale
               : 0.0;
  }
  return Results{floatsLike(op->getResult(0), std::move(y))};
}

//===----------------------------------------------------------------------===//
// Registration
//===----------------------------------------------------------------------===//

void addElementwiseKernels(KernelTable &table) {
  table.add<AddOp>([](AddOp op, Operands in) {
    return binary(op, *in[0], *in[1], [](double a, double b) { return a + b; });
  });
  table.add<SubOp>([](SubOp op, Operands in) {
    return binary(op, *in[0], *in[1], [](double a, double b) { return a - b; });
  });
  table.add<MulOp>([](MulOp op, Operands in) {
    return binary(op, *in[0], *in[1], [](double a, double b) { return a * b; });
  });
  table.add<DivOp>([](DivOp op, Operands in) {
    return binary(op, *in[0], *in[1], [](double a, double b) { return a / b; });
  });

  table.add<NegOp>([](NegOp op, Operands in) {
    return unary(op, *in[0], [](double x) { return -x; });
  });
  table.add<ExpOp>([](ExpOp op, Operands in) {
    return unary(op, *in[0], [](double x) { return std::exp(x); });
  });
  table.add<LogOp>([](LogOp op, Operands in) {
    return unary(op, *in[0], [](double x) { return std::log(x); });
  });
  table.add<SqrtOp>([](SqrtOp op, Operands in) {
    return unary(op, *in[0], [](double x) { return std::sqrt(x); });
  });
  table.add<RsqrtOp>([](RsqrtOp op, Operands in) {
    return unary(op, *in[0], [](double x) { return 1.0 / std::sqrt(x); });
  });
  table.add<TanhOp>([](TanhOp op, Operands in) {
    return unary(op, *in[0], [](double x) { return std::tanh(x); });
  });
  table.add<CastOp>(
      [](CastOp op, Operands in) { return floatsLike(op, in[0]->f()); });

  table.add<GeluOp>(
      [](GeluOp op, Operands in) { return unary(op, *in[0], gelu); });
  table.add<GeluGradOp>([](GeluGradOp op, Operands in) {
    return pointwiseGrad(op, *in[0], *in[1], geluDerivative);
  });
  table.add<GeluErfOp>(
      [](GeluErfOp op, Operands in) { return unary(op, *in[0], geluErf); });
  table.add<GeluErfGradOp>([](GeluErfGradOp op, Operands in) {
    return pointwiseGrad(op, *in[0], *in[1], geluErfDerivative);
  });
  table.add<SiluOp>(
      [](SiluOp op, Operands in) { return unary(op, *in[0], silu); });
  table.add<SiluGradOp>([](SiluGradOp op, Operands in) {
    return pointwiseGrad(op, *in[0], *in[1], siluDerivative);
  });

  table.add<DropoutOp>([](DropoutOp op, Operands in) {
    return applyDropoutMask(op, *in[0], *in[1]);
  });
  table.add<DropoutGradOp>([](DropoutGradOp op, Operands in) {
    return applyDropoutMask(op, *in[0], *in[1]);
  });
}

} // namespace loom::interp
