//===- NormRowsTest.cpp - The warp-per-row layernorm, emulated ------------===//
//
// Runs the kernels of runtime/cuda/kernels/NormRows.cuh (what
// loom_cuda_layernorm and layernorm_grad launch for rows of at most 1024
// elements) on the host through test/Unit/CudaEmulation.h, against the
// layernorm of runtime/cpu/kernels/Norm.cpp computed here in double from
// the same inputs: every slot count (8, 16, 24, 32 per lane), partial
// lanes, more rows than the grid's warps (the grid-stride loop), f32 and
// bf16 storage, and the backward with a residual added to dx (the fused
// norm gradient of --loom-fuse). On a GPU, unit/CudaKernelTest checks the
// compiled kernels against the CPU kernel.
//
// Tolerance, per element: |got - want| <= tol * (|want| + rms(want)), tol
// 1e-5 for f32 storage and 1e-2 for bf16 (the result rounded to bf16), as
// CudaKernelTest's.
//
//===----------------------------------------------------------------------===//

#include "CudaEmulation.h"

namespace loom::cuda::rows {
/// An f32 or bf16 tensor, as Device.cuh's Floats.
struct Tensor {
  void *data;
  bool bf16;

  float operator[](int64_t i) const {
    return bf16 ? toFloat(static_cast<const Bf16 *>(data)[i])
                : static_cast<const float *>(data)[i];
  }
  void store(int64_t i, float value) const {
    if (bf16)
      static_cast<Bf16 *>(data)[i] = toBf16(value);
    else
      static_cast<float *>(data)[i] = value;
  }
};
} // namespace loom::cuda::rows

#include "runtime/cuda/kernels/NormRows.cuh"

#include "gtest/gtest.h"

#include <cmath>
#include <random>
#include <string>

namespace {

namespace rows = loom::cuda::rows;

/// Values of one tensor, as stored (f32 or bf16) and as the kernel reads
/// them.
struct Stored {
  bool bf16;
  std::vector<float> f32;
  std::vector<Bf16> b16;

  Stored(size_t n, bool bf16) : bf16(bf16), f32(n), b16(n) {}
  rows::Tensor tensor() {
    return {bf16 ? static_cast<void *>(b16.data()) : f32.data(), bf16};
  }
  double at(size_t i) const { return bf16 ? toFloat(b16[i]) : f32[i]; }
  void set(size_t i, float value) {
    f32[i] = value;
    b16[i] = toBf16(value);
  }
};

Stored random(size_t n, bool bf16, std::mt19937 &rng, float lo, float hi) {
  std::uniform_real_distribution<float> uniform(lo, hi);
  Stored s(n, bf16);
  for (size_t i = 0; i < n; ++i)
    s.set(i, uniform(rng));
  return s;
}

/// Counts the elements of `got` outside tol * (|want| + rms(want)).
int64_t mismatches(const Stored &got, const std::vector<double> &want,
                   double tol, const std::string &what) {
  double squares = 0;
  for (double w : want)
    squares += w * w;
  double rms = std::sqrt(squares / std::max<size_t>(want.size(), 1));
  int64_t bad = 0;
  for (size_t i = 0; i < want.size(); ++i)
    if (!(std::fabs(got.at(i) - want[i]) <= tol * (std::fabs(want[i]) + rms))) {
      if (bad++ == 0)
        ADD_FAILURE() << what << " element " << i << ": got " << got.at(i)
                      << ", want " << want[i];
    }
  return bad;
}

struct Case {
  int64_t rows, size;
  unsigned blocks; // fewer than the rows need: the grid-stride loop
};

/// Runs the forward and the backward, the backward with a residual added
/// to dx when `withResidual`.
void runCase(const Case &c, bool bf16, bool withResidual = false) {
  std::mt19937 rng(static_cast<unsigned>(c.rows * 1000 + c.size));
  int64_t n = c.rows * c.size;
  Stored x = random(n, bf16, rng, -2, 2), dy = random(n, bf16, rng, -1, 1);
  Stored gamma = random(c.size, bf16, rng, 0.5, 1.5),
         beta = random(c.size, bf16, rng, -1, 1);
  Stored y(n, bf16), dx(n, bf16);
  Stored residual =
      withResidual ? random(n, bf16, rng, -3, 3) : Stored(0, bf16);
  rows::Tensor residualTensor =
      withResidual ? residual.tensor() : rows::Tensor{nullptr, bf16};
  std::vector<float> stats(2 * c.rows, -1.0f);
  const float epsilon = 1e-5f;
  int slots = rows::slotsFor(c.size);
  ASSERT_NE(slots, 0);
  auto launch = [&](auto kernel) {
    emu::launch({c.blocks, 1, 1}, rows::kThreads, 0, kernel);
  };
  rows::withSlots(slots, [&](auto s) {
    constexpr int kSlots = decltype(s)::value;
    launch([&] {
      rows::layernorm_warp_forward<kSlots>(x.tensor(), gamma.tensor(),
                                           beta.tensor(), y.tensor(), c.rows,
                                           c.size, epsilon);
    });
    launch([&] {
      rows::layernorm_warp_backward<kSlots>(
          dy.tensor(), x.tensor(), gamma.tensor(), residualTensor, dx.tensor(),
          stats.data(), c.rows, c.size, epsilon);
    });
  });

  std::vector<double> wantY(n), wantDx(n), wantStats(2 * c.rows);
  for (int64_t r = 0; r < c.rows; ++r) {
    int64_t base = r * c.size;
    double mean = 0, variance = 0, meanG = 0, meanGXhat = 0;
    for (int64_t j = 0; j < c.size; ++j)
      mean += x.at(base + j);
    mean /= c.size;
    for (int64_t j = 0; j < c.size; ++j)
      variance += (x.at(base + j) - mean) * (x.at(base + j) - mean);
    double rstd = 1.0 / std::sqrt(variance / c.size + epsilon);
    for (int64_t j = 0; j < c.size; ++j) {
      double xhat = (x.at(base + j) - mean) * rstd,
             g = dy.at(base + j) * gamma.at(j);
      wantY[base + j] = xhat * gamma.at(j) + beta.at(j);
      meanG += g / c.size;
      meanGXhat += g * xhat / c.size;
    }
    for (int64_t j = 0; j < c.size; ++j) {
      double xhat = (x.at(base + j) - mean) * rstd,
             g = dy.at(base + j) * gamma.at(j);
      wantDx[base + j] = rstd * (g - meanG - xhat * meanGXhat) +
                         (withResidual ? residual.at(base + j) : 0.0);
    }
    wantStats[2 * r] = mean;
    wantStats[2 * r + 1] = rstd;
  }
  double tol = bf16 ? 1e-2 : 1e-5;
  std::string what = "rows " + std::to_string(c.rows) + " size " +
                     std::to_string(c.size) + (bf16 ? " bf16" : " f32") +
                     (withResidual ? " with a residual" : "");
  EXPECT_EQ(mismatches(y, wantY, tol, what + " y"), 0);
  EXPECT_EQ(mismatches(dx, wantDx, tol, what + " dx"), 0);
  Stored gotStats(2 * c.rows, false);
  gotStats.f32 = stats;
  // The statistics are f32 whatever the storage.
  EXPECT_EQ(mismatches(gotStats, wantStats, 1e-5, what + " stats"), 0);
}

const Case kCases[] = {
    {20, 768, 2}, // 24 slots; 16 warps, so rows 16..19 on the second pass
    {9, 100, 1},  // 8 slots, lanes past the end in the fourth
    {5, 257, 1},  // 16 slots, one element in the ninth slot of lane 0
    {3, 1024, 1}, // 32 slots, all full
    {11, 33, 1},  // 8 slots, the second slot of lane 0 alone
};

TEST(NormRowsTest, SlotsPerLane) {
  EXPECT_EQ(rows::slotsFor(1), 8);
  EXPECT_EQ(rows::slotsFor(256), 8);
  EXPECT_EQ(rows::slotsFor(257), 16);
  EXPECT_EQ(rows::slotsFor(768), 24);
  EXPECT_EQ(rows::slotsFor(1024), 32);
  EXPECT_EQ(rows::slotsFor(1025), 0);
}

TEST(NormRowsTest, F32) {
  for (const Case &c : kCases)
    runCase(c, false);
}

TEST(NormRowsTest, Bf16) {
  for (const Case &c : kCases)
    runCase(c, true);
}

/// The fused norm gradient: dx + residual, stored once.
TEST(NormRowsTest, ResidualAddedToDx) {
  for (bool bf16 : {false, true})
    for (const Case &c : kCases)
      runCase(c, bf16, /*withResidual=*/true);
}

} // namespace
