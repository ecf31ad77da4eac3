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
