//===- Optimizer.cu - Fused AdamW and SGD updates -------------------------===//
//
// The formulas of torch.optim.AdamW (decoupled weight decay, bias-corrected
// moments) and torch.optim.SGD, elementwise over one parameter, as
// runtime/cpu/kernels/Optimizer.cpp computes them. The step is a device
// scalar, so each block works out the bias corrections itself. The moments
// stay f32; the parameter and its gradient may be bf16 (f32 arithmetic).
// One call per parameter, as the ABI has it; a multi-tensor launch needs a
// list of parameters in one call, which the lowering does not emit yet.
//
//===----------------------------------------------------------------------===//

#include "Device.cuh"

namespace loom::cuda {
namespace {

struct AdamW {
  float lr, beta1, beta2, eps, weightDecay;
  double beta1Double, beta2Double;
};

///   m' = beta1 m + (1 - beta1) g,   v' = beta2 v + (1 - beta2) g^2
///   p' = p - lr (weight_decay p + (m' / (1 - beta1^t)) /
///                                 (sqrt(v' / (1 - beta2^t)) + eps))
__global__ void adamw_update_kernel(AdamW h, Indices step, Floats p, Floats g,
                                    const float *m, const float *v, Floats newP,
                                    float *newM, float *newV, int64_t n,
                                    long long *error) {
  int64_t stepValue = step[0];
  if (stepValue < 1) {
    if (blockIdx.x == 0 && threadIdx.x == 0)
      recordError(error, kAdamWStep, 0, stepValue, 1);
    return;
  }
  double t = static_cast<double>(stepValue);
  float correction1 = static_cast<float>(1.0 - pow(h.beta1Double, t));
  float correction2 = static_cast<float>(1.0 - pow(h.beta2Double, t));
  float oneMinusBeta1 = static_cast<float>(1.0 - h.beta1Double);
  float oneMinusBeta2 = static_cast<float>(1.0 - h.beta2Double);
  LOOM_GRID_STRIDE(e, n) {
    float grad = g[e], param = p[e];
    float mNew = h.beta1 * m[e] + oneMinusBeta1 * grad;
    float vNew = h.beta2 * v[e] + oneMinusBeta2 * grad * grad;
    float update = (mNew / correction1) / (sqrtf(vNew / correction2) + h.eps);
    newP.store(e, param - h.lr * (h.weightDecay * param + update));
    newM[e] = mNew;
    newV[e] = vNew;
  }
}

/// p' = p - lr (g + weight_decay p).
__global__ void sgd_update_kernel(float lr, float weightDecay, Floats p,
                                  Floats g, Floats newP, int64_t n) {
  LOOM_GRID_STRIDE(e, n) {
    float param = p[e];
    newP.store(e, param - lr * (g[e] + weightDecay * param));
  }
}

} // namespace
} // namespace loom::cuda

using namespace loom::cuda;

extern "C" {

/// Operands param, grad, m, v, step (0-d, 1-based); results param', m', v'.
/// A step below 1 is a device error (the step lives on the device), the
/// results left unwritten.
int32_t loom_cuda_adamw_update(const loom_call_frame *, void *const *buffers,
                               const int64_t *meta,
                               loom_cuda_context *context) {
  KernelArgs args(buffers, meta);
  if (int32_t status = args.expect("adamw_update", 5, 3, /*notFloat=*/1u << 4))
    return status;
  const View &p = args.in(0), &g = args.in(1), &m = args.in(2), &v = args.in(3),
             &step = args.in(4);
  AdamW h;
  h.lr = static_cast<float>(args.real());
  h.beta1Double = args.real();
  h.beta2Double = args.real();
  h.beta1 = static_cast<float>(h.beta1Double);
  h.beta2 = static_cast<float>(h.beta2Double);
  h.eps = static_cast<float>(args.real());
  h.weightDecay = static_cast<float>(args.real());
  if (!step.isIndex())
    return fail("loom_cuda_adamw_update: a step of element type %d",
                static_cast<int>(step.dtype));
  for (const View *state : {&m, &v, &args.out(1), &args.out(2)})
    if (state->dtype != LOOM_DTYPE_F32)
      return fail("loom_cuda_adamw_update: the moments must be f32");
  int64_t n = p.numElements();
  for (const View *view :
       {&g, &m, &v, &args.out(0), &args.out(1), &args.out(2)})
    if (view->numElements() != n)
      return fail("loom_cuda_adamw_update: the operands and results differ "
                  "in size");
  if (n == 0)
    return 0;
  adamw_update_kernel<<<blocksFor(n), kThreads, 0, context->stream>>>(
      h, indices(step), floats(p), floats(g),
      static_cast<const float *>(m.data), static_cast<const float *>(v.data),
      floats(args.out(0)), static_cast<float *>(args.out(1).data),
      static_cast<float *>(args.out(2).data), n, context->deviceError);
  return checkLaunch("adamw_update");
}

/// Operands param, grad; result param'.
int32_t loom_cuda_sgd_update(const loom_call_frame *, void *const *buffers,
                             const int64_t *meta, loom_cuda_context *context) {
  KernelArgs args(buffers, meta);
  if (int32_t status = args.expect("sgd_update", 2, 1))
    return status;
  float lr = static_cast<float>(args.real());
  float weightDecay = static_cast<float>(args.real());
  int64_t n = args.in(0).numElements();
  if (args.in(1).numElements() != n || args.out(0).numElements() != n)
    return fail("loom_cuda_sgd_update: param, grad and result differ in size");
  if (n == 0)
    return 0;
  sgd_update_kernel<<<blocksFor(n), kThreads, 0, context->stream>>>(
      lr, weightDecay, floats(args.in(0)), floats(args.in(1)),
      floats(args.out(0)), n);
  return checkLaunch("sgd_update");
}

} // extern "C"
