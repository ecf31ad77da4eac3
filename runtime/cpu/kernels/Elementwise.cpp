//===- Elementwise.cpp - Pointwise arithmetic, math, casts and copy -------===//
//
// The binary ops broadcast as numpy does (shapes aligned at the last
// dimension, size-1 dimensions stretch), as the interpreter's broadcastTo
// does. The result's dimensions are first coalesced into as few as possible;
// the walk then runs an odometer over the outer ones and a contiguous loop
// over the innermost, along which each operand either advances or stands
// still (it stretches). f32 tensors compute in float, f64 ones in double.
//
//===----------------------------------------------------------------------===//

#include "KernelArgs.h"

#include <cmath>
#include <cstring>

namespace loom::cpu {
namespace {

/// Runs `fn(T{})` with T the C++ type of the float `dtype`; fails for other
/// element types.
template <typename Fn>
int32_t withFloatType(const char *op, loom_dtype dtype, Fn fn) {
  switch (dtype) {
  case LOOM_DTYPE_F32:
    fn(float{});
    return 0;
  case LOOM_DTYPE_F64:
    fn(double{});
    return 0;
  default:
    return fail("%s: element type %d is neither f32 nor f64", op,
                static_cast<int>(dtype));
  }
}

/// One dimension of a broadcast walk: its extent in the result and each
/// operand's stride along it (0 where the operand stretches).
struct BroadcastDim {
  int64_t size, lhsStride, rhsStride;
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

/// The result's dimensions as a broadcast walk, outermost first: size-1
/// dimensions dropped, and a dimension merged into the one before it where
/// both operands read across the two as across one. Returns their number
/// (0 for a single element).
int coalesce(const View &lhs, const View &rhs, const View &out,
             BroadcastDim *dims) {
  int64_t lhsStrides[kMaxRank], rhsStrides[kMaxRank];
  alignedStrides(lhs, out.rank, lhsStrides);
  alignedStrides(rhs, out.rank, rhsStrides);
  int count = 0;
  for (int64_t d = 0; d < out.rank; ++d) {
    int64_t size = out.dims[d];
    if (size == 1)
      continue;
    if (count > 0) {
      BroadcastDim &prev = dims[count - 1];
      if (prev.lhsStride == lhsStrides[d] * size &&
          prev.rhsStride == rhsStrides[d] * size) {
        prev = {prev.size * size, lhsStrides[d], rhsStrides[d]};
        continue;
      }
    }
    dims[count++] = {size, lhsStrides[d], rhsStrides[d]};
  }
  return count;
}

/// y = fn(a, b) with `a` and `b` broadcast to `y` along `dims`.
template <typename T, typename Fn>
void broadcastApply(const T *a, const T *b, T *y, const BroadcastDim *dims,
                    int rank, Fn fn) {
  if (rank == 0) {
    y[0] = fn(a[0], b[0]);
    return;
  }
  const BroadcastDim &inner = dims[rank - 1];
  int64_t runLength = inner.size, runs = 1;
  for (int d = 0; d + 1 < rank; ++d)
    runs *= dims[d].size;
  int64_t index[kMaxRank] = {};
  int64_t aOffset = 0, bOffset = 0;
  for (int64_t run = 0; run < runs; ++run) {
    const T *aRun = a + aOffset, *bRun = b + bOffset;
    T *yRun = y + run * runLength;
    // Along the innermost dimension an operand advances by one element or
    // stands still (see coalesce).
    if (inner.lhsStride != 0 && inner.rhsStride != 0) {
      for (int64_t i = 0; i < runLength; ++i)
        yRun[i] = fn(aRun[i], bRun[i]);
    } else if (inner.lhsStride != 0) {
      T bValue = *bRun;
      for (int64_t i = 0; i < runLength; ++i)
        yRun[i] = fn(aRun[i], bValue);
    } else if (inner.rhsStride != 0) {
      T aValue = *aRun;
      for (int64_t i = 0; i < runLength; ++i)
        yRun[i] = fn(aValue, bRun[i]);
    } else {
      T value = fn(*aRun, *bRun);
      for (int64_t i = 0; i < runLength; ++i)
        yRun[i] = value;
    }
    for (int d = rank - 2; d >= 0; --d) {
      aOffset += dims[d].lhsStride;
      bOffset += dims[d].rhsStride;
      if (++index[d] < dims[d].size)
        break;
      aOffset -= dims[d].lhsStride * dims[d].size;
      bOffset -= dims[d].rhsStride * dims[d].size;
      index[d] = 0;
    }
  }
}

template <typename Fn>
int32_t binary(void *const *buffers, const int64_t *meta, const char *op,
               Fn fn) {
  KernelArgs args(buffers, meta);
  const View &lhs = args.in(0), &rhs = args.in(1), &out = args.out(0);
  if (lhs.dtype != out.dtype || rhs.dtype != out.dtype)
    return fail("%s: operands of element types %d and %d, result of %d", op,
                static_cast<int>(lhs.dtype), static_cast<int>(rhs.dtype),
                static_cast<int>(out.dtype));
  return withFloatType(op, out.dtype, [&](auto zero) {
    using T = decltype(zero);
    const T *a = static_cast<const T *>(lhs.data);
    const T *b = static_cast<const T *>(rhs.data);
    T *y = static_cast<T *>(out.data);
    BroadcastDim dims[kMaxRank];
    int rank = coalesce(lhs, rhs, out, dims);
    broadcastApply(a, b, y, dims, rank, fn);
  });
}

template <typename Fn>
int32_t unary(void *const *buffers, const int64_t *meta, const char *op,
              Fn fn) {
  KernelArgs args(buffers, meta);
  const View &in = args.in(0), &out = args.out(0);
  if (in.dtype != out.dtype)
    return fail("%s: operand of element type %d, result of %d", op,
                static_cast<int>(in.dtype), static_cast<int>(out.dtype));
  return withFloatType(op, out.dtype, [&](auto zero) {
    using T = decltype(zero);
    const T *x = static_cast<const T *>(in.data);
    T *y = static_cast<T *>(out.data);
    for (int64_t e = 0, n = out.numElements(); e < n; ++e)
      y[e] = fn(x[e]);
  });
}

/// Converts `n` elements of `From` into `To` (round to nearest even).
template <typename From, typename To>
void convert(const void *from, void *to, int64_t n) {
  const From *x = static_cast<const From *>(from);
  To *y = static_cast<To *>(to);
  for (int64_t e = 0; e < n; ++e)
    y[e] = static_cast<To>(x[e]);
}

} // namespace
} // namespace loom::cpu

using namespace loom::cpu;

extern "C" {

int32_t loom_cpu_add(const loom_call_frame *, void *const *buffers,
                     const int64_t *meta) {
  return binary(buffers, meta, "add", [](auto a, auto b) { return a + b; });
}

int32_t loom_cpu_sub(const loom_call_frame *, void *const *buffers,
                     const int64_t *meta) {
  return binary(buffers, meta, "sub", [](auto a, auto b) { return a - b; });
}

int32_t loom_cpu_mul(const loom_call_frame *, void *const *buffers,
                     const int64_t *meta) {
  return binary(buffers, meta, "mul", [](auto a, auto b) { return a * b; });
}

int32_t loom_cpu_div(const loom_call_frame *, void *const *buffers,
                     const int64_t *meta) {
  return binary(buffers, meta, "div", [](auto a, auto b) { return a / b; });
}

int32_t loom_cpu_neg(const loom_call_frame *, void *const *buffers,
                     const int64_t *meta) {
  return unary(buffers, meta, "neg", [](auto x) { return -x; });
}

int32_t loom_cpu_exp(const loom_call_frame *, void *const *buffers,
                     const int64_t *meta) {
  return unary(buffers, meta, "exp", [](auto x) { return std::exp(x); });
}

int32_t loom_cpu_log(const loom_call_frame *, void *const *buffers,
                     const int64_t *meta) {
  return unary(buffers, meta, "log", [](auto x) { return std::log(x); });
}

int32_t loom_cpu_sqrt(const loom_call_frame *, void *const *buffers,
                      const int64_t *meta) {
  return unary(buffers, meta, "sqrt", [](auto x) { return std::sqrt(x); });
}

int32_t loom_cpu_rsqrt(const loom_call_frame *, void *const *buffers,
                       const int64_t *meta) {
  return unary(buffers, meta, "rsqrt", [](auto x) {
    return static_cast<decltype(x)>(1) / std::sqrt(x);
  });
}

int32_t loom_cpu_tanh(const loom_call_frame *, void *const *buffers,
                      const int64_t *meta) {
  return unary(buffers, meta, "tanh", [](auto x) { return std::tanh(x); });
}

/// Rounds f64 to f32 or widens f32 to f64; the same type copies. The
/// dialect's cast takes float tensors only (bf16 ones have no CPU kernel).
int32_t loom_cpu_cast(const loom_call_frame *, void *const *buffers,
                      const int64_t *meta) {
  KernelArgs args(buffers, meta);
  const View &in = args.in(0), &out = args.out(0);
  int64_t n = out.numElements();
  if (in.dtype == out.dtype &&
      (in.dtype == LOOM_DTYPE_F32 || in.dtype == LOOM_DTYPE_F64)) {
    std::memcpy(out.data, in.data, n * out.elementBytes());
    return 0;
  }
  if (in.dtype == LOOM_DTYPE_F32 && out.dtype == LOOM_DTYPE_F64) {
    convert<float, double>(in.data, out.data, n);
    return 0;
  }
  if (in.dtype == LOOM_DTYPE_F64 && out.dtype == LOOM_DTYPE_F32) {
    convert<double, float>(in.data, out.data, n);
    return 0;
  }
  return fail("cast: no conversion from element type %d to %d",
              static_cast<int>(in.dtype), static_cast<int>(out.dtype));
}

/// The bytes of operand 0 into result 0, whatever their element type.
int32_t loom_cpu_copy(const loom_call_frame *, void *const *buffers,
                      const int64_t *meta) {
  KernelArgs args(buffers, meta);
  const View &in = args.in(0), &out = args.out(0);
  int64_t bytes = in.numElements() * in.elementBytes();
  if (bytes != out.numElements() * out.elementBytes())
    return fail("copy: the operand has %lld bytes, the result %lld",
                static_cast<long long>(bytes),
                static_cast<long long>(out.numElements() * out.elementBytes()));
  std::memcpy(out.data, in.data, bytes);
  return 0;
}

} // extern "C"
