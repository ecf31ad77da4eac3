//===- Optimizer.cpp - Fused AdamW and SGD updates ------------------------===//
//
// The formulas of torch.optim.AdamW (decoupled weight decay, bias-corrected
// moments) and torch.optim.SGD (L2 weight decay), elementwise over one
// parameter. A bf16 or f16 gradient is already widened: the interpreter
// holds every float as double.
//
//===----------------------------------------------------------------------===//

#include "Kernels.h"

#include "dialects/Loom/LoomOps.h"

#include <cmath>

using namespace mlir;

namespace loom::interp {

///   m' = beta1 m + (1 - beta1) g,   v' = beta2 v + (1 - beta2) g^2
///   p' = p - lr (weight_decay p + (m' / (1 - beta1^t)) /
///                                 (sqrt(v' / (1 - beta2^t)) + eps))
static llvm::Expected<Results> adamW(AdamWUpdateOp op, Operands in) {
  const Tensor &p = *in[0], &g = *in[1], &m = *in[2], &v = *in[3];
  int64_t t = scalarInt(*in[4]);
  if (t < 1)
    return opError(op, "step " + llvm::Twine(t) + " is not 1-based");
  double lr = op.getLr().convertToDouble();
  double beta1 = op.getBeta1().convertToDouble();
  double beta2 = op.getBeta2().convertToDouble();
  double eps = op.getEps().convertToDouble();
  double weightDecay = op.getWeightDecay().convertToDouble();
  double correction1 = 1.0 - std::pow(beta1, static_cast<double>(t));
  double correction2 = 1.0 - std::pow(beta2, static_cast<double>(t));

  size_t n = p.f().size();
  std::vector<double> newP(n), newM(n), newV(n);
  for (size_t e = 0; e < n; ++e) {
    double grad = g.f()[e];
    newM[e] = beta1 * m.f()[e] + (1.0 - beta1) * grad;
    newV[e] = beta2 * v.f()[e] + (1.0 - beta2) * grad * grad;
    double update =
        (newM[e] / correction1) / (std::sqrt(newV[e] / correction2) + eps);
    newP[e] = p.f()[e] - lr * (weightDecay * p.f()[e] + update);
  }
  return Results{floatsLike(op.getNewParam(), std::move(newP)),
                 floatsLike(op.getNewM(), std::move(newM)),
                 floatsLike(op.getNewV(), std::move(newV))};
}

/// p' = p - lr (g + weight_decay p).
static Tensor sgd(SGDUpdateOp op, const Tensor &p, const Tensor &g) {
  double lr = op.getLr().convertToDouble();
  double weightDecay = op.getWeightDecay().convertToDouble();
  std::vector<double> newP(p.f().size());
  for (size_t e = 0; e < newP.size(); ++e)
    newP[e] = p.f()[e] - lr * (g.f()[e] + weightDecay * p.f()[e]);
  return floatsLike(op, std::move(newP));
}

void addOptimizerKernels(KernelTable &table) {
  table.add<AdamWUpdateOp>(
      [](AdamWUpdateOp op, Operands in) { return adamW(op, in); });
  table.add<SGDUpdateOp>(
      [](SGDUpdateOp op, Operands in) { return sgd(op, *in[0], *in[1]); });
}

} // namespace loom::interp
