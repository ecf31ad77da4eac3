//===- AttentionTiles.cuh - Attention on bf16 tensor-core tiles -*- CUDA
//-*-===//
//
// loom_cuda_attention and attention_grad without dropout, for bf16 q, k, v
// (and dout) with a head dimension that is a multiple of 16 up to 128:
// FlashAttention-2 (Dao 2023) on 16 x 16 x 16 WMMA fragments with f32
// accumulation. A block of four warps takes 64 rows (queries in the forward
// and dq kernels, keys in the dk/dv kernel), each warp 16 of them; the other
// side passes through shared memory 64 rows at a time.
//
//   forward  S = Q K^T; the online softmax on the warp's rows, two lanes
//            per row, each with half its columns (the row's running
//            maximum and sum in both lanes' registers, met by one
//            shuffle); P in bf16; the f32 output accumulator, in shared
//            memory, rescaled and then O += P V.
//   dq       S = Q K^T and dP = dO V^T; dS = P * (dP - rowsum(dO * O)) in
//            bf16; dq += scale * dS K, in fragments.
//   dk, dv   the transposes, per block of keys: S^T = K Q^T, dP^T = V dO^T,
//            dv += P^T dO and dk += scale * dS^T Q over every query head of
//            the keys' group and the queries that see them.
// P and dS are rounded to bf16 before they multiply, as FlashAttention
// does; every sum is f32.
//
// The file is device code alone and takes the CUDA vocabulary from its
// includer, so that test/Unit/AttentionTilesTest.cpp runs these kernels on
// the host through an emulation of it (test/Unit/CudaEmulation.h):
//   Bf16, toBf16(float), toFloat(Bf16)      the bf16 type and conversions
//   Vec16, load16(p), store16(p, v)         16 bytes, moved at once from
//                                           and to 16-byte aligned p
//   namespace wmma                          fragment, fill_fragment,
//                                           load/store_matrix_sync, mma_sync
//   threadIdx, blockIdx, gridDim, __syncthreads, __syncwarp,
//   __shfl_xor_sync
//   LOOM_TILE_DEVICE                        a device function's qualifiers
//   LOOM_TILE_KERNEL                        a kernel's (128 threads)
//   LOOM_TILE_SHARED(name)                  `unsigned char *name`: the
//                                           block's dynamic shared memory
//
//===----------------------------------------------------------------------===//

#ifndef LOOM_RUNTIME_CUDA_KERNELS_ATTENTIONTILES_CUH
#define LOOM_RUNTIME_CUDA_KERNELS_ATTENTIONTILES_CUH

#include <cmath>
#include <cstdint>

namespace loom::cuda::tiles {

constexpr int kRows = 64; // rows of a block, and of a tile of the other side
constexpr int kEdge = 16; // of a WMMA fragment
constexpr int kWarps = kRows / kEdge;
constexpr int kThreads = 32 * kWarps;

/// A tensor the kernels read or write: f32 or bf16.
struct Tensor {
  void *data;
  bool bf16;

  LOOM_TILE_DEVICE float operator[](int64_t i) const {
    return bf16 ? toFloat(static_cast<const Bf16 *>(data)[i])
                : static_cast<const float *>(data)[i];
  }
  LOOM_TILE_DEVICE void store(int64_t i, float value) const {
    if (bf16)
      static_cast<Bf16 *>(data)[i] = toBf16(value);
    else
      static_cast<float *>(data)[i] = value;
  }
};

/// The shape of an attention call: q-shaped tensors [B, S, Hq, D], k-shaped
/// [B, Skv, Hkv, D]; key/value head h / (Hq / Hkv) serves query head h.
struct Shape {
  int64_t batch, seq, heads, kvSeq, kvHeads, dim;
  bool causal;
  float scale;

  LOOM_TILE_DEVICE int64_t qStride() const { return heads * dim; }
  LOOM_TILE_DEVICE int64_t kvStride() const { return kvHeads * dim; }
  /// The offset of row (b, s = 0, h) of q-shaped tensors.
  LOOM_TILE_DEVICE int64_t qHead(int64_t b, int64_t h) const {
    return (b * seq * heads + h) * dim;
  }
  /// The offset of row (b, t = 0, kv) of k-shaped tensors.
  LOOM_TILE_DEVICE int64_t kvHead(int64_t b, int64_t kv) const {
    return (b * kvSeq * kvHeads + kv) * dim;
  }
  /// kvHead of the key/value head that serves query head h.
  LOOM_TILE_DEVICE int64_t kvHeadFor(int64_t b, int64_t h) const {
    return kvHead(b, h / (heads / kvHeads));
  }
  /// The offset of (b, h, s = 0) in lse-shaped tensors [B, Hq, S].
  LOOM_TILE_DEVICE int64_t statRow(int64_t b, int64_t h) const {
    return (b * heads + h) * seq;
  }
  /// Whether query s sees key t.
  LOOM_TILE_DEVICE bool sees(int64_t s, int64_t t) const {
    return s < seq && t < kvSeq && (!causal || t <= s);
  }
  /// The keys the queries [first, first + kRows) see: a multiple of kRows
  /// or all of them.
  LOOM_TILE_DEVICE int64_t keysFor(int64_t first) const {
    return causal && first + kRows < kvSeq ? first + kRows : kvSeq;
  }
};

/// Shared memory of each kernel, in bytes, for head dimension `dim`: bf16
/// tiles of kRows x dim, f32 and bf16 tiles of kRows x kRows, an f32
/// kRows x dim accumulator or staging area, and the dk/dv kernel's two
/// rows of query statistics.
inline int64_t forwardSharedBytes(int64_t dim) {
  return 3 * kRows * dim * 2 + kRows * kRows * (4 + 2) + kRows * dim * 4;
}
inline int64_t dqSharedBytes(int64_t dim) {
  return 4 * kRows * dim * 2 + kRows * kRows * (4 + 4 + 2) + kRows * dim * 4;
}
inline int64_t dkdvSharedBytes(int64_t dim) {
  return 4 * kRows * dim * 2 + kRows * kRows * (4 + 4 + 2 + 2) +
         kRows * dim * 4 + 2 * kRows * 4;
}

using FragA =
    wmma::fragment<wmma::matrix_a, kEdge, kEdge, kEdge, Bf16, wmma::row_major>;
using FragB =
    wmma::fragment<wmma::matrix_b, kEdge, kEdge, kEdge, Bf16, wmma::row_major>;
using FragBT =
    wmma::fragment<wmma::matrix_b, kEdge, kEdge, kEdge, Bf16, wmma::col_major>;
using FragC = wmma::fragment<wmma::accumulator, kEdge, kEdge, kEdge, float>;

/// Rows [first, first + kRows) of one head (starting at `head`) of a bf16
/// tensor of rows `stride` apart into tile[kRows][dim], zeros past `rows`:
/// 16 bytes (8 values) per load where the head starts on 16 bytes and the
/// stride keeps its rows there (dim is a multiple of 16 on this path), as
/// the kernels' own tensors do; else value by value.
LOOM_TILE_DEVICE void loadTile(Bf16 *tile, const Bf16 *from, int64_t head,
                               int64_t stride, int64_t first, int64_t rows,
                               int dim) {
  constexpr int kPerVector = 16 / sizeof(Bf16);
  if (reinterpret_cast<uintptr_t>(from + head) % 16 == 0 &&
      stride % kPerVector == 0) {
    int vectors = dim / kPerVector; // per row
    for (int i = threadIdx.x; i < kRows * vectors; i += kThreads) {
      int row = i / vectors, at = (i % vectors) * kPerVector;
      Vec16 value = {};
      if (first + row < rows)
        value = load16(from + head + (first + row) * stride + at);
      store16(tile + row * dim + at, value);
    }
    return;
  }
  for (int i = threadIdx.x; i < kRows * dim; i += kThreads) {
    int row = i / dim, d = i % dim;
    tile[i] = first + row < rows ? from[head + (first + row) * stride + d]
                                 : toBf16(0.0f);
  }
}

/// c[16][kRows] = a[16][dim] b[kRows][dim]^T, by one warp (ld: dim, dim,
/// kRows).
LOOM_TILE_DEVICE void timesTransposed(const Bf16 *a, const Bf16 *b, float *c,
                                      int dim) {
  for (int n = 0; n < kRows / kEdge; ++n) {
    FragC sum;
    wmma::fill_fragment(sum, 0.0f);
    for (int k = 0; k < dim; k += kEdge) {
      FragA x;
      FragBT y;
      wmma::load_matrix_sync(x, a + k, dim);
      wmma::load_matrix_sync(y, b + n * kEdge * dim + k, dim);
      wmma::mma_sync(sum, x, y, sum);
    }
    wmma::store_matrix_sync(c + n * kEdge, sum, kRows, wmma::mem_row_major);
  }
}

/// sums[c] += a[16][kRows] b[kRows][dim], column block c of the result in
/// sums[c], by one warp (ld: kRows, dim).
template <int kMaxD>
LOOM_TILE_DEVICE void accumulate(FragC (&sums)[kMaxD / kEdge], const Bf16 *a,
                                 const Bf16 *b, int dim) {
#pragma unroll
  for (int c = 0; c < kMaxD / kEdge; ++c) {
    if (c * kEdge >= dim)
      break;
    for (int k = 0; k < kRows; k += kEdge) {
      FragA x;
      FragB y;
      wmma::load_matrix_sync(x, a + k, kRows);
      wmma::load_matrix_sync(y, b + k * dim + c * kEdge, dim);
      wmma::mma_sync(sums[c], x, y, sums[c]);
    }
  }
}

/// o[16][dim] += a[16][kRows] b[kRows][dim], o f32 in shared memory, by one
/// warp (ld: dim, kRows, dim).
LOOM_TILE_DEVICE void accumulateInto(float *o, const Bf16 *a, const Bf16 *b,
                                     int dim) {
  for (int c = 0; c < dim; c += kEdge) {
    FragC sum;
    wmma::load_matrix_sync(sum, o + c, dim, wmma::mem_row_major);
    for (int k = 0; k < kRows; k += kEdge) {
      FragA x;
      FragB y;
      wmma::load_matrix_sync(x, a + k, kRows);
      wmma::load_matrix_sync(y, b + k * dim + c, dim);
      wmma::mma_sync(sum, x, y, sum);
    }
    wmma::store_matrix_sync(o + c, sum, dim, wmma::mem_row_major);
  }
}

/// The warp's 16 x dim fragments through its rows of `staging` (f32, ld
/// dim) into rows [first, first + 16) of one head of `to`, up to `rows`.
template <int kMaxD>
LOOM_TILE_DEVICE void
storeRows(const FragC (&sums)[kMaxD / kEdge], float *staging, Tensor to,
          int64_t head, int64_t stride, int64_t first, int64_t rows, int dim) {
  int lane = threadIdx.x % 32;
#pragma unroll
  for (int c = 0; c < kMaxD / kEdge; ++c)
    if (c * kEdge < dim)
      wmma::store_matrix_sync(staging + c * kEdge, sums[c], dim,
                              wmma::mem_row_major);
  __syncwarp();
  for (int r = 0; r < kEdge && first + r < rows; ++r)
    for (int d = lane; d < dim; d += 32)
      to.store(head + (first + r) * stride + d, staging[r * dim + d]);
  __syncwarp();
}

/// The first query of this block's tile, last tiles first: under a causal
/// mask they see the most keys, and the GPU starts blocks in order, so the
/// long ones do not trail.
LOOM_TILE_DEVICE int64_t reversedTileFirst() {
  return static_cast<int64_t>(gridDim.x - 1 - blockIdx.x) * kRows;
}

LOOM_TILE_DEVICE float warpMax(float value) {
  for (int offset = 16; offset > 0; offset >>= 1)
    value = fmaxf(value, __shfl_xor_sync(0xffffffffu, value, offset));
  return value;
}

LOOM_TILE_DEVICE float warpSum(float value) {
  for (int offset = 16; offset > 0; offset >>= 1)
    value += __shfl_xor_sync(0xffffffffu, value, offset);
  return value;
}

/// out, lse = attention(q, k, v): a block per (64 queries, query head,
/// batch), forwardSharedBytes(dim) of shared memory.
template <int kMaxD>
LOOM_TILE_KERNEL void attention_tiles_forward(Shape a, const Bf16 *q,
                                              const Bf16 *k, const Bf16 *v,
                                              Tensor out, Tensor lse) {
  LOOM_TILE_SHARED(shared);
  const int dim = static_cast<int>(a.dim);
  Bf16 *queries = reinterpret_cast<Bf16 *>(shared);
  Bf16 *keys = queries + kRows * dim, *values = keys + kRows * dim;
  float *scores = reinterpret_cast<float *>(values + kRows * dim);
  Bf16 *probs = reinterpret_cast<Bf16 *>(scores + kRows * kRows);
  float *acc = reinterpret_cast<float *>(probs + kRows * kRows);

  int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
  int64_t b = blockIdx.z, h = blockIdx.y;
  int64_t first = reversedTileFirst();
  int64_t kvHead = a.kvHeadFor(b, h);
  loadTile(queries, q, a.qHead(b, h), a.qStride(), first, a.seq, dim);
  for (int i = threadIdx.x; i < kRows * dim; i += kThreads)
    acc[i] = 0.0f;
  // The warp's rows: query first + mine + r is row mine + r of the tiles.
  // Lanes 2r and 2r + 1 share row r of the warp's 16, each taking half of
  // the tile's 64 columns (and of the row's accumulator), and meet by one
  // shuffle; each walks its half from a lane-dependent start, so that the
  // warp's 32 lanes read 32 different banks.
  int mine = warp * kEdge, row = lane / 2, half = lane % 2;
  int64_t s = first + mine + row;
  float *rowScores = scores + (mine + row) * kRows + half * (kRows / 2);
  Bf16 *rowProbs = probs + (mine + row) * kRows + half * (kRows / 2);
  float *rowAcc = acc + (mine + row) * dim + half * (dim / 2);
  float rowMax = -INFINITY, rowSum = 0.0f;

  for (int64_t t0 = 0; t0 < a.keysFor(first); t0 += kRows) {
    __syncthreads(); // the previous tile's keys and values are used up
    loadTile(keys, k, kvHead, a.kvStride(), t0, a.kvSeq, dim);
    loadTile(values, v, kvHead, a.kvStride(), t0, a.kvSeq, dim);
    __syncthreads();
    timesTransposed(queries + mine * dim, keys, scores + mine * kRows, dim);
    __syncwarp();
    constexpr int kHalf = kRows / 2;
    float x[kHalf];
    float tileMax = -INFINITY;
#pragma unroll
    for (int j = 0; j < kHalf; ++j) {
      int col = (j + lane) % kHalf;
      x[j] = a.sees(s, t0 + half * kHalf + col) ? rowScores[col] * a.scale
                                                : -INFINITY;
      tileMax = fmaxf(tileMax, x[j]);
    }
    float newMax =
        fmaxf(rowMax, fmaxf(tileMax, __shfl_xor_sync(0xffffffffu, tileMax, 1)));
    // A row that has seen no key yet keeps max -inf, sum 0 and p = 0.
    float correction = newMax == -INFINITY ? 1.0f : expf(rowMax - newMax);
    float tileSum = 0.0f;
#pragma unroll
    for (int j = 0; j < kHalf; ++j) {
      int col = (j + lane) % kHalf;
      float p = x[j] == -INFINITY ? 0.0f : expf(x[j] - newMax);
      rowProbs[col] = toBf16(p);
      tileSum += p;
    }
    tileSum += __shfl_xor_sync(0xffffffffu, tileSum, 1);
    rowSum = rowSum * correction + tileSum;
    rowMax = newMax;
    for (int j = 0; j < dim / 2; ++j)
      rowAcc[(j + lane) % (dim / 2)] *= correction;
    __syncwarp();
    accumulateInto(acc + mine * dim, probs + mine * kRows, values, dim);
  }
  __syncwarp();
  if (s < a.seq) {
    float inverse = 1.0f / rowSum;
    int64_t at = a.qHead(b, h) + s * a.qStride() + half * (dim / 2);
    for (int j = 0; j < dim / 2; ++j) {
      int d = (j + lane) % (dim / 2);
      out.store(at + d, rowAcc[d] * inverse);
    }
    if (half == 0)
      lse.store(a.statRow(b, h) + s, rowMax + logf(rowSum));
  }
}

/// dq of attention_grad(dout, q, k, v, out, lse), with rowDot[b, h, s] =
/// sum(dout * out) over row (b, s, h): a block per (64 queries, query head,
/// batch), dqSharedBytes(dim) of shared memory.
template <int kMaxD>
LOOM_TILE_KERNEL void
attention_tiles_dq(Shape a, const Bf16 *dout, const Bf16 *q, const Bf16 *k,
                   const Bf16 *v, Tensor lse, const float *rowDot, Tensor dq) {
  LOOM_TILE_SHARED(shared);
  const int dim = static_cast<int>(a.dim);
  Bf16 *queries = reinterpret_cast<Bf16 *>(shared);
  Bf16 *gradOuts = queries + kRows * dim, *keys = gradOuts + kRows * dim,
       *values = keys + kRows * dim;
  float *scores = reinterpret_cast<float *>(values + kRows * dim);
  float *gradProbs = scores + kRows * kRows;
  Bf16 *gradScores = reinterpret_cast<Bf16 *>(gradProbs + kRows * kRows);
  float *staging = reinterpret_cast<float *>(gradScores + kRows * kRows);

  int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
  int64_t b = blockIdx.z, h = blockIdx.y;
  int64_t first = reversedTileFirst();
  int64_t kvHead = a.kvHeadFor(b, h);
  loadTile(queries, q, a.qHead(b, h), a.qStride(), first, a.seq, dim);
  loadTile(gradOuts, dout, a.qHead(b, h), a.qStride(), first, a.seq, dim);
  int mine = warp * kEdge;
  float *myScores = scores + mine * kRows,
        *myGradProbs = gradProbs + mine * kRows;
  Bf16 *myGradScores = gradScores + mine * kRows;
  float rowLse[kEdge], rowDots[kEdge];
#pragma unroll
  for (int r = 0; r < kEdge; ++r) {
    int64_t s = first + mine + r;
    rowLse[r] = s < a.seq ? lse[a.statRow(b, h) + s] : 0.0f;
    rowDots[r] = s < a.seq ? rowDot[a.statRow(b, h) + s] : 0.0f;
  }
  FragC sums[kMaxD / kEdge];
#pragma unroll
  for (int c = 0; c < kMaxD / kEdge; ++c)
    wmma::fill_fragment(sums[c], 0.0f);

  for (int64_t t0 = 0; t0 < a.keysFor(first); t0 += kRows) {
    __syncthreads();
    loadTile(keys, k, kvHead, a.kvStride(), t0, a.kvSeq, dim);
    loadTile(values, v, kvHead, a.kvStride(), t0, a.kvSeq, dim);
    __syncthreads();
    timesTransposed(queries + mine * dim, keys, myScores, dim);
    timesTransposed(gradOuts + mine * dim, values, myGradProbs, dim);
    __syncwarp();
#pragma unroll
    for (int r = 0; r < kEdge; ++r) {
      int64_t s = first + mine + r;
      for (int half = 0; half < 2; ++half) {
        int col = lane + 32 * half, at = r * kRows + col;
        float p = a.sees(s, t0 + col) ? expf(myScores[at] * a.scale - rowLse[r])
                                      : 0.0f;
        myGradScores[at] = toBf16(p * (myGradProbs[at] - rowDots[r]) * a.scale);
      }
    }
    __syncwarp();
    accumulate<kMaxD>(sums, myGradScores, keys, dim);
  }
  storeRows<kMaxD>(sums, staging + mine * dim, dq, a.qHead(b, h), a.qStride(),
                   first + mine, a.seq, dim);
}

/// dk and dv of attention_grad: a block per (64 keys, key/value head,
/// batch), dkdvSharedBytes(dim) of shared memory.
template <int kMaxD>
LOOM_TILE_KERNEL void
attention_tiles_dkdv(Shape a, const Bf16 *dout, const Bf16 *q, const Bf16 *k,
                     const Bf16 *v, Tensor lse, const float *rowDot, Tensor dk,
                     Tensor dv) {
  LOOM_TILE_SHARED(shared);
  const int dim = static_cast<int>(a.dim);
  Bf16 *keys = reinterpret_cast<Bf16 *>(shared);
  Bf16 *values = keys + kRows * dim, *queries = values + kRows * dim,
       *gradOuts = queries + kRows * dim;
  float *scores = reinterpret_cast<float *>(gradOuts + kRows * dim);
  float *gradProbs = scores + kRows * kRows;
  Bf16 *probs = reinterpret_cast<Bf16 *>(gradProbs + kRows * kRows);
  Bf16 *gradScores = probs + kRows * kRows;
  float *staging = reinterpret_cast<float *>(gradScores + kRows * kRows);
  float *tileLse = staging + kRows * dim, *tileDot = tileLse + kRows;

  int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
  int64_t b = blockIdx.z, kv = blockIdx.y;
  int64_t first = static_cast<int64_t>(blockIdx.x) * kRows;
  loadTile(keys, k, a.kvHead(b, kv), a.kvStride(), first, a.kvSeq, dim);
  loadTile(values, v, a.kvHead(b, kv), a.kvStride(), first, a.kvSeq, dim);
  // The warp's rows: key first + mine + r is row mine + r of these tiles
  // (transposed scores: keys down, queries across).
  int mine = warp * kEdge;
  float *myScores = scores + mine * kRows,
        *myGradProbs = gradProbs + mine * kRows;
  Bf16 *myProbs = probs + mine * kRows,
       *myGradScores = gradScores + mine * kRows;
  FragC dkSums[kMaxD / kEdge], dvSums[kMaxD / kEdge];
#pragma unroll
  for (int c = 0; c < kMaxD / kEdge; ++c) {
    wmma::fill_fragment(dkSums[c], 0.0f);
    wmma::fill_fragment(dvSums[c], 0.0f);
  }

  int64_t group = a.heads / a.kvHeads;
  // Causal: only queries s >= t see key t, so none before the block's first.
  int64_t firstQuery = a.causal ? first : 0;
  for (int64_t h = kv * group; h < (kv + 1) * group; ++h) {
    for (int64_t s0 = firstQuery; s0 < a.seq; s0 += kRows) {
      __syncthreads(); // the previous tile's queries are used up
      loadTile(queries, q, a.qHead(b, h), a.qStride(), s0, a.seq, dim);
      loadTile(gradOuts, dout, a.qHead(b, h), a.qStride(), s0, a.seq, dim);
      for (int i = threadIdx.x; i < kRows; i += kThreads) {
        bool inside = s0 + i < a.seq;
        tileLse[i] = inside ? lse[a.statRow(b, h) + s0 + i] : 0.0f;
        tileDot[i] = inside ? rowDot[a.statRow(b, h) + s0 + i] : 0.0f;
      }
      __syncthreads();
      timesTransposed(keys + mine * dim, queries, myScores, dim);
      timesTransposed(values + mine * dim, gradOuts, myGradProbs, dim);
      __syncwarp();
#pragma unroll
      for (int r = 0; r < kEdge; ++r) {
        int64_t t = first + mine + r;
        for (int half = 0; half < 2; ++half) {
          int col = lane + 32 * half, at = r * kRows + col;
          float p = a.sees(s0 + col, t)
                        ? expf(myScores[at] * a.scale - tileLse[col])
                        : 0.0f;
          myProbs[at] = toBf16(p);
          myGradScores[at] =
              toBf16(p * (myGradProbs[at] - tileDot[col]) * a.scale);
        }
      }
      __syncwarp();
      accumulate<kMaxD>(dvSums, myProbs, gradOuts, dim);
      accumulate<kMaxD>(dkSums, myGradScores, queries, dim);
    }
  }
  storeRows<kMaxD>(dkSums, staging + mine * dim, dk, a.kvHead(b, kv),
                   a.kvStride(), first + mine, a.kvSeq, dim);
  storeRows<kMaxD>(dvSums, staging + mine * dim, dv, a.kvHead(b, kv),
                   a.kvStride(), first + mine, a.kvSeq, dim);
}

} // namespace loom::cuda::tiles

#endif // LOOM_RUNTIME_CUDA_KERNELS_ATTENTIONTILES_CUH
