//===- Elementwise.cu - Pointwise arithmetic, math, casts and copy --------===//
//
// The binary ops broadcast as numpy does, as runtime/cpu/kernels/
// Elementwise.cpp does: the result's dimensions are coalesced on the host
// into as few as possible (size-1 ones dropped, neighbours merged where
// both operands read across them as across one), and each thread turns its
// flat result index into the operands' offsets along those. Same-shape
// operands coalesce into one contiguous dimension and skip the division.
// Cast converts between f32 and bf16 (round to nearest even).
//
//===----------------------------------------------------------------------===//

#include "Device.cuh"

namespace loom::cuda {
namespace {

enum class Binary { Add, Sub, Mul, Div };
enum class Unary { Identity, Neg, Exp, Log, Sqrt, Rsqrt, Tanh };

/// The result's dimensions as a broadcast walk, outermost first, with each
/// operand's stride along them (0 where it stretches).
struct BroadcastWalk {
  int rank = 0;
  int64_t size[kMaxRank];
  int64_t lhsStride[kMaxRank];
  int64_t rhsStride[kMaxRank];
};

/// The stride of each dimension of a result of rank `rank` when `x` is read
/// as broadcast to it: 0 along the missing leading and the size-1 ones.
void alignedStrides(const View &x, int64_t rank, int64_t *strides) {
  int64_t own[kMaxRank];
  stridesOf(x, own);
  int64_t shift = rank - x.rank;
  for (int64_t d = 0; d < rank; ++d) {
    int64_t xd = d - shift;
    strides[d] = xd >= 0 && x.dims[xd] != 1 ? own[xd] : 0;
  }
}

BroadcastWalk coalesce(const View &lhs, const View &rhs, const View &out) {
  int64_t lhsStrides[kMaxRank], rhsStrides[kMaxRank];
  alignedStrides(lhs, out.rank, lhsStrides);
  alignedStrides(rhs, out.rank, rhsStrides);
  BroadcastWalk walk;
  for (int64_t d = 0; d < out.rank; ++d) {
    int64_t size = out.dims[d];
    if (size == 1)
      continue;
    int last = walk.rank - 1;
    if (last >= 0 && walk.lhsStride[last] == lhsStrides[d] * size &&
        walk.rhsStride[last] == rhsStrides[d] * size) {
      walk.size[last] *= size;
      walk.lhsStride[last] = lhsStrides[d];
      walk.rhsStride[last] = rhsStrides[d];
      continue;
    }
    walk.size[walk.rank] = size;
    walk.lhsStride[walk.rank] = lhsStrides[d];
    walk.rhsStride[walk.rank] = rhsStrides[d];
    ++walk.rank;
  }
  return walk;
}

template <Binary op> __device__ __forceinline__ float apply(float a, float b) {
  if constexpr (op == Binary::Add)
    return a + b;
  else if constexpr (op == Binary::Sub)
    return a - b;
  else if constexpr (op == Binary::Mul)
    return a * b;
  else
    return a / b;
}

template <Unary op> __device__ __forceinline__ float apply(float x) {
  if constexpr (op == Unary::Identity)
    return x;
  else if constexpr (op == Unary::Neg)
    return -x;
  else if constexpr (op == Unary::Exp)
    return expf(x);
  else if constexpr (op == Unary::Log)
    return logf(x);
  else if constexpr (op == Unary::Sqrt)
    return sqrtf(x);
  else if constexpr (op == Unary::Rsqrt)
    return 1.0f / sqrtf(x);
  else
    return tanhf(x);
}

template <Binary op>
__global__ void binary_forward_kernel(Floats lhs, Floats rhs, Floats out,
                                      BroadcastWalk walk, int64_t n) {
  LOOM_GRID_STRIDE(e, n) {
    int64_t a = 0, b = 0, rest = e;
    for (int d = walk.rank - 1; d >= 0; --d) {
      int64_t index = rest % walk.size[d];
      rest /= walk.size[d];
      a += index * walk.lhsStride[d];
      b += index * walk.rhsStride[d];
    }
    out.store(e, apply<op>(lhs[a], rhs[b]));
  }
}

/// Operands of the result's shape: no index arithmetic, 8 elements at a
/// time when aligned (Device.cuh's pointwise).
template <Binary op>
__global__ void binary_same_shape_kernel(Floats lhs, Floats rhs, Floats out,
                                         int64_t n, bool vector) {
  pointwise(lhs, rhs, out, n, vector,
            [](float a, float b) { return apply<op>(a, b); });
}

template <Unary op>
__global__ void unary_forward_kernel(Floats x, Floats y, int64_t n,
                                     bool vector) {
  pointwise(x, y, n, vector, [](float v) { return apply<op>(v); });
}

template <Binary op>
int32_t binary_forward(void *const *buffers, const int64_t *meta,
                       loom_cuda_context *context, const char *name) {
  KernelArgs args(buffers, meta);
  if (int32_t status = args.expect(name, 2, 1))
    return status;
  const View &lhs = args.in(0), &rhs = args.in(1), &out = args.out(0);
  if (lhs.rank > out.rank || rhs.rank > out.rank)
    return fail("loom_cuda_%s: an operand has a higher rank than the result",
                name);
  int64_t n = out.numElements();
  if (n == 0)
    return 0;
  BroadcastWalk walk = coalesce(lhs, rhs, out);
  bool sameShape =
      walk.rank == 0 ||
      (walk.rank == 1 && walk.lhsStride[0] == 1 && walk.rhsStride[0] == 1);
  bool vector = sameShape && aligned16(lhs.data) && aligned16(rhs.data) &&
                aligned16(out.data);
  if (sameShape)
    binary_same_shape_kernel<op>
        <<<pointwiseBlocks(n, vector), kThreads, 0, context->stream>>>(
            floats(lhs), floats(rhs), floats(out), n, vector);
  else
    binary_forward_kernel<op><<<blocksFor(n), kThreads, 0, context->stream>>>(
        floats(lhs), floats(rhs), floats(out), walk, n);
  return checkLaunch(name);
}

template <Unary op>
int32_t unary_forward(void *const *buffers, const int64_t *meta,
                      loom_cuda_context *context, const char *name) {
  KernelArgs args(buffers, meta);
  if (int32_t status = args.expect(name, 1, 1))
    return status;
  const View &in = args.in(0), &out = args.out(0);
  int64_t n = out.numElements();
  if (in.numElements() != n)
    return fail("loom_cuda_%s: the operand and the result differ in size",
                name);
  if (n == 0)
    return 0;
  bool vector = aligned16(in.data) && aligned16(out.data);
  unary_forward_kernel<op>
      <<<pointwiseBlocks(n, vector), kThreads, 0, context->stream>>>(
          floats(in), floats(out), n, vector);
  return checkLaunch(name);
}

} // namespace

/// The bytes of the operand into the result (copy and reshape).
int32_t copyBytes(void *const *buffers, const int64_t *meta,
                  loom_cuda_context *context, const char *name) {
  KernelArgs args(buffers, meta);
  const View &in = args.in(0), &out = args.out(0);
  int64_t bytes = in.numElements() * in.elementBytes();
  if (bytes != out.numElements() * out.elementBytes())
    return fail("loom_cuda_%s: the operand has %lld bytes, the result %lld",
                name, static_cast<long long>(bytes),
                static_cast<long long>(out.numElements() * out.elementBytes()));
  if (bytes == 0 || in.data == out.data)
    return 0;
  cudaError_t status = cudaMemcpyAsync(
      out.data, in.data, bytes, cudaMemcpyDeviceToDevice, context->stream);
  if (status != cudaSuccess)
    return fail("loom_cuda_%s: %s", name, cudaGetErrorString(status));
  return 0;
}

} // namespace loom::cuda

using namespace loom::cuda;

#define LOOM_BINARY(name, op)                                                  \
  extern "C" int32_t loom_cuda_##name(                                         \
      const loom_call_frame *, void *const *buffers, const int64_t *meta,      \
      loom_cuda_context *context) {                                            \
    ProfileScope scope(context, #name);                                        \
    return binary_forward<op>(buffers, meta, context, #name);                  \
  }
#define LOOM_UNARY(name, op)                                                   \
  extern "C" int32_t loom_cuda_##name(                                         \
      const loom_call_frame *, void *const *buffers, const int64_t *meta,      \
      loom_cuda_context *context) {                                            \
    ProfileScope scope(context, #name);                                        \
    return unary_forward<op>(buffers, meta, context, #name);                   \
  }

LOOM_BINARY(add, Binary::Add)
LOOM_BINARY(sub, Binary::Sub)
LOOM_BINARY(mul, Binary::Mul)
LOOM_BINARY(div, Binary::Div)
LOOM_UNARY(neg, Unary::Neg)
LOOM_UNARY(exp, Unary::Exp)
LOOM_UNARY(log, Unary::Log)
LOOM_UNARY(sqrt, Unary::Sqrt)
LOOM_UNARY(rsqrt, Unary::Rsqrt)
LOOM_UNARY(tanh, Unary::Tanh)
/// f32 <-> bf16, or a copy between tensors of one type.
LOOM_UNARY(cast, Unary::Identity)

extern "C" int32_t loom_cuda_copy(const loom_call_frame *, void *const *buffers,
                                  const int64_t *meta,
                                  loom_cuda_context *context) {
  ProfileScope scope(context, "copy");
  return copyBytes(buffers, meta, context, "copy");
}

/// A constant of the compiled program (host memory) into its device buffer:
/// copy's meta, buffers[0] on the host. Asynchronous on the context's
/// stream; the source is a global of program.so, alive while it is loaded.
extern "C" int32_t loom_cuda_upload(const loom_call_frame *,
                                    void *const *buffers, const int64_t *meta,
                                    loom_cuda_context *context) {
  ProfileScope scope(context, "upload");
  KernelArgs args(buffers, meta);
  if (int32_t status = args.expect("upload", 1, 1, /*notFloat=*/0x3))
    return status;
  const View &in = args.in(0), &out = args.out(0);
  int64_t bytes = in.numElements() * in.elementBytes();
  if (bytes != out.numElements() * out.elementBytes())
    return fail("loom_cuda_upload: the operand has %lld bytes, the result %lld",
                static_cast<long long>(bytes),
                static_cast<long long>(out.numElements() * out.elementBytes()));
  if (bytes == 0)
    return 0;
  cudaError_t status = cudaMemcpyAsync(out.data, in.data, bytes,
                                       cudaMemcpyHostToDevice, context->stream);
  if (status != cudaSuccess)
    return fail("loom_cuda_upload: %s", cudaGetErrorString(status));
  return 0;
}
