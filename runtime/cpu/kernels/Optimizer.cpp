//===- Optimizer.cpp - Fused AdamW and SGD updates ------------------------===//
//
// The formulas of torch.optim.AdamW (decoupled weight decay, bias-corrected
// moments) and torch.optim.SGD (L2 weight decay), elementwise over one
// parameter, in the parameter's precision. The gradient has the
// parameter's element type: a bf16 one has no CPU kernel.
//
//===----------------------------------------------------------------------===//

#include "KernelArgs.h"

#include <cmath>
#include <initializer_list>

namespace loom::cpu {
namespace {

struct AdamW {
  double lr, beta1, beta2, eps, weightDecay;
  int64_t step;
};

///   m' = beta1 m + (1 - beta1) g,   v' = beta2 v + (1 - beta2) g^2
///   p' = p - lr (weight_decay p + (m' / (1 - beta1^t)) /
///                                 (sqrt(v' / (1 - beta2^t)) + eps))
template <typename T>
void adamW(const AdamW &h, int64_t n, const T *p, const T *g, const T *m,
           const T *v, T *newP, T *newM, T *newV) {
  double t = static_cast<double>(h.step);
  const T beta1 = static_cast<T>(h.beta1), beta2 = static_cast<T>(h.beta2);
  const T oneMinusBeta1 = static_cast<T>(1.0 - h.beta1);
  const T oneMinusBeta2 = static_cast<T>(1.0 - h.beta2);
  const T correction1 = static_cast<T>(1.0 - std::pow(h.beta1, t));
  const T correction2 = static_cast<T>(1.0 - std::pow(h.beta2, t));
  const T lr = static_cast<T>(h.lr), eps = static_cast<T>(h.eps);
  const T weightDecay = static_cast<T>(h.weightDecay);
  for (int64_t e = 0; e < n; ++e) {
    T grad = g[e];
    T mNew = beta1 * m[e] + oneMinusBeta1 * grad;
    T vNew = beta2 * v[e] + oneMinusBeta2 * grad * grad;
    T update = (mNew / correction1) / (std::sqrt(vNew / correction2) + eps);
    newP[e] = p[e] - lr * (weightDecay * p[e] + update);
    newM[e] = mNew;
    newV[e] = vNew;
  }
}

/// p' = p - lr (g + weight_decay p).
template <typename T>
void sgd(double lrValue, double weightDecayValue, int64_t n, const T *p,
         const T *g, T *newP) {
  const T lr = static_cast<T>(lrValue);
  const T weightDecay = static_cast<T>(weightDecayValue);
  for (int64_t e = 0; e < n; ++e)
    newP[e] = p[e] - lr * (g[e] + weightDecay * p[e]);
}

/// The hyperparameters after the tensors (lr, beta1, beta2, eps,
/// weight_decay); the step comes from its tensor (readStep).
template <Kernel K> AdamW readAdamW(kernels::AttributeReader &args) {
  auto attrs = readAttrs<K>(args);
  AdamW h;
  h.lr = attrs.lr;
  h.beta1 = attrs.beta1;
  h.beta2 = attrs.beta2;
  h.eps = attrs.eps;
  h.weightDecay = attrs.weight_decay;
  h.step = 0;
  return h;
}

/// The 1-based step of a 0-d i32 / i64 tensor into `h`.
int32_t readStep(const char *op, const View &step, AdamW &h) {
  if (step.dtype != LOOM_DTYPE_I32 && step.dtype != LOOM_DTYPE_I64)
    return fail("%s: a step of element type %d", op,
                static_cast<int>(step.dtype));
  h.step = step.index(0);
  if (h.step < 1)
    return fail("%s: step %lld is not 1-based", op,
                static_cast<long long>(h.step));
  return 0;
}

/// One parameter's update, in its element type (f32 or f64).
int32_t updateOne(const char *op, const AdamW &h, const View &p, const View &g,
                  const View &m, const View &v, const View &newP,
                  const View &newM, const View &newV) {
  loom_dtype dtype = p.dtype;
  for (const View *view : {&g, &m, &v, &newP, &newM, &newV})
    if (view->dtype != dtype)
      return fail("%s: param of element type %d, another operand or result "
                  "of %d",
                  op, static_cast<int>(dtype), static_cast<int>(view->dtype));
  int64_t n = p.numElements();
  if (dtype == LOOM_DTYPE_F32)
    adamW<float>(h, n, p.f32(), g.f32(), m.f32(), v.f32(), newP.f32(),
                 newM.f32(), newV.f32());
  else if (dtype == LOOM_DTYPE_F64)
    adamW<double>(h, n, p.f64(), g.f64(), m.f64(), v.f64(), newP.f64(),
                  newM.f64(), newV.f64());
  else
    return fail("%s: element type %d is neither f32 nor f64", op,
                static_cast<int>(dtype));
  return 0;
}

} // namespace
} // namespace loom::cpu

using namespace loom::cpu;

extern "C" {

/// Operands param, grad, m, v, step (0-d, 1-based); results param', m', v'.
int32_t loom_cpu_adamw_update(const loom_call_frame *, void *const *buffers,
                              const int64_t *meta) {
  KernelArgs args(buffers, meta);
  AdamW h = readAdamW<Kernel::adamw_update>(args);
  if (int32_t status = readStep("adamw_update", args.in(4), h))
    return status;
  return updateOne("adamw_update", h, args.in(0), args.in(1), args.in(2),
                   args.in(3), args.out(0), args.out(1), args.out(2));
}

/// Operands param_i, grad_i, m_i, v_i for each parameter, then the step;
/// results param'_i, m'_i, v'_i for each.
int32_t loom_cpu_adamw_update_multi(const loom_call_frame *,
                                    void *const *buffers, const int64_t *meta) {
  TensorList args(buffers, meta);
  int64_t params = args.numResults() / 3;
  if (params < 1 || args.numResults() != 3 * params ||
      args.numOperands() != 4 * params + 1)
    return fail("adamw_update_multi: %lld operands and %lld results, not 4N + "
                "1 and 3N",
                static_cast<long long>(args.numOperands()),
                static_cast<long long>(args.numResults()));
  AdamW h = readAdamW<Kernel::adamw_update_multi>(args);
  if (int32_t status = readStep("adamw_update_multi", args.in(4 * params), h))
    return status;
  for (int64_t i = 0; i < params; ++i) {
    const View &p = args.in(4 * i);
    for (const View *view :
         {&args.in(4 * i + 1), &args.in(4 * i + 2), &args.in(4 * i + 3),
          &args.out(3 * i), &args.out(3 * i + 1), &args.out(3 * i + 2)})
      if (view->numElements() != p.numElements())
        return fail("adamw_update_multi: parameter %lld has tensors of %lld "
                    "and %lld elements",
                    static_cast<long long>(i),
                    static_cast<long long>(p.numElements()),
                    static_cast<long long>(view->numElements()));
    if (int32_t status =
            updateOne("adamw_update_multi", h, p, args.in(4 * i + 1),
                      args.in(4 * i + 2), args.in(4 * i + 3), args.out(3 * i),
                      args.out(3 * i + 1), args.out(3 * i + 2)))
      return status;
  }
  return 0;
}

/// Operands param, grad; result param'.
int32_t loom_cpu_sgd_update(const loom_call_frame *, void *const *buffers,
                            const int64_t *meta) {
  KernelArgs args(buffers, meta);
  const View &p = args.in(0), &g = args.in(1), &out = args.out(0);
  auto attrs = readAttrs<Kernel::sgd_update>(args);
  double lr = attrs.lr, weightDecay = attrs.weight_decay;
  if (g.dtype != p.dtype || out.dtype != p.dtype)
    return fail("sgd_update: param, grad and result have element types %d, "
                "%d and %d",
                static_cast<int>(p.dtype), static_cast<int>(g.dtype),
                static_cast<int>(out.dtype));
  int64_t n = p.numElements();
  if (p.dtype == LOOM_DTYPE_F32)
    sgd<float>(lr, weightDecay, n, p.f32(), g.f32(), out.f32());
  else if (p.dtype == LOOM_DTYPE_F64)
    sgd<double>(lr, weightDecay, n, p.f64(), g.f64(), out.f64());
  else
    return fail("sgd_update: element type %d is neither f32 nor f64",
                static_cast<int>(p.dtype));
  return 0;
}

} // extern "C"
