//===- Device.cuh - Device-side helpers of the CUDA kernels -----*- CUDA
//-*-===//
//
// Tensors are read and written through Floats and Indices, which carry their
// element type at run time: a kernel computes in f32 whatever each tensor
// stores (f32 or bf16), so that one kernel serves every mix of types the
// planner may choose. The branch on the type is uniform across a launch and
// costs nothing next to the memory traffic of these kernels. The block
// reductions assume blockDim.x a multiple of 32, at most 1024.
//
//===----------------------------------------------------------------------===//

#ifndef LOOM_RUNTIME_CUDA_KERNELS_DEVICE_CUH
#define LOOM_RUNTIME_CUDA_KERNELS_DEVICE_CUH

#include "Context.h"

#include <cuda_bf16.h>

#include <algorithm>

namespace loom::cuda {

/// A floating-point tensor (f32 or bf16) read and written as float.
struct Floats {
  void *data;
  int32_t dtype;

  __device__ __forceinline__ float operator[](int64_t i) const {
    if (dtype == LOOM_DTYPE_BF16)
      return __bfloat162float(static_cast<const __nv_bfloat16 *>(data)[i]);
    return static_cast<const float *>(data)[i];
  }
  /// Rounds to nearest even into bf16.
  __device__ __forceinline__ void store(int64_t i, float value) const {
    if (dtype == LOOM_DTYPE_BF16)
      static_cast<__nv_bfloat16 *>(data)[i] = __float2bfloat16_rn(value);
    else
      static_cast<float *>(data)[i] = value;
  }
};

/// `value` rounded to the nearest even bf16, as a float (what a bf16 store
/// keeps).
__device__ __forceinline__ float roundBf16(float value) {
  return __bfloat162float(__float2bfloat16_rn(value));
}

inline Floats floats(const View &view) {
  return {view.data, static_cast<int32_t>(view.dtype)};
}

/// An i32 or i64 tensor read as int64_t.
struct Indices {
  const void *data;
  int32_t dtype;

  __device__ __forceinline__ int64_t operator[](int64_t i) const {
    if (dtype == LOOM_DTYPE_I32)
      return static_cast<const int32_t *>(data)[i];
    return static_cast<const int64_t *>(data)[i];
  }
};

inline Indices indices(const View &view) {
  return {view.data, static_cast<int32_t>(view.dtype)};
}

constexpr int kThreads = 256;

/// Blocks of kThreads for a grid-stride loop over `n` items.
inline unsigned blocksFor(int64_t n, int threads = kThreads) {
  int64_t blocks = (n + threads - 1) / threads;
  return static_cast<unsigned>(
      std::max<int64_t>(1, std::min<int64_t>(blocks, 1 << 16)));
}

/// Threads per block for a block that walks a row of `size` elements: a
/// power of two from 32 to kThreads.
inline int threadsForRow(int64_t size) {
  int threads = 32;
  while (threads < kThreads && threads < size)
    threads *= 2;
  return threads;
}

#define LOOM_GRID_STRIDE(i, n)                                                 \
  for (int64_t i =                                                             \
           blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x;        \
       i < (n); i += static_cast<int64_t>(gridDim.x) * blockDim.x)

/// Pointwise kernels over n elements of 16-byte aligned tensors take them 8
/// at a time (one 16-byte load or store per bf16 tensor, two per f32 one),
/// then the last n % 8 one by one; `vector` false takes them all one by
/// one.
inline bool aligned16(const void *data) {
  return reinterpret_cast<uintptr_t>(data) % 16 == 0;
}
inline unsigned pointwiseBlocks(int64_t n, bool vector) {
  return blocksFor(vector ? (n + 7) / 8 : n);
}

/// Elements [i, i + 8) of `t` (i a multiple of 8) as float.
__device__ __forceinline__ void load8(const Floats &t, int64_t i,
                                      float (&v)[8]) {
  if (t.dtype == LOOM_DTYPE_BF16) {
    uint4 raw = *reinterpret_cast<const uint4 *>(
        static_cast<const __nv_bfloat16 *>(t.data) + i);
    const __nv_bfloat162 *pairs =
        reinterpret_cast<const __nv_bfloat162 *>(&raw);
#pragma unroll
    for (int k = 0; k < 4; ++k) {
      float2 f = __bfloat1622float2(pairs[k]);
      v[2 * k] = f.x;
      v[2 * k + 1] = f.y;
    }
  } else {
    const float4 *p = reinterpret_cast<const float4 *>(
        static_cast<const float *>(t.data) + i);
    float4 a = p[0], b = p[1];
    v[0] = a.x, v[1] = a.y, v[2] = a.z, v[3] = a.w;
    v[4] = b.x, v[5] = b.y, v[6] = b.z, v[7] = b.w;
  }
}

/// Stores v into elements [i, i + 8) of `t`, bf16 rounded to nearest even
/// as Floats::store rounds.
__device__ __forceinline__ void store8(const Floats &t, int64_t i,
                                       const float (&v)[8]) {
  if (t.dtype == LOOM_DTYPE_BF16) {
    uint4 raw;
    __nv_bfloat162 *pairs = reinterpret_cast<__nv_bfloat162 *>(&raw);
#pragma unroll
    for (int k = 0; k < 4; ++k)
      pairs[k] = __floats2bfloat162_rn(v[2 * k], v[2 * k + 1]);
    *reinterpret_cast<uint4 *>(static_cast<__nv_bfloat16 *>(t.data) + i) = raw;
  } else {
    float4 *p = reinterpret_cast<float4 *>(static_cast<float *>(t.data) + i);
    p[0] = make_float4(v[0], v[1], v[2], v[3]);
    p[1] = make_float4(v[4], v[5], v[6], v[7]);
  }
}

/// y[e] = fn(x[e]) for e < n, in a grid-stride loop (see aligned16).
template <typename Fn>
__device__ __forceinline__ void pointwise(Floats x, Floats y, int64_t n,
                                          bool vector, Fn fn) {
  int64_t first = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x;
  int64_t stride = static_cast<int64_t>(gridDim.x) * blockDim.x;
  int64_t groups = vector ? n / 8 : 0;
  for (int64_t g = first; g < groups; g += stride) {
    float v[8];
    load8(x, 8 * g, v);
#pragma unroll
    for (int k = 0; k < 8; ++k)
      v[k] = fn(v[k]);
    store8(y, 8 * g, v);
  }
  for (int64_t e = 8 * groups + first; e < n; e += stride)
    y.store(e, fn(x[e]));
}

/// out[e] = fn(a[e], b[e]) for e < n, in a grid-stride loop (see
/// aligned16).
template <typename Fn>
__device__ __forceinline__ void pointwise(Floats a, Floats b, Floats out,
                                          int64_t n, bool vector, Fn fn) {
  int64_t first = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x;
  int64_t stride = static_cast<int64_t>(gridDim.x) * blockDim.x;
  int64_t groups = vector ? n / 8 : 0;
  for (int64_t g = first; g < groups; g += stride) {
    float u[8], v[8];
    load8(a, 8 * g, u);
    load8(b, 8 * g, v);
#pragma unroll
    for (int k = 0; k < 8; ++k)
      u[k] = fn(u[k], v[k]);
    store8(out, 8 * g, u);
  }
  for (int64_t e = 8 * groups + first; e < n; e += stride)
    out.store(e, fn(a[e], b[e]));
}

struct SumOp {
  template <typename T> __device__ T operator()(T a, T b) const {
    return a + b;
  }
};

/// fmax: a NaN loses (std::fmax, as the CPU softmax takes its maximum).
struct MaxOp {
  __device__ float operator()(float a, float b) const { return fmaxf(a, b); }
};

template <typename T, typename Op>
__device__ __forceinline__ T warpReduce(T value, Op op) {
  for (int offset = 16; offset > 0; offset >>= 1)
    value = op(value, __shfl_xor_sync(0xffffffffu, value, offset));
  return value;
}

/// The reduction of `value` over the block, returned to every thread.
template <typename T, typename Op>
__device__ T blockReduce(T value, Op op, T identity) {
  __shared__ T partial[32];
  int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
  int warps = blockDim.x >> 5;
  value = warpReduce(value, op);
  __syncthreads(); // `partial` may still be read by a previous call
  if (lane == 0)
    partial[warp] = value;
  __syncthreads();
  value = lane < warps ? partial[lane] : identity;
  return warpReduce(value, op);
}

/// Records a device-side error (the first one wins).
__device__ __forceinline__ void recordError(long long *word, long long code,
                                            long long index, long long value,
                                            long long bound) {
  if (atomicCAS(reinterpret_cast<unsigned long long *>(word), 0ull,
                static_cast<unsigned long long>(code)) == 0ull) {
    word[1] = index;
    word[2] = value;
    word[3] = bound;
  }
}

} // namespace loom::cuda

#endif // LOOM_RUNTIME_CUDA_KERNELS_DEVICE_CUH
