//===- AttentionTilesTest.cpp - The tensor-core attention, emulated -------===//
//
// Runs the kernels of runtime/cuda/kernels/AttentionTiles.cuh (what
// loom_cuda_attention and attention_grad launch for bf16 without dropout)
// on the host through test/Unit/CudaEmulation.h, so that their tiling,
// masking, online softmax and gradients are checked on machines without a
// GPU, against attention computed here in double from the same bf16
// inputs. On a GPU, unit/CudaKernelTest checks the compiled kernels
// against the CPU kernel.
//
// Tolerance: 2e-2 of the tensor's largest magnitude, per element. P and dS
// are rounded to bf16 (8 bits of mantissa) before they multiply, and out,
// dq, dk, dv are stored in bf16; the largest error measured over these
// cases is 4.1e-3 of the largest magnitude.
//
//===----------------------------------------------------------------------===//

#include "CudaEmulation.h"

#include "runtime/cuda/kernels/AttentionTiles.cuh"

#include "gtest/gtest.h"

#include <algorithm>
#include <random>
#include <string>

namespace {

using loom::cuda::tiles::Shape;
using loom::cuda::tiles::Tensor;
namespace tiles = loom::cuda::tiles;

std::vector<Bf16> randomBf16(size_t n, std::mt19937 &rng, float range) {
  std::uniform_real_distribution<float> uniform(-range, range);
  std::vector<Bf16> values(n);
  for (Bf16 &v : values)
    v = toBf16(uniform(rng));
  return values;
}

std::vector<double> widen(const std::vector<Bf16> &values) {
  std::vector<double> wide(values.size());
  for (size_t i = 0; i < values.size(); ++i)
    wide[i] = toFloat(values[i]);
  return wide;
}

/// Attention and its gradient in double, as runtime/cpu/kernels/Attention.cpp
/// defines them (no dropout).
struct Reference {
  const Shape &a;
  std::vector<double> q, k, v;

  double score(int64_t b, int64_t h, int64_t s, int64_t t) const {
    int64_t kv = h / (a.heads / a.kvHeads);
    double sum = 0;
    for (int64_t d = 0; d < a.dim; ++d)
      sum += q[((b * a.seq + s) * a.heads + h) * a.dim + d] *
             k[((b * a.kvSeq + t) * a.kvHeads + kv) * a.dim + d];
    return sum * a.scale;
  }
  int64_t keys(int64_t s) const { return a.causal ? s + 1 : a.kvSeq; }
  double logSumExp(int64_t b, int64_t h, int64_t s) const {
    double max = -INFINITY, sum = 0;
    for (int64_t t = 0; t < keys(s); ++t)
      max = std::max(max, score(b, h, s, t));
    for (int64_t t = 0; t < keys(s); ++t)
      sum += std::exp(score(b, h, s, t) - max);
    return max + std::log(sum);
  }

  void forward(std::vector<double> &out, std::vector<double> &lse) const {
    out.assign(q.size(), 0.0);
    lse.assign(a.batch * a.heads * a.seq, 0.0);
    for (int64_t b = 0; b < a.batch; ++b)
      for (int64_t h = 0; h < a.heads; ++h)
        for (int64_t s = 0; s < a.seq; ++s) {
          double l = logSumExp(b, h, s);
          lse[(b * a.heads + h) * a.seq + s] = l;
          int64_t kv = h / (a.heads / a.kvHeads);
          for (int64_t t = 0; t < keys(s); ++t) {
            double p = std::exp(score(b, h, s, t) - l);
            for (int64_t d = 0; d < a.dim; ++d)
              out[((b * a.seq + s) * a.heads + h) * a.dim + d] +=
                  p * v[((b * a.kvSeq + t) * a.kvHeads + kv) * a.dim + d];
          }
        }
  }

  /// dq, dk, dv at dout, with rowDot = rowsum(dout * out).
  void backward(const std::vector<double> &dout,
                const std::vector<double> &rowDot, std::vector<double> &dq,
                std::vector<double> &dk, std::vector<double> &dv) const {
    dq.assign(q.size(), 0.0);
    dk.assign(k.size(), 0.0);
    dv.assign(v.size(), 0.0);
    for (int64_t b = 0; b < a.batch; ++b)
      for (int64_t h = 0; h < a.heads; ++h)
        for (int64_t s = 0; s < a.seq; ++s) {
          double l = logSumExp(b, h, s);
          int64_t kv = h / (a.heads / a.kvHeads);
          int64_t qRow = ((b * a.seq + s) * a.heads + h) * a.dim;
          for (int64_t t = 0; t < keys(s); ++t) {
            int64_t kvRow = ((b * a.kvSeq + t) * a.kvHeads + kv) * a.dim;
            double p = std::exp(score(b, h, s, t) - l), dp = 0;
            for (int64_t d = 0; d < a.dim; ++d)
              dp += dout[qRow + d] * v[kvRow + d];
            double ds = p * (dp - rowDot[(b * a.heads + h) * a.seq + s]);
            for (int64_t d = 0; d < a.dim; ++d) {
              dq[qRow + d] += a.scale * ds * k[kvRow + d];
              dk[kvRow + d] += a.scale * ds * q[qRow + d];
              dv[kvRow + d] += p * dout[qRow + d];
            }
          }
        }
  }
};

/// Fails the test where `got` differs from `want` by more than 2e-2 of
/// want's largest magnitude.
void expectClose(const std::string &what, const std::vector<Bf16> &got,
                 const std::vector<double> &want) {
  ASSERT_EQ(got.size(), want.size()) << what;
  double largest = 0, worst = 0;
  for (double w : want)
    largest = std::max(largest, std::fabs(w));
  size_t bad = 0;
  for (size_t i = 0; i < got.size(); ++i) {
    double error = std::fabs(toFloat(got[i]) - want[i]);
    worst = std::max(worst, error);
    if (error > 2e-2 * largest && bad++ < 5)
      ADD_FAILURE() << what << "[" << i << "]: " << toFloat(got[i])
                    << ", expected " << want[i];
  }
  EXPECT_EQ(bad, 0u) << what << ": largest error " << worst / largest
                     << " of the largest magnitude " << largest;
}

emu::Dim3 gridOf(int64_t rows, int64_t heads, int64_t batch) {
  return {static_cast<unsigned>((rows + tiles::kRows - 1) / tiles::kRows),
          static_cast<unsigned>(heads), static_cast<unsigned>(batch)};
}

/// A copy of `values` one element past a 16-byte boundary: the kernels'
/// tile loads go value by value then.
struct Shifted {
  std::vector<Bf16> storage;
  explicit Shifted(const std::vector<Bf16> &values)
      : storage(values.size() + 8) {
    Bf16 *start =
        storage.data() +
        (8 - reinterpret_cast<uintptr_t>(storage.data()) / 2 % 8) % 8 + 1;
    std::copy(values.begin(), values.end(), start);
    data = start;
  }
  const Bf16 *data;
};

template <int kMaxD> void runCase(const Shape &a, bool unaligned = false) {
  std::mt19937 rng(7);
  std::vector<Bf16> q = randomBf16(a.batch * a.seq * a.heads * a.dim, rng, 2),
                    k = randomBf16(a.batch * a.kvSeq * a.kvHeads * a.dim, rng,
                                   2),
                    v = randomBf16(k.size(), rng, 1),
                    dout = randomBf16(q.size(), rng, 1);
  Reference reference{a, widen(q), widen(k), widen(v)};
  Shifted qShifted(q), kShifted(k), vShifted(v), doutShifted(dout);
  const Bf16 *qIn = unaligned ? qShifted.data : q.data(),
             *kIn = unaligned ? kShifted.data : k.data(),
             *vIn = unaligned ? vShifted.data : v.data(),
             *doutIn = unaligned ? doutShifted.data : dout.data();

  // Forward: out in bf16, lse in f32.
  std::vector<Bf16> out(q.size());
  std::vector<float> lse(a.batch * a.heads * a.seq);
  emu::launch(gridOf(a.seq, a.heads, a.batch), tiles::kThreads,
              tiles::forwardSharedBytes(a.dim), [&] {
                tiles::attention_tiles_forward<kMaxD>(
                    a, qIn, kIn, vIn, Tensor{out.data(), true},
                    Tensor{lse.data(), false});
              });
  std::vector<double> wantOut, wantLse;
  reference.forward(wantOut, wantLse);
  expectClose("out", out, wantOut);
  for (size_t i = 0; i < lse.size(); ++i)
    EXPECT_NEAR(lse[i], wantLse[i], 1e-3 * std::max(1.0, std::fabs(wantLse[i])))
        << "lse[" << i << "]";

  // Backward at the kernel's own out and lse, as training runs it.
  std::vector<float> rowDot(lse.size());
  std::vector<double> rowDotWide(lse.size());
  for (int64_t b = 0; b < a.batch; ++b)
    for (int64_t h = 0; h < a.heads; ++h)
      for (int64_t s = 0; s < a.seq; ++s) {
        double sum = 0;
        for (int64_t d = 0; d < a.dim; ++d) {
          int64_t i = ((b * a.seq + s) * a.heads + h) * a.dim + d;
          sum += double(toFloat(dout[i])) * toFloat(out[i]);
        }
        rowDot[(b * a.heads + h) * a.seq + s] = static_cast<float>(sum);
        rowDotWide[(b * a.heads + h) * a.seq + s] = sum;
      }
  std::vector<Bf16> dq(q.size()), dk(k.size()), dv(v.size());
  emu::launch(gridOf(a.seq, a.heads, a.batch), tiles::kThreads,
              tiles::dqSharedBytes(a.dim), [&] {
                tiles::attention_tiles_dq<kMaxD>(
                    a, doutIn, qIn, kIn, vIn, Tensor{lse.data(), false},
                    rowDot.data(), Tensor{dq.data(), true});
              });
  emu::launch(gridOf(a.kvSeq, a.kvHeads, a.batch), tiles::kThreads,
              tiles::dkdvSharedBytes(a.dim), [&] {
                tiles::attention_tiles_dkdv<kMaxD>(
                    a, doutIn, qIn, kIn, vIn, Tensor{lse.data(), false},
                    rowDot.data(), Tensor{dk.data(), true},
                    Tensor{dv.data(), true});
              });
  std::vector<double> wantDq, wantDk, wantDv;
  reference.backward(widen(dout), rowDotWide, wantDq, wantDk, wantDv);
  expectClose("dq", dq, wantDq);
  expectClose("dk", dk, wantDk);
  expectClose("dv", dv, wantDv);
}

Shape shape(int64_t batch, int64_t seq, int64_t heads, int64_t kvSeq,
            int64_t kvHeads, int64_t dim, bool causal) {
  return {batch,   seq, heads,  kvSeq,
          kvHeads, dim, causal, static_cast<float>(1.0 / std::sqrt(dim))};
}

// Grouped query heads, one partial tile, causal.
TEST(AttentionTilesTest, CausalGroupedPartialTile) {
  runCase<64>(shape(1, 24, 2, 24, 1, 16, true));
}

// Two tiles of queries and keys, the second partial; GPT-2's head size.
TEST(AttentionTilesTest, CausalTwoTilesHead64) {
  runCase<64>(shape(1, 100, 2, 100, 2, 64, true));
}

// More keys than queries, not causal, one key/value head for two.
TEST(AttentionTilesTest, CrossLengthsNotCausal) {
  runCase<64>(shape(1, 40, 2, 70, 1, 32, false));
}

// Two batches, a head size (80) that uses part of the 128 bound.
TEST(AttentionTilesTest, TwoBatchesHead80) {
  runCase<128>(shape(2, 20, 2, 20, 2, 80, true));
}

// GPT-2's head size with every input one element off 16 bytes: the tile
// loads value by value instead of 16 bytes at once.
TEST(AttentionTilesTest, UnalignedInputsHead64) {
  runCase<64>(shape(1, 70, 2, 70, 1, 64, true), /*unaligned=*/true);
}

// The largest head size, three key tiles.
TEST(AttentionTilesTest, Head128ThreeKeyTiles) {
  runCase<128>(shape(1, 30, 1, 150, 1, 128, false));
}

} // namespace
