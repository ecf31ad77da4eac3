//===- Attention.cu - Fused attention and its gradient --------------------===//
//
// The meaning of runtime/cpu/kernels/Attention.cpp (scores = scale * q k^T
// plus the causal mask, lse its row log-sum-exp, P = exp(scores - lse),
// out = (P * M) v with M the dropout mask scaled by 1 / (1 - rate)),
// computed without materializing P, FlashAttention-style (Dao et al. 2022):
//
//   forward   a block per (batch, query head, 64 queries), a thread per
//             query row holding q and its output accumulator in registers;
//             key/value tiles of 32 rows pass through shared memory, and
//             the row's running maximum and sum are rescaled once per tile
//             (the online softmax).
//   backward  rowsum(dout * out) per query row into scratch, then two
//             kernels so that nothing needs atomics: dq with a thread per
//             query row walking the keys, and dk, dv with a thread per key
//             row walking the queries of every query head of its group
//             (FlashAttention-2's Alg. 2, split by output):
//               dv += Pd^T dout,  dS = P * (M * dout v^T - rowsum),
//               dq = scale * dS k,  dk = scale * dS^T q.
//
// q-shaped tensors are [B, S, Hq, D], k/v-shaped [B, Skv, Hkv, D]; key/value
// head h / (Hq / Hkv) serves query head h. Head dimensions up to 128 (the
// registers are sized by a template bound of 32, 64 or 128). The mask of
// (b, h, s, t) is drawn at its index in the global [B, Hq, S, Skv] tensor,
// as on the CPU.
//
// Which kernels run a call, the first that takes it of:
//   cudnn  cuDNN's fused flash attention (CudnnAttention.cpp): bf16 q, k, v,
//          out (and dout, dq, dk, dv), an f32 lse, no dropout (Loom's
//          Philox masks stay Loom's), a head dimension that is a multiple
//          of 8, 16-byte aligned tensors, and a graph cuDNN finds an
//          engine for;
//   tiles  the tensor-core kernels of AttentionTiles.cuh (the same tiling
//          on WMMA fragments): bf16 q, k, v (and dout) without dropout, a
//          head dimension that is a multiple of 16 up to 128;
//   simt   the kernels here: everything else.
// LOOM_CUDA_ATTENTION=cudnn (the default), tiles or simt says where to
// start; loom_cuda_attention_path and the profile's label say which ran
// and, when cuDNN was asked but refused, why.
//
//===----------------------------------------------------------------------===//

#include "CudnnAttention.h"
#include "Device.cuh"

#include "loom/DropoutMask.h"

#include <cstdlib>
#include <cstring>
#include <mma.h>
#include <type_traits>

// The CUDA vocabulary AttentionTiles.cuh takes from its includer.
namespace loom::cuda::tiles {
namespace wmma = nvcuda::wmma;
using Bf16 = __nv_bfloat16;
__device__ __forceinline__ Bf16 toBf16(float value) {
  return __float2bfloat16_rn(value);
}
__device__ __forceinline__ float toFloat(Bf16 value) {
  return __bfloat162float(value);
}
using Vec16 = uint4;
__device__ __forceinline__ Vec16 load16(const void *p) {
  return *static_cast<const uint4 *>(p);
}
__device__ __forceinline__ void store16(void *p, Vec16 value) {
  *static_cast<uint4 *>(p) = value;
}
} // namespace loom::cuda::tiles
#define LOOM_TILE_DEVICE __device__ __forceinline__
#define LOOM_TILE_KERNEL __global__ __launch_bounds__(128)
#define LOOM_TILE_SHARED(name)                                                 \
  extern __shared__ __align__(128) unsigned char name[]
#include "AttentionTiles.cuh"

namespace loom::cuda {
namespace {

constexpr int kRows = 64; // query (or key) rows per block: one per thread
constexpr int kTile = 32; // rows per shared-memory tile of the other side

/// Shapes, attributes and dropout of an attention call, as the kernels see
/// them (the shape's offsets are the tensor-core kernels' own).
struct Attention : tiles::Shape {
  double rate = 0.0; // 0: no dropout
  uint64_t seed = 0, key = 0;
  Indices step = {nullptr, LOOM_DTYPE_I64};
  int64_t maskBase = 0, maskStrides[4] = {};

  __device__ int64_t keysOf(int64_t s) const { return causal ? s + 1 : kvSeq; }
  /// The dropout factor of probability (b, h, s, t): 0 or 1 / (1 - rate).
  __device__ float maskFactor(uint64_t stepValue, int64_t b, int64_t h,
                              int64_t s, int64_t t) const {
    int64_t index = maskBase + b * maskStrides[0] + h * maskStrides[1] +
                    s * maskStrides[2] + t * maskStrides[3];
    return dropoutKeeps(seed, key, stepValue, static_cast<uint64_t>(index),
                        rate)
               ? static_cast<float>(1.0 / (1.0 - rate))
               : 0.0f;
  }
};

/// Copies rows [first, first + kTile) of a [rows, heads * dim] tensor's head
/// starting at `head` into `tile` (zeros past `rows`).
template <int kMaxD>
__device__ void loadTile(float (*tile)[kMaxD], Floats from, int64_t head,
                         int64_t stride, int64_t first, int64_t rows,
                         int64_t dim) {
  for (int64_t i = threadIdx.x; i < kTile * dim; i += blockDim.x) {
    int64_t row = i / dim, d = i % dim;
    tile[row][d] =
        first + row < rows ? from[head + (first + row) * stride + d] : 0.0f;
  }
}

template <int kMaxD>
__device__ void loadRow(float *row, Floats from, int64_t offset, int64_t dim) {
#pragma unroll
  for (int d = 0; d < kMaxD; ++d)
    row[d] = d < dim ? from[offset + d] : 0.0f;
}

template <int kMaxD>
__device__ float dot(const float *a, const float *b, int64_t dim) {
  float sum = 0.0f;
#pragma unroll
  for (int d = 0; d < kMaxD; ++d)
    if (d < dim)
      sum += a[d] * b[d];
  return sum;
}

template <int kMaxD>
__global__ void attention_forward_kernel(Attention a, Floats q, Floats k,
                                         Floats v, Floats out, Floats lse) {
  __shared__ float keys[kTile][kMaxD], values[kTile][kMaxD];
  int64_t b = blockIdx.z, h = blockIdx.y;
  int64_t s = blockIdx.x * static_cast<int64_t>(kRows) + threadIdx.x;
  bool active = s < a.seq;
  int64_t kvHead = a.kvHeadFor(b, h);
  int64_t qRow = a.qHead(b, h) + s * a.qStride();
  float query[kMaxD], acc[kMaxD];
  if (active)
    loadRow<kMaxD>(query, q, qRow, a.dim);
#pragma unroll
  for (int d = 0; d < kMaxD; ++d)
    acc[d] = 0.0f;
  float max = -INFINITY, sum = 0.0f;
  int64_t used = active ? a.keysOf(s) : 0;
  // The keys any query of the block sees.
  int64_t blockKeys =
      a.causal ? min(a.kvSeq, (blockIdx.x + 1) * static_cast<int64_t>(kRows))
               : a.kvSeq;
  uint64_t stepValue = a.rate != 0.0 ? static_cast<uint64_t>(a.step[0]) : 0;
  for (int64_t first = 0; first < blockKeys; first += kTile) {
    __syncthreads();
    loadTile<kMaxD>(keys, k, kvHead, a.kvStride(), first, a.kvSeq, a.dim);
    loadTile<kMaxD>(values, v, kvHead, a.kvStride(), first, a.kvSeq, a.dim);
    __syncthreads();
    if (first >= used)
      continue;
    float scores[kTile];
    float tileMax = -INFINITY;
#pragma unroll
    for (int j = 0; j < kTile; ++j) {
      scores[j] = first + j < used ? a.scale * dot<kMaxD>(query, keys[j], a.dim)
                                   : -INFINITY;
      tileMax = fmaxf(tileMax, scores[j]);
    }
    float newMax = fmaxf(max, tileMax);
    float correction = expf(max - newMax);
    sum *= correction;
#pragma unroll
    for (int d = 0; d < kMaxD; ++d)
      acc[d] *= correction;
#pragma unroll
    for (int j = 0; j < kTile; ++j) {
      if (first + j >= used)
        break;
      float p = expf(scores[j] - newMax);
      sum += p;
      if (a.rate != 0.0)
        p *= a.maskFactor(stepValue, b, h, s, first + j);
#pragma unroll
      for (int d = 0; d < kMaxD; ++d)
        acc[d] += p * values[j][d];
    }
    max = newMax;
  }
  if (!active)
    return;
  float inverse = 1.0f / sum;
  for (int64_t d = 0; d < a.dim; ++d)
    out.store(qRow + d, acc[d] * inverse);
  lse.store(a.statRow(b, h) + s, max + logf(sum));
}

/// rowDot[b, h, s] = sum(dout * out) over row (b, s, h).
__global__ void attention_row_dot_kernel(Attention a, Floats dout, Floats out,
                                         float *rowDot) {
  LOOM_GRID_STRIDE(row, a.batch * a.heads * a.seq) {
    int64_t s = row % a.seq, h = (row / a.seq) % a.heads,
            b = row / (a.seq * a.heads);
    int64_t base = a.qHead(b, h) + s * a.qStride();
    float sum = 0.0f;
    for (int64_t d = 0; d < a.dim; ++d)
      sum += dout[base + d] * out[base + d];
    rowDot[row] = sum;
  }
}

/// dq of a query row: scale * sum over keys of P * (M * dout.v - rowDot) k.
template <int kMaxD>
__global__ void attention_backward_dq_kernel(Attention a, Floats dout, Floats q,
                                             Floats k, Floats v, Floats lse,
                                             const float *rowDot, Floats dq) {
  __shared__ float keys[kTile][kMaxD], values[kTile][kMaxD];
  int64_t b = blockIdx.z, h = blockIdx.y;
  int64_t s = blockIdx.x * static_cast<int64_t>(kRows) + threadIdx.x;
  bool active = s < a.seq;
  int64_t kvHead = a.kvHeadFor(b, h);
  int64_t qRow = a.qHead(b, h) + s * a.qStride();
  float query[kMaxD], gradOut[kMaxD], acc[kMaxD];
  float rowLse = 0.0f, dotTerm = 0.0f;
  if (active) {
    loadRow<kMaxD>(query, q, qRow, a.dim);
    loadRow<kMaxD>(gradOut, dout, qRow, a.dim);
    rowLse = lse[a.statRow(b, h) + s];
    dotTerm = rowDot[a.statRow(b, h) + s];
  }
#pragma unroll
  for (int d = 0; d < kMaxD; ++d)
    acc[d] = 0.0f;
  int64_t used = active ? a.keysOf(s) : 0;
  int64_t blockKeys =
      a.causal ? min(a.kvSeq, (blockIdx.x + 1) * static_cast<int64_t>(kRows))
               : a.kvSeq;
  uint64_t stepValue = a.rate != 0.0 ? static_cast<uint64_t>(a.step[0]) : 0;
  for (int64_t first = 0; first < blockKeys; first += kTile) {
    __syncthreads();
    loadTile<kMaxD>(keys, k, kvHead, a.kvStride(), first, a.kvSeq, a.dim);
    loadTile<kMaxD>(values, v, kvHead, a.kvStride(), first, a.kvSeq, a.dim);
    __syncthreads();
    for (int j = 0; j < kTile && first + j < used; ++j) {
      float p = expf(a.scale * dot<kMaxD>(query, keys[j], a.dim) - rowLse);
      float mask =
          a.rate != 0.0 ? a.maskFactor(stepValue, b, h, s, first + j) : 1.0f;
      float g = p * (mask * dot<kMaxD>(gradOut, values[j], a.dim) - dotTerm) *
                a.scale;
#pragma unroll
      for (int d = 0; d < kMaxD; ++d)
        acc[d] += g * keys[j][d];
    }
  }
  if (active)
    for (int64_t d = 0; d < a.dim; ++d)
      dq.store(qRow + d, acc[d]);
}

/// dk and dv of a key row, summed over the query heads of its group and
/// the queries that see it.
template <int kMaxD>
__global__ void attention_backward_dkdv_kernel(Attention a, Floats dout,
                                               Floats q, Floats k, Floats v,
                                               Floats lse, const float *rowDot,
                                               Floats dk, Floats dv) {
  __shared__ float queries[kTile][kMaxD], gradOuts[kTile][kMaxD];
  __shared__ float tileLse[kTile], tileDot[kTile];
  int64_t b = blockIdx.z, kv = blockIdx.y;
  int64_t t = blockIdx.x * static_cast<int64_t>(kRows) + threadIdx.x;
  bool active = t < a.kvSeq;
  int64_t kvRow = a.kvHead(b, kv) + t * a.kvStride();
  float key[kMaxD], value[kMaxD], dkAcc[kMaxD], dvAcc[kMaxD];
  if (active) {
    loadRow<kMaxD>(key, k, kvRow, a.dim);
    loadRow<kMaxD>(value, v, kvRow, a.dim);
  }
#pragma unroll
  for (int d = 0; d < kMaxD; ++d)
    dkAcc[d] = dvAcc[d] = 0.0f;
  int64_t group = a.heads / a.kvHeads;
  // Causal: only queries s >= t see key t; the block's first key bounds
  // the queries it needs.
  int64_t firstQuery =
      a.causal ? (blockIdx.x * static_cast<int64_t>(kRows)) / kTile * kTile : 0;
  uint64_t stepValue = a.rate != 0.0 ? static_cast<uint64_t>(a.step[0]) : 0;
  for (int64_t h = kv * group; h < (kv + 1) * group; ++h) {
    int64_t qHead = a.qHead(b, h), statRow = a.statRow(b, h);
    for (int64_t first = firstQuery; first < a.seq; first += kTile) {
      __syncthreads();
      loadTile<kMaxD>(queries, q, qHead, a.qStride(), first, a.seq, a.dim);
      loadTile<kMaxD>(gradOuts, dout, qHead, a.qStride(), first, a.seq, a.dim);
      if (threadIdx.x < kTile) {
        int64_t s = first + threadIdx.x;
        tileLse[threadIdx.x] = s < a.seq ? lse[statRow + s] : 0.0f;
        tileDot[threadIdx.x] = s < a.seq ? rowDot[statRow + s] : 0.0f;
      }
      __syncthreads();
      if (!active)
        continue;
      for (int j = 0; j < kTile; ++j) {
        int64_t s = first + j;
        if (s >= a.seq || (a.causal && s < t))
          continue;
        float p =
            expf(a.scale * dot<kMaxD>(queries[j], key, a.dim) - tileLse[j]);
        float mask = a.rate != 0.0 ? a.maskFactor(stepValue, b, h, s, t) : 1.0f;
        float g = p *
                  (mask * dot<kMaxD>(gradOuts[j], value, a.dim) - tileDot[j]) *
                  a.scale;
#pragma unroll
        for (int d = 0; d < kMaxD; ++d) {
          dvAcc[d] += p * mask * gradOuts[j][d];
          dkAcc[d] += g * queries[j][d];
        }
      }
    }
  }
  if (!active)
    return;
  for (int64_t d = 0; d < a.dim; ++d) {
    dk.store(kvRow + d, dkAcc[d]);
    dv.store(kvRow + d, dvAcc[d]);
  }
}

/// Reads the shapes (q is operand `qIndex`, k and v follow it) and the
/// attributes, and with dropout the mask's position; checks what the
/// kernels rely on. `operands` is the count without the step.
template <Kernel K>
int32_t readAttention(KernelArgs &args, const loom_call_frame *frame,
                      const char *op, int64_t operands, int64_t results,
                      int64_t qIndex, Attention &a) {
  auto attrs = readAttrs<K>(args);
  a.causal = attrs.causal;
  a.scale = static_cast<float>(attrs.scale);
  bool hasStep = attrs.has_step;
  uint32_t stepBit = hasStep ? 1u << operands : 0u;
  if (int32_t status =
          args.expect(op, operands + (hasStep ? 1 : 0), results, stepBit))
    return status;
  char error[256];
  kernels::AttentionDims dims;
  if (!kernels::readAttentionDims(args, qIndex, a.causal, "loom_cuda", op, dims,
                                  error, sizeof error))
    return fail("%s", error);
  a.batch = dims.batch;
  a.seq = dims.seq;
  a.heads = dims.heads;
  a.kvSeq = dims.kvSeq;
  a.kvHeads = dims.kvHeads;
  a.dim = dims.dim;
  if (a.dim > 128)
    return fail("loom_cuda_%s: head dimension %lld is over 128", op,
                static_cast<long long>(a.dim));
  if (a.seq > (int64_t{1} << 30) || a.heads > 65535 || a.batch > 65535)
    return fail("loom_cuda_%s: the grid does not fit the shape", op);

  a.rate = attrs.dropout_rate;
  a.seed = static_cast<uint64_t>(attrs.dropout_seed);
  a.key = static_cast<uint64_t>(attrs.dropout_key);
  // The tiled kernels place query s at key position s: a causal shard of
  // the sequence (context parallelism) has no kernel here yet.
  if (a.causal && a.seq != a.kvSeq)
    return fail("loom_cuda_%s: a causal attention's queries split along the "
                "sequence (context parallelism) run on the cpu backend only",
                op);
  if (!hasStep || a.rate == 0.0)
    a.rate = 0.0;
  if (hasStep) {
    const View &step = args.in(operands);
    if (!step.isIndex())
      return fail("loom_cuda_%s: the step is not an integer", op);
    a.step = indices(step);
  }
  if (!attrs.has_positions)
    return 0; // No mask block: the local tensor is the global one.
  int64_t maskShape[4] = {a.batch, a.heads, a.seq, a.kvSeq};
  const int64_t entryOfDim[4] = {0, 2, 1, -1};
  return readMaskIndex(args, frame, /*blockRank=*/4, maskShape, 4, entryOfDim,
                       a.maskStrides, &a.maskBase);
}

/// Calls `fn(std::integral_constant<int, kMaxD>)` with the smallest register
/// bound that holds `dim`.
template <typename Fn> void withHeadBound(int64_t dim, Fn fn) {
  if (dim <= 32)
    fn(std::integral_constant<int, 32>());
  else if (dim <= 64)
    fn(std::integral_constant<int, 64>());
  else
    fn(std::integral_constant<int, 128>());
}

dim3 gridOf(int64_t rows, int64_t heads, int64_t batch) {
  return dim3(static_cast<unsigned>((rows + kRows - 1) / kRows),
              static_cast<unsigned>(heads), static_cast<unsigned>(batch));
}

/// The kernels LOOM_CUDA_ATTENTION lets a call start from (see the banner).
enum class Path { Cudnn, Tiles, Simt };

int32_t firstPath(const char *op, Path &path) {
  const char *choice = std::getenv("LOOM_CUDA_ATTENTION");
  if (!choice || !*choice || std::strcmp(choice, "cudnn") == 0)
    path = Path::Cudnn;
  else if (std::strcmp(choice, "tiles") == 0)
    path = Path::Tiles;
  else if (std::strcmp(choice, "simt") == 0)
    path = Path::Simt;
  else
    return fail("loom_cuda_%s: LOOM_CUDA_ATTENTION=%s: expected cudnn, tiles "
                "or simt",
                op, choice);
  return 0;
}

/// Why cuDNN's graphs cannot describe the call, before any plan is asked
/// for; null when they can. `bf16` are the q- and k-shaped tensors.
const char *cudnnMismatch(const Attention &a,
                          std::initializer_list<const View *> bf16,
                          const View &lse) {
  if (a.rate != 0.0)
    return "dropout";
  if (a.seq == 0 || a.heads == 0)
    return "no queries";
  for (const View *view : bf16)
    if (view->dtype != LOOM_DTYPE_BF16)
      return "a tensor is not bf16";
  if (lse.dtype != LOOM_DTYPE_F32)
    return "lse is not f32";
  if (a.dim % 8 != 0)
    return "head dimension not a multiple of 8";
  return nullptr;
}

cudnn::Problem problemOf(const Attention &a) {
  return {a.batch, a.heads, a.kvHeads, a.seq,
          a.kvSeq, a.dim,   a.causal,  a.scale};
}

cudnn::Strided qShaped(const Attention &a, const View &view) {
  return cudnn::dense(view.data, a.seq, a.heads, a.dim);
}

cudnn::Strided kvShaped(const Attention &a, const View &view) {
  return cudnn::dense(view.data, a.kvSeq, a.kvHeads, a.dim);
}

/// Records which kernels ran `op` (`path`; cuDNN's `engine`, or why cuDNN
/// refused) for loom_cuda_attention_path and the profile's label.
void recordPath(loom_cuda_context *context, ProfileScope &scope, const char *op,
                const char *path, int64_t engine, const std::string &refusal) {
  std::string &text = context->attentionPath;
  text = path;
  if (engine >= 0)
    text += " engine " + std::to_string(engine);
  if (!refusal.empty())
    text += " (cudnn: " + refusal + ")";
  scope.label("%s %s", op, text.c_str());
}

/// Whether the tensor-core kernels take a call whose tensor operands are
/// `operands`: all bf16, no dropout, a head dimension they tile.
bool onTiles(const Attention &a, std::initializer_list<const View *> operands) {
  if (a.rate != 0.0 || a.dim % tiles::kEdge != 0 || a.dim > 128)
    return false;
  for (const View *operand : operands)
    if (operand->dtype != LOOM_DTYPE_BF16)
      return false;
  return true;
}

tiles::Tensor tileTensor(const View &view) {
  return {view.data, view.dtype == LOOM_DTYPE_BF16};
}

const tiles::Bf16 *bf16s(const View &view) {
  return static_cast<const tiles::Bf16 *>(view.data);
}

/// Launches `kernel` on `grid` with `bytes` of dynamic shared memory, first
/// allowing it that much (over the default 48 KiB).
template <typename Kernel, typename... Args>
int32_t launchTiles(const char *op, Kernel kernel, dim3 grid, int64_t bytes,
                    cudaStream_t stream, Args... args) {
  if (cudaError_t status = cudaFuncSetAttribute(
          kernel, cudaFuncAttributeMaxDynamicSharedMemorySize,
          static_cast<int>(bytes));
      status != cudaSuccess)
    return fail("loom_cuda_%s: cannot give the tensor-core kernel %lld bytes "
                "of shared memory: %s",
                op, static_cast<long long>(bytes), cudaGetErrorString(status));
  kernel<<<grid, tiles::kThreads, bytes, stream>>>(args...);
  return checkLaunch(op);
}

/// dq, dk, dv of attention_grad on the tensor-core kernels, rowDot ready.
int32_t tilesGrad(const Attention &a, KernelArgs &args, const float *rowDot,
                  loom_cuda_context *context) {
  const tiles::Shape &shape = a;
  const tiles::Bf16 *dout = bf16s(args.in(0)), *q = bf16s(args.in(1)),
                    *k = bf16s(args.in(2)), *v = bf16s(args.in(3));
  tiles::Tensor lse = tileTensor(args.in(5));
  auto run = [&](auto dq, auto dkdv) -> int32_t {
    if (a.seq > 0 && a.heads > 0)
      if (int32_t status =
              launchTiles("attention_grad", dq, gridOf(a.seq, a.heads, a.batch),
                          tiles::dqSharedBytes(a.dim), context->stream, shape,
                          dout, q, k, v, lse, rowDot, tileTensor(args.out(0))))
        return status;
    return launchTiles(
        "attention_grad", dkdv, gridOf(a.kvSeq, a.kvHeads, a.batch),
        tiles::dkdvSharedBytes(a.dim), context->stream, shape, dout, q, k, v,
        lse, rowDot, tileTensor(args.out(1)), tileTensor(args.out(2)));
  };
  return a.dim <= 64 ? run(tiles::attention_tiles_dq<64>,
                           tiles::attention_tiles_dkdv<64>)
                     : run(tiles::attention_tiles_dq<128>,
                           tiles::attention_tiles_dkdv<128>);
}

} // namespace
} // namespace loom::cuda

using namespace loom::cuda;

/// out, lse = attention(q, k, v[, step]).
extern "C" int32_t loom_cuda_attention(const loom_call_frame *frame,
                                       void *const *buffers,
                                       const int64_t *meta,
                                       loom_cuda_context *context) {
  ProfileScope scope(context, "attention");
  KernelArgs args(buffers, meta);
  Attention a;
  Path path;
  if (int32_t status = readAttention<Kernel::attention>(
          args, frame, "attention", 3, 2, 0, a))
    return status;
  if (int32_t status = firstPath("attention", path))
    return status;
  context->attentionPath.clear();
  if (a.seq == 0 || a.batch == 0 || a.heads == 0)
    return 0;
  const View &qv = args.in(0), &kv = args.in(1), &vv = args.in(2);
  const View &outv = args.out(0), &lsev = args.out(1);
  std::string refusal;
  if (path == Path::Cudnn) {
    if (const char *why = cudnnMismatch(a, {&qv, &kv, &vv, &outv}, lsev)) {
      refusal = why;
    } else {
      cudnn::Forward call;
      call.problem = problemOf(a);
      call.q = qShaped(a, qv);
      call.k = kvShaped(a, kv);
      call.v = kvShaped(a, vv);
      call.out = qShaped(a, outv);
      call.lse = static_cast<float *>(lsev.data);
      cudnn::Outcome outcome = cudnn::forward(context, call);
      if (outcome.ran) {
        recordPath(context, scope, "attention", "cudnn", outcome.engine, "");
        return 0;
      }
      refusal = outcome.refusal;
    }
  }
  Floats q = floats(qv), k = floats(kv), v = floats(vv);
  Floats out = floats(outv), lse = floats(lsev);
  if (path != Path::Simt && onTiles(a, {&qv, &kv, &vv})) {
    recordPath(context, scope, "attention", "tiles", -1, refusal);
    dim3 grid = gridOf(a.seq, a.heads, a.batch);
    int64_t bytes = tiles::forwardSharedBytes(a.dim);
    auto launch = [&](auto kernel) {
      return launchTiles("attention", kernel, grid, bytes, context->stream,
                         static_cast<const tiles::Shape &>(a), bf16s(qv),
                         bf16s(kv), bf16s(vv), tileTensor(outv),
                         tileTensor(lsev));
    };
    return a.dim <= 64 ? launch(tiles::attention_tiles_forward<64>)
                       : launch(tiles::attention_tiles_forward<128>);
  }
  recordPath(context, scope, "attention", "simt", -1, refusal);
  withHeadBound(a.dim, [&](auto bound) {
    attention_forward_kernel<decltype(bound)::value>
        <<<gridOf(a.seq, a.heads, a.batch), kRows, 0, context->stream>>>(
            a, q, k, v, out, lse);
  });
  return checkLaunch("attention");
}

/// dq, dk, dv = attention_grad(dout, q, k, v, out, lse[, step]).
extern "C" int32_t loom_cuda_attention_grad(const loom_call_frame *frame,
                                            void *const *buffers,
                                            const int64_t *meta,
                                            loom_cuda_context *context) {
  ProfileScope scope(context, "attention_grad");
  KernelArgs args(buffers, meta);
  Attention a;
  Path path;
  if (int32_t status = readAttention<Kernel::attention_grad>(
          args, frame, "attention_grad", 6, 3, 1, a))
    return status;
  if (int32_t status = firstPath("attention_grad", path))
    return status;
  context->attentionPath.clear();
  // Without queries (seq or heads 0) dk and dv are still written, as zeros.
  if (a.batch == 0)
    return 0;
  std::string refusal;
  if (path == Path::Cudnn) {
    if (const char *why = cudnnMismatch(a,
                                        {&args.in(0), &args.in(1), &args.in(2),
                                         &args.in(3), &args.in(4), &args.out(0),
                                         &args.out(1), &args.out(2)},
                                        args.in(5))) {
      refusal = why;
    } else {
      cudnn::Backward call;
      call.problem = problemOf(a);
      call.dout = qShaped(a, args.in(0));
      call.q = qShaped(a, args.in(1));
      call.k = kvShaped(a, args.in(2));
      call.v = kvShaped(a, args.in(3));
      call.out = qShaped(a, args.in(4));
      call.lse = static_cast<const float *>(args.in(5).data);
      call.dq = qShaped(a, args.out(0));
      call.dk = kvShaped(a, args.out(1));
      call.dv = kvShaped(a, args.out(2));
      cudnn::Outcome outcome = cudnn::backward(context, call);
      if (outcome.ran) {
        recordPath(context, scope, "attention_grad", "cudnn", outcome.engine,
                   "");
        return 0;
      }
      refusal = outcome.refusal;
    }
  }
  int64_t rows = a.batch * a.heads * a.seq;
  if (int32_t status = needScratch(context, "attention_grad",
                                   rows * static_cast<int64_t>(sizeof(float))))
    return status;
  float *rowDot = static_cast<float *>(context->scratch);
  Floats dout = floats(args.in(0)), q = floats(args.in(1)),
         k = floats(args.in(2)), v = floats(args.in(3)),
         out = floats(args.in(4)), lse = floats(args.in(5));
  Floats dq = floats(args.out(0)), dk = floats(args.out(1)),
         dv = floats(args.out(2));
  attention_row_dot_kernel<<<blocksFor(rows), kThreads, 0, context->stream>>>(
      a, dout, out, rowDot);
  if (int32_t status = checkLaunch("attention_grad"))
    return status;
  if (path != Path::Simt &&
      onTiles(a, {&args.in(0), &args.in(1), &args.in(2), &args.in(3)})) {
    recordPath(context, scope, "attention_grad", "tiles", -1, refusal);
    return tilesGrad(a, args, rowDot, context);
  }
  recordPath(context, scope, "attention_grad", "simt", -1, refusal);
  withHeadBound(a.dim, [&](auto bound) {
    constexpr int kMaxD = decltype(bound)::value;
    if (a.seq > 0 && a.heads > 0)
      attention_backward_dq_kernel<kMaxD>
          <<<gridOf(a.seq, a.heads, a.batch), kRows, 0, context->stream>>>(
              a, dout, q, k, v, lse, rowDot, dq);
    attention_backward_dkdv_kernel<kMaxD>
        <<<gridOf(a.kvSeq, a.kvHeads, a.batch), kRows, 0, context->stream>>>(
            a, dout, q, k, v, lse, rowDot, dk, dv);
  });
  return checkLaunch("attention_grad");
}

/// Which kernels ran the context's latest attention call.
extern "C" const char *
loom_cuda_attention_path(const loom_cuda_context *context) {
  return context->attentionPath.c_str();
}
