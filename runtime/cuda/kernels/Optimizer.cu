//===- Optimizer.cu - Fused AdamW and SGD updates -------------------------===//
//
// The formulas of torch.optim.AdamW (decoupled weight decay, bias-corrected
// moments) and torch.optim.SGD, elementwise over one parameter, as
// runtime/cpu/kernels/Optimizer.cpp computes them. The step is a device
// scalar, so each thread works out the bias corrections itself. The moments
// stay f32; the parameter and its gradient may be bf16 (f32 arithmetic).
//
// adamw_update_multi updates many parameters in a few launches, the
// multi-tensor apply of PyTorch's fused optimizers and apex: the host cuts
// each parameter into chunks of kChunk elements, one block per chunk, and
// packs up to kMultiParams parameters and kMultiBlocks blocks into one
// struct passed by value (the kernel's parameter space, under 4 KiB: no
// allocation, no copy), with a table saying which parameter each block
// takes. A parameter whose chunks do not fit in a launch goes on in the
// next. Both AdamW kernels update an element through adamwElement and take
// the step's scalars from adamwStep, so N parameters in one multi call get
// the results of N adamw_update calls bit for bit.
//
//===----------------------------------------------------------------------===//

#include "Device.cuh"

namespace loom::cuda {
namespace {

struct AdamW {
  float lr, beta1, beta2, eps, weightDecay;
  double beta1Double, beta2Double;
};

/// The attributes lr, beta1, beta2, eps, weight_decay of both AdamW ops.
template <Kernel K> AdamW readAdamW(kernels::AttributeReader &args) {
  auto attrs = readAttrs<K>(args);
  AdamW h;
  h.lr = static_cast<float>(attrs.lr);
  h.beta1Double = attrs.beta1;
  h.beta2Double = attrs.beta2;
  h.beta1 = static_cast<float>(h.beta1Double);
  h.beta2 = static_cast<float>(h.beta2Double);
  h.eps = static_cast<float>(attrs.eps);
  h.weightDecay = static_cast<float>(attrs.weight_decay);
  return h;
}

/// One parameter's operands and results (device pointers).
struct AdamWTensors {
  Floats p, g, newP;
  const float *m, *v;
  float *newM, *newV;
};

/// What every element of a step shares: the bias corrections of step t and
/// 1 - beta, in f32.
struct AdamWStep {
  float correction1, correction2, oneMinusBeta1, oneMinusBeta2;
};

/// The scalars of the device step; false when the step is below 1, which
/// block 0 records as `code` (the results are left unwritten).
__device__ __forceinline__ bool adamwStep(const AdamW &h, Indices step,
                                          long long code, long long *error,
                                          AdamWStep &s) {
  int64_t stepValue = step[0];
  if (stepValue < 1) {
    if (blockIdx.x == 0 && threadIdx.x == 0)
      recordError(error, code, 0, stepValue, 1);
    return false;
  }
  double t = static_cast<double>(stepValue);
  s.correction1 = static_cast<float>(1.0 - pow(h.beta1Double, t));
  s.correction2 = static_cast<float>(1.0 - pow(h.beta2Double, t));
  s.oneMinusBeta1 = static_cast<float>(1.0 - h.beta1Double);
  s.oneMinusBeta2 = static_cast<float>(1.0 - h.beta2Double);
  return true;
}

///   m' = beta1 m + (1 - beta1) g,   v' = beta2 v + (1 - beta2) g^2
///   p' = p - lr (weight_decay p + (m' / (1 - beta1^t)) /
///                                 (sqrt(v' / (1 - beta2^t)) + eps))
/// at element `e` of `t`.
__device__ __forceinline__ void adamwElement(const AdamW &h, const AdamWStep &s,
                                             const AdamWTensors &t, int64_t e) {
  float grad = t.g[e], param = t.p[e];
  float mNew = h.beta1 * t.m[e] + s.oneMinusBeta1 * grad;
  float vNew = h.beta2 * t.v[e] + s.oneMinusBeta2 * grad * grad;
  float update = (mNew / s.correction1) / (sqrtf(vNew / s.correction2) + h.eps);
  t.newP.store(e, param - h.lr * (h.weightDecay * param + update));
  t.newM[e] = mNew;
  t.newV[e] = vNew;
}

__global__ void adamw_update_kernel(AdamW h, Indices step, AdamWTensors t,
                                    int64_t n, long long *error) {
  AdamWStep s;
  if (!adamwStep(h, step, kAdamWStep, error, s))
    return;
  LOOM_GRID_STRIDE(e, n) { adamwElement(h, s, t, e); }
}

/// Elements per block of a multi launch (32 per thread): small enough that
/// a layer's parameters fill the GPU, large enough that a block's start-up
/// (the step's two pow) is paid rarely.
constexpr int64_t kChunk = 32 * kThreads;
/// Parameters and blocks per multi launch, bounded by the 4 KiB of kernel
/// parameters (CUDA before 12.1).
constexpr int kMultiParams = 24;
constexpr int kMultiBlocks = 1024;

/// A parameter's place in a multi launch: its blocks are blocks
/// firstBlock, firstBlock + 1, ... of the launch, and take its chunks
/// firstChunk, firstChunk + 1, ... (of kChunk elements; the last one may
/// be short).
struct AdamWSlot {
  AdamWTensors tensors;
  int64_t n;
  int64_t firstChunk;
  int32_t firstBlock;
};

/// Everything a multi launch needs, passed by value.
struct AdamWMultiLaunch {
  AdamW h;
  Indices step;
  long long *error;
  AdamWSlot slots[kMultiParams];
  /// The slot of each block.
  uint8_t slotOfBlock[kMultiBlocks];
};

static_assert(sizeof(AdamWMultiLaunch) <= 4096,
              "AdamWMultiLaunch outgrew 4 KiB");
static_assert(kMultiParams <= 256, "slotOfBlock holds a uint8_t");

/// One chunk of one parameter per block; the step checked as
/// adamw_update_kernel checks it.
__global__ void adamw_update_multi_kernel(AdamWMultiLaunch launch) {
  AdamWStep s;
  if (!adamwStep(launch.h, launch.step, kAdamWMultiStep, launch.error, s))
    return;
  AdamWSlot slot = launch.slots[launch.slotOfBlock[blockIdx.x]];
  int64_t chunk =
      slot.firstChunk + (static_cast<int64_t>(blockIdx.x) - slot.firstBlock);
  int64_t begin = chunk * kChunk;
  int64_t end = begin + kChunk < slot.n ? begin + kChunk : slot.n;
  for (int64_t e = begin + threadIdx.x; e < end; e += blockDim.x)
    adamwElement(launch.h, s, slot.tensors, e);
}

/// p' = p - lr (g + weight_decay p).
__global__ void sgd_update_kernel(float lr, float weightDecay, Floats p,
                                  Floats g, Floats newP, int64_t n) {
  LOOM_GRID_STRIDE(e, n) {
    float param = p[e];
    newP.store(e, param - lr * (g[e] + weightDecay * param));
  }
}

/// The tensors of parameter `i` of an AdamW call: operands 4i .. 4i + 3,
/// results 3i .. 3i + 2 (adamw_update: i = 0).
template <typename Args>
AdamWTensors adamwTensors(const Args &args, int64_t i) {
  return {floats(args.in(4 * i)),
          floats(args.in(4 * i + 1)),
          floats(args.out(3 * i)),
          static_cast<const float *>(args.in(4 * i + 2).data),
          static_cast<const float *>(args.in(4 * i + 3).data),
          static_cast<float *>(args.out(3 * i + 1).data),
          static_cast<float *>(args.out(3 * i + 2).data)};
}

/// Fails unless parameter `i` of adamw_update_multi has param, grad and
/// param' of f32 or bf16, f32 moments, and one element count.
int32_t checkParameter(const TensorList &args, int64_t i) {
  const View *views[7] = {&args.in(4 * i),     &args.in(4 * i + 1),
                          &args.in(4 * i + 2), &args.in(4 * i + 3),
                          &args.out(3 * i),    &args.out(3 * i + 1),
                          &args.out(3 * i + 2)};
  long long index = static_cast<long long>(i);
  for (const View *view : views)
    if (view->rank > kMaxRank)
      return fail("loom_cuda_adamw_update_multi: parameter %lld: a tensor of "
                  "rank %lld, over %d",
                  index, static_cast<long long>(view->rank), kMaxRank);
  for (const View *view : {views[0], views[1], views[4]})
    if (!view->isFloat())
      return fail("loom_cuda_adamw_update_multi: parameter %lld: param, grad "
                  "and param' must be f32 or bf16, not element type %d",
                  index, static_cast<int>(view->dtype));
  for (const View *view : {views[2], views[3], views[5], views[6]})
    if (view->dtype != LOOM_DTYPE_F32)
      return fail("loom_cuda_adamw_update_multi: parameter %lld: the moments "
                  "must be f32",
                  index);
  int64_t n = views[0]->numElements();
  for (const View *view : views)
    if (view->numElements() != n)
      return fail("loom_cuda_adamw_update_multi: parameter %lld: the operands "
                  "and results differ in size (%lld and %lld elements)",
                  index, static_cast<long long>(n),
                  static_cast<long long>(view->numElements()));
  return 0;
}

/// Launches the first `blocks` blocks of `launch`.
int32_t launchMulti(const AdamWMultiLaunch &launch, int blocks,
                    cudaStream_t stream) {
  adamw_update_multi_kernel<<<blocks, kThreads, 0, stream>>>(launch);
  return checkLaunch("adamw_update_multi");
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
  ProfileScope scope(context, "adamw_update");
  KernelArgs args(buffers, meta);
  if (int32_t status = args.expect("adamw_update", 5, 3, /*notFloat=*/1u << 4))
    return status;
  const View &p = args.in(0), &g = args.in(1), &m = args.in(2), &v = args.in(3),
             &step = args.in(4);
  AdamW h = readAdamW<Kernel::adamw_update>(args);
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
      h, indices(step), adamwTensors(args, 0), n, context->deviceError);
  return checkLaunch("adamw_update");
}

/// Operands param_i, grad_i, m_i, v_i of N parameters, then the step (0-d,
/// 1-based); results param'_i, m'_i, v'_i. Each parameter as adamw_update
/// takes it; a step below 1 is a device error, as there.
int32_t loom_cuda_adamw_update_multi(const loom_call_frame *,
                                     void *const *buffers, const int64_t *meta,
                                     loom_cuda_context *context) {
  ProfileScope scope(context, "adamw_update_multi");
  int64_t operands = meta[0], results = meta[1];
  int64_t params = results / 3;
  if (params < 1 || results != 3 * params || operands != 4 * params + 1)
    return fail("loom_cuda_adamw_update_multi: %lld operands and %lld "
                "results, expected 4N + 1 and 3N for N >= 1 parameters",
                static_cast<long long>(operands),
                static_cast<long long>(results));
  TensorList args(buffers, meta);
  AdamW h = readAdamW<Kernel::adamw_update_multi>(args);
  const View &step = args.in(4 * params);
  if (!step.isIndex() || step.rank > kMaxRank || step.numElements() != 1)
    return fail("loom_cuda_adamw_update_multi: the step must be one i32 or "
                "i64, not element type %d of %lld elements",
                static_cast<int>(step.dtype),
                static_cast<long long>(step.numElements()));
  for (int64_t i = 0; i < params; ++i)
    if (int32_t status = checkParameter(args, i))
      return status;

  AdamWMultiLaunch launch = {};
  launch.h = h;
  launch.step = indices(step);
  launch.error = context->deviceError;
  int slots = 0, blocks = 0;
  for (int64_t i = 0; i < params; ++i) {
    int64_t n = args.in(4 * i).numElements();
    int64_t chunks = (n + kChunk - 1) / kChunk;
    for (int64_t chunk = 0; chunk < chunks;) {
      if (slots == kMultiParams || blocks == kMultiBlocks) {
        if (int32_t status = launchMulti(launch, blocks, context->stream))
          return status;
        slots = blocks = 0;
      }
      int64_t take = std::min<int64_t>(chunks - chunk, kMultiBlocks - blocks);
      launch.slots[slots] = {adamwTensors(args, i), n, chunk, blocks};
      std::fill_n(launch.slotOfBlock + blocks, take,
                  static_cast<uint8_t>(slots));
      ++slots;
      blocks += static_cast<int>(take);
      chunk += take;
    }
  }
  if (blocks == 0)
    return 0;
  return launchMulti(launch, blocks, context->stream);
}

/// Operands param, grad; result param'.
int32_t loom_cuda_sgd_update(const loom_call_frame *, void *const *buffers,
                             const int64_t *meta, loom_cuda_context *context) {
  ProfileScope scope(context, "sgd_update");
  KernelArgs args(buffers, meta);
  if (int32_t status = args.expect("sgd_update", 2, 1))
    return status;
  auto attrs = readAttrs<Kernel::sgd_update>(args);
  float lr = static_cast<float>(attrs.lr);
  float weightDecay = static_cast<float>(attrs.weight_decay);
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
