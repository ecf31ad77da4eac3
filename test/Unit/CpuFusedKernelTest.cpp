//===- CpuFusedKernelTest.cpp - --loom-fuse and the fused CPU kernels -----===//
//
// Each case runs a function through --loom-fuse, checks what was fused,
// then runs the fused function through the CPU kernels (one call per
// loom.fused: fused_elementwise or matmul with an epilogue) and compares
// with (a) the reference interpreter on the unfused function, rtol 1e-5 /
// atol 1e-6 (float32 against float64), and (b) the unfused function run op
// by op through the kernels, which must agree bit for bit: the fused
// kernels compute each f32 element exactly as the unfused ones do.
//
//===----------------------------------------------------------------------===//

#include "CpuKernelTestSupport.h"

#include "dialects/Loom/LoomOps.h"
#include "loom/loom_cpu_kernels.h"
#include "passes/Transforms/Passes.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/Pass/PassManager.h"

#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <string>
#include <vector>

using loom::interp::Tensor;
using namespace loom::testing;

namespace {

constexpr double kRtol = 1e-5, kAtol = 1e-6;

/// What --loom-fuse made of @f: its loom.fused ops by kind.
struct Fused {
  int chains = 0, matmuls = 0, updates = 0, losses = 0, norms = 0;
};

/// Runs --loom-fuse on a copy of @f of `source`, expects `expected` fused
/// ops, and compares the fused function's kernels with the reference and
/// with the unfused kernels (see the file comment).
void expectFusedMatches(llvm::StringRef source, llvm::ArrayRef<Tensor> args,
                        Fused expected) {
  auto ctx = makeKernelTestContext();
  auto module = parseKernelTestModule(*ctx, source);
  ASSERT_TRUE(module);
  mlir::OwningOpRef<mlir::ModuleOp> fused = module->clone();
  mlir::PassManager pm(ctx.get());
  pm.addPass(loom::createLoomFuse());
  ASSERT_TRUE(mlir::succeeded(pm.run(*fused)));

  Fused got;
  fused->walk([&](loom::FusedOp op) {
    bool matmul = false, update = false, loss = false, norm = false;
    op.getBody().walk([&](loom::MatmulOp) { matmul = true; });
    op.getBody().walk([&](loom::AdamWUpdateOp) { update = true; });
    op.getBody().walk([&](loom::CrossEntropyOp) { loss = true; });
    op.getBody().walk([&](mlir::Operation *inner) {
      norm |= mlir::isa<loom::LayerNormGradOp, loom::RMSNormGradOp>(inner);
    });
    ++(matmul   ? got.matmuls
       : update ? got.updates
       : loss   ? got.losses
       : norm   ? got.norms
                : got.chains);
  });
  EXPECT_EQ(got.chains, expected.chains) << "elementwise chains";
  EXPECT_EQ(got.losses, expected.losses) << "losses with their gradient";
  EXPECT_EQ(got.norms, expected.norms) << "norm gradients with a residual";
  EXPECT_EQ(got.matmuls, expected.matmuls) << "matmuls with an epilogue";
  EXPECT_EQ(got.updates, expected.updates) << "multi-tensor updates";

  auto want = runReference(*module, args);
  ASSERT_TRUE(static_cast<bool>(want)) << llvm::toString(want.takeError());
  auto fusedResults = runThroughKernels(*fused, args);
  ASSERT_TRUE(static_cast<bool>(fusedResults))
      << llvm::toString(fusedResults.takeError());
  expectAllClose(*want, *fusedResults, kRtol, kAtol);

  auto unfused = runThroughKernels(*module, args);
  ASSERT_TRUE(static_cast<bool>(unfused))
      << llvm::toString(unfused.takeError());
  ASSERT_EQ(unfused->size(), fusedResults->size());
  for (size_t r = 0; r < unfused->size(); ++r) {
    if (!(*unfused)[r].isFloat())
      continue;
    const std::vector<double> &a = (*unfused)[r].f(),
                              &b = (*fusedResults)[r].f();
    ASSERT_EQ(a.size(), b.size());
    size_t differing = 0;
    for (size_t i = 0; i < a.size(); ++i)
      differing += std::memcmp(&a[i], &b[i], sizeof(double)) != 0;
    EXPECT_EQ(differing, 0u) << "result " << r << ": elements of the fused "
                             << "run that differ from the unfused run";
  }
}

/// A transformer MLP in a training step's shape: the first layer's sum is
/// read again by gelu_grad, so its matmul yields the sum and the gelu
/// (bias_gelu_aux); the second has a bias epilogue; the residual add and
/// the gradient's add chain with gelu_grad.
TEST(CpuFusedKernelTest, LinearLayersWithEpilogues) {
  expectFusedMatches(
      R"mlir(
    func.func @f(%x: tensor<2x5x16xf32>, %w1: tensor<16x24xf32>, %b1: tensor<24xf32>,
                 %w2: tensor<24x16xf32>, %b2: tensor<16xf32>, %dy: tensor<2x5x24xf32>,
                 %dz: tensor<2x5x24xf32>)
        -> (tensor<2x5x16xf32>, tensor<2x5x24xf32>) {
      %p = loom.matmul %x, %w1 : (tensor<2x5x16xf32>, tensor<16x24xf32>) -> tensor<2x5x24xf32>
      %s = loom.add %p, %b1 : (tensor<2x5x24xf32>, tensor<24xf32>) -> tensor<2x5x24xf32>
      %g = loom.gelu %s : tensor<2x5x24xf32>
      %q = loom.matmul %g, %w2 : (tensor<2x5x24xf32>, tensor<24x16xf32>) -> tensor<2x5x16xf32>
      %t = loom.add %b2, %q : (tensor<16xf32>, tensor<2x5x16xf32>) -> tensor<2x5x16xf32>
      %r = loom.add %x, %t : (tensor<2x5x16xf32>, tensor<2x5x16xf32>) -> tensor<2x5x16xf32>
      %dg = loom.gelu_grad %dy, %s : tensor<2x5x24xf32>
      %dsum = loom.add %dg, %dz : (tensor<2x5x24xf32>, tensor<2x5x24xf32>) -> tensor<2x5x24xf32>
      return %r, %dsum : tensor<2x5x16xf32>, tensor<2x5x24xf32>
    })mlir",
      {randomFloats({2, 5, 16}, 1), randomFloats({16, 24}, 2),
       randomFloats({24}, 3), randomFloats({24, 16}, 4), randomFloats({16}, 5),
       randomFloats({2, 5, 24}, 6), randomFloats({2, 5, 24}, 7)},
      {/*chains=*/1, /*matmuls=*/2});
}

/// Transposed and batched operands keep their flags inside the fused
/// matmul; a bias-gelu epilogue whose sum nobody else reads yields the
/// gelu only.
TEST(CpuFusedKernelTest, TransposedAndBatchedMatmulEpilogues) {
  expectFusedMatches(
      R"mlir(
    func.func @f(%a: tensor<3x7x4xf32>, %b: tensor<3x6x7xf32>, %bias: tensor<6xf32>,
                 %c: tensor<9x5xf32>, %d: tensor<9x5xf32>, %e: tensor<5xf32>)
        -> (tensor<3x4x6xf32>, tensor<5x5xf32>) {
      %p = loom.matmul %a, %b {transpose_lhs, transpose_rhs} : (tensor<3x7x4xf32>, tensor<3x6x7xf32>) -> tensor<3x4x6xf32>
      %s = loom.add %p, %bias : (tensor<3x4x6xf32>, tensor<6xf32>) -> tensor<3x4x6xf32>
      %g = loom.gelu %s : tensor<3x4x6xf32>
      %q = loom.matmul %c, %d {transpose_lhs} : (tensor<9x5xf32>, tensor<9x5xf32>) -> tensor<5x5xf32>
      %t = loom.add %q, %e : (tensor<5x5xf32>, tensor<5xf32>) -> tensor<5x5xf32>
      return %g, %t : tensor<3x4x6xf32>, tensor<5x5xf32>
    })mlir",
      {randomFloats({3, 7, 4}, 11), randomFloats({3, 6, 7}, 12),
       randomFloats({6}, 13), randomFloats({9, 5}, 14),
       randomFloats({9, 5}, 15), randomFloats({5}, 16)},
      {/*chains=*/0, /*matmuls=*/2});
}

/// Residual epilogues: a product plus a residual (residual), and a
/// product plus a bias plus a residual (bias_residual), the residual on
/// either side of the add, through a batched lhs.
TEST(CpuFusedKernelTest, ResidualEpilogues) {
  expectFusedMatches(
      R"mlir(
    func.func @f(%x: tensor<2x5x16xf32>, %w: tensor<16x16xf32>, %b: tensor<16xf32>,
                 %r: tensor<2x5x16xf32>, %v: tensor<16x7xf32>, %q: tensor<2x5x7xf32>)
        -> (tensor<2x5x16xf32>, tensor<2x5x7xf32>) {
      %p = loom.matmul %x, %w : (tensor<2x5x16xf32>, tensor<16x16xf32>) -> tensor<2x5x16xf32>
      %s = loom.add %p, %b : (tensor<2x5x16xf32>, tensor<16xf32>) -> tensor<2x5x16xf32>
      %t = loom.add %r, %s : (tensor<2x5x16xf32>, tensor<2x5x16xf32>) -> tensor<2x5x16xf32>
      %u = loom.matmul %t, %v : (tensor<2x5x16xf32>, tensor<16x7xf32>) -> tensor<2x5x7xf32>
      %y = loom.add %u, %q : (tensor<2x5x7xf32>, tensor<2x5x7xf32>) -> tensor<2x5x7xf32>
      return %t, %y : tensor<2x5x16xf32>, tensor<2x5x7xf32>
    })mlir",
      {randomFloats({2, 5, 16}, 51), randomFloats({16, 16}, 52),
       randomFloats({16}, 53), randomFloats({2, 5, 16}, 54),
       randomFloats({16, 7}, 55), randomFloats({2, 5, 7}, 56)},
      {/*chains=*/0, /*matmuls=*/2});
}

/// A linear layer's backward: dgelu_bias_grad (the gelu gradient of
/// dy.w^T at the pre-activation and its rows' sum) and bias_grad (the
/// weight gradient x^T.dy beside the sum of dy's rows, dy reshaped), each
/// one matmul call; the first layer's weight gradient reads dpre, whose
/// sum is already taken, so it stays a plain matmul.
TEST(CpuFusedKernelTest, BackwardEpilogues) {
  expectFusedMatches(
      R"mlir(
    func.func @f(%dy: tensor<2x5x6xf32>, %w2: tensor<12x6xf32>, %pre: tensor<2x5x12xf32>,
                 %h: tensor<2x5x12xf32>, %x: tensor<2x5x4xf32>)
        -> (tensor<12x6xf32>, tensor<6xf32>, tensor<2x5x12xf32>, tensor<12xf32>,
            tensor<4x12xf32>) {
      %db2 = loom.reduce_sum %dy [0, 1] : tensor<2x5x6xf32> -> tensor<6xf32>
      %hr = loom.reshape %h : tensor<2x5x12xf32> -> tensor<10x12xf32>
      %dyr = loom.reshape %dy : tensor<2x5x6xf32> -> tensor<10x6xf32>
      %dw2 = loom.matmul %hr, %dyr {transpose_lhs} : (tensor<10x12xf32>, tensor<10x6xf32>) -> tensor<12x6xf32>
      %dh = loom.matmul %dy, %w2 {transpose_rhs} : (tensor<2x5x6xf32>, tensor<12x6xf32>) -> tensor<2x5x12xf32>
      %dpre = loom.gelu_grad %dh, %pre : tensor<2x5x12xf32>
      %db1 = loom.reduce_sum %dpre [0, 1] : tensor<2x5x12xf32> -> tensor<12xf32>
      %xr = loom.reshape %x : tensor<2x5x4xf32> -> tensor<10x4xf32>
      %dpr = loom.reshape %dpre : tensor<2x5x12xf32> -> tensor<10x12xf32>
      %dw1 = loom.matmul %xr, %dpr {transpose_lhs} : (tensor<10x4xf32>, tensor<10x12xf32>) -> tensor<4x12xf32>
      return %dw2, %db2, %dpre, %db1, %dw1 : tensor<12x6xf32>, tensor<6xf32>, tensor<2x5x12xf32>, tensor<12xf32>, tensor<4x12xf32>
    })mlir",
      {randomFloats({2, 5, 6}, 61), randomFloats({12, 6}, 62),
       randomFloats({2, 5, 12}, 63), randomFloats({2, 5, 12}, 64),
       randomFloats({2, 5, 4}, 65)},
      {/*chains=*/0, /*matmuls=*/2});
}

/// An empty product keeps its bias gradient: bias_grad of a [0, 12] lhs
/// still sums the rhs' 12 rows, and the empty matmul does not divide by
/// its zero elements (IR has no empty tensors; the kernel is called
/// directly, as the CUDA conformance test calls both libraries).
TEST(CpuFusedKernelTest, EmptyProductKeepsItsBiasGradient) {
  std::vector<float> rhs(12 * 16), db(16, -1.0f);
  for (size_t i = 0; i < rhs.size(); ++i)
    rhs[i] = static_cast<float>(i % 7) - 3.0f;
  // lhs [0, 12] and rhs [12, 16] f32; results [0, 16] and [16]; no
  // transposes, bias_grad.
  std::vector<int64_t> meta = {
      2, 2, 0, 2,  0, 12, 0,  2, 12, 16,
      0, 2, 0, 16, 0, 1,  16, 0, 0,  LOOM_EPILOGUE_BIAS_GRAD};
  float none = 0;
  void *buffers[] = {&none, rhs.data(), &none, db.data()};
  ASSERT_EQ(loom_cpu_matmul(nullptr, buffers, meta.data()), 0)
      << loom_cpu_last_error();
  for (int64_t j = 0; j < 16; ++j) {
    double want = 0;
    for (int64_t r = 0; r < 12; ++r)
      want += rhs[r * 16 + j];
    EXPECT_EQ(db[j], static_cast<float>(want)) << "column " << j;
  }
}

/// A loss and its gradient of the same logits, labels and token count are
/// one cross_entropy_with_grad call, bit for bit the two kernels; one with
/// other labels stays apart.
TEST(CpuFusedKernelTest, LossWithItsGradient) {
  expectFusedMatches(
      R"mlir(
    func.func @f(%d: tensor<f32>, %l: tensor<2x3x7xf32>, %y: tensor<2x3xi32>,
                 %z: tensor<2x3xi32>)
        -> (tensor<f32>, tensor<2x3x7xf32>, tensor<2x3x7xf32>) {
      %loss = loom.cross_entropy %l, %y {token_count = 12 : i64}
          : (tensor<2x3x7xf32>, tensor<2x3xi32>) -> tensor<f32>
      %g = loom.cross_entropy_grad %d, %l, %y {token_count = 12 : i64}
          : (tensor<f32>, tensor<2x3x7xf32>, tensor<2x3xi32>) -> tensor<2x3x7xf32>
      %h = loom.cross_entropy_grad %d, %l, %z {token_count = 12 : i64}
          : (tensor<f32>, tensor<2x3x7xf32>, tensor<2x3xi32>) -> tensor<2x3x7xf32>
      return %loss, %g, %h : tensor<f32>, tensor<2x3x7xf32>, tensor<2x3x7xf32>
    })mlir",
      {randomFloats({}, 81, 0.5, 2), randomFloats({2, 3, 7}, 82, -4, 4),
       Tensor::ints(nullptr, {2, 3}, {0, 6, 3, 3, 1, 5}),
       Tensor::ints(nullptr, {2, 3}, {1, 1, 2, 0, 4, 6})},
      {/*chains=*/0, /*matmuls=*/0, /*updates=*/0, /*losses=*/1});
}

/// The input gradient of a pre-norm block: a layernorm's and an rmsnorm's
/// dx plus the residual gradient, each one norm gradient call, bit for bit
/// the norm gradient and the add; a dx read twice stays apart.
TEST(CpuFusedKernelTest, NormGradientsWithTheirResidual) {
  expectFusedMatches(
      R"mlir(
    func.func @f(%dy: tensor<2x3x40xf32>, %x: tensor<2x3x40xf32>,
                 %g: tensor<40xf32>, %r: tensor<2x3x40xf32>)
        -> (tensor<2x3x40xf32>, tensor<40xf32>, tensor<40xf32>,
            tensor<2x3x40xf32>, tensor<40xf32>, tensor<2x3x40xf32>) {
      %dx, %dg, %db = loom.layernorm_grad %dy, %x, %g {epsilon = 1.0e-5 : f64}
          : tensor<2x3x40xf32>, tensor<40xf32>
      %s = loom.add %r, %dx : (tensor<2x3x40xf32>, tensor<2x3x40xf32>) -> tensor<2x3x40xf32>
      %rx, %rg = loom.rmsnorm_grad %s, %x, %g {epsilon = 1.0e-6 : f64}
          : tensor<2x3x40xf32>, tensor<40xf32>
      %t = loom.add %rx, %r : (tensor<2x3x40xf32>, tensor<2x3x40xf32>) -> tensor<2x3x40xf32>
      %ex, %eg, %eb = loom.layernorm_grad %dy, %x, %g {epsilon = 1.0e-5 : f64}
          : tensor<2x3x40xf32>, tensor<40xf32>
      %u = loom.add %ex, %r : (tensor<2x3x40xf32>, tensor<2x3x40xf32>) -> tensor<2x3x40xf32>
      %v = loom.mul %ex, %u : (tensor<2x3x40xf32>, tensor<2x3x40xf32>) -> tensor<2x3x40xf32>
      return %s, %dg, %db, %t, %rg, %v : tensor<2x3x40xf32>, tensor<40xf32>,
          tensor<40xf32>, tensor<2x3x40xf32>, tensor<40xf32>, tensor<2x3x40xf32>
    })mlir",
      {randomFloats({2, 3, 40}, 91, -1, 1), randomFloats({2, 3, 40}, 92, -2, 2),
       randomFloats({40}, 93, 0.5, 1.5),
       // Residuals far from -dx: no cancellation for the f64 comparison.
       randomFloats({2, 3, 40}, 94, 20, 30)},
      {/*chains=*/1, /*matmuls=*/0, /*updates=*/0, /*losses=*/0,
       /*norms=*/2});
}

/// SwiGLU with a residual, operands broadcasting as rows, columns and
/// leading dimensions, over more elements than one block of the kernel
/// (256) along a run that cannot be coalesced.
TEST(CpuFusedKernelTest, ChainBroadcastsAcrossBlocks) {
  expectFusedMatches(
      R"mlir(
    func.func @f(%a: tensor<3x2x300xf32>, %b: tensor<300xf32>, %c: tensor<3x1x1xf32>,
                 %r: tensor<2x1xf32>) -> tensor<3x2x300xf32> {
      %s = loom.silu %a : tensor<3x2x300xf32>
      %m = loom.mul %s, %b : (tensor<3x2x300xf32>, tensor<300xf32>) -> tensor<3x2x300xf32>
      %n = loom.sub %m, %c : (tensor<3x2x300xf32>, tensor<3x1x1xf32>) -> tensor<3x2x300xf32>
      %y = loom.add %n, %r : (tensor<3x2x300xf32>, tensor<2x1xf32>) -> tensor<3x2x300xf32>
      return %y : tensor<3x2x300xf32>
    })mlir",
      {randomFloats({3, 2, 300}, 21), randomFloats({300}, 22),
       randomFloats({3, 1, 1}, 23), randomFloats({2, 1}, 24)},
      {/*chains=*/1, /*matmuls=*/0});
}

/// Every opcode but cast once, in one chain, with intermediate values
/// returned too (log, sqrt and rsqrt of positive values).
TEST(CpuFusedKernelTest, EveryOpcodeInOneChain) {
  expectFusedMatches(
      R"mlir(
    func.func @f(%x: tensor<4x33xf32>, %y: tensor<4x33xf32>)
        -> (tensor<4x33xf32>, tensor<4x33xf32>, tensor<4x33xf32>) {
      %0 = loom.exp %x : tensor<4x33xf32>
      %1 = loom.log %0 : tensor<4x33xf32>
      %2 = loom.sqrt %0 : tensor<4x33xf32>
      %3 = loom.rsqrt %2 : tensor<4x33xf32>
      %4 = loom.div %1, %3 : (tensor<4x33xf32>, tensor<4x33xf32>) -> tensor<4x33xf32>
      %5 = loom.tanh %4 : tensor<4x33xf32>
      %6 = loom.neg %5 : tensor<4x33xf32>
      %7 = loom.gelu %6 : tensor<4x33xf32>
      %8 = loom.gelu_grad %7, %y : tensor<4x33xf32>
      %9 = loom.silu %8 : tensor<4x33xf32>
      %10 = loom.silu_grad %9, %x : tensor<4x33xf32>
      %e = loom.gelu_erf %10 : tensor<4x33xf32>
      %f = loom.gelu_erf_grad %e, %y : tensor<4x33xf32>
      %11 = loom.mul %f, %y : (tensor<4x33xf32>, tensor<4x33xf32>) -> tensor<4x33xf32>
      %12 = loom.sub %11, %x : (tensor<4x33xf32>, tensor<4x33xf32>) -> tensor<4x33xf32>
      %13 = loom.add %12, %5 : (tensor<4x33xf32>, tensor<4x33xf32>) -> tensor<4x33xf32>
      return %13, %5, %12 : tensor<4x33xf32>, tensor<4x33xf32>, tensor<4x33xf32>
    })mlir",
      {randomFloats({4, 33}, 31), randomFloats({4, 33}, 32)},
      {/*chains=*/1, /*matmuls=*/0});
}

/// Three AdamW updates (parameters of 1, 37 and 300 elements) are one
/// adamw_update_multi call, bit for bit the three single updates.
TEST(CpuFusedKernelTest, AdamWUpdatesInOneCall) {
  std::string attrs = "{beta1 = 0.9 : f64, beta2 = 0.95 : f64, eps = 1.0e-08 "
                      ": f64, lr = 3.0e-02 : f64, weight_decay = 0.1 : f64}";
  std::string source = R"mlir(
    func.func @f(%p0: tensor<f32>, %g0: tensor<f32>, %m0: tensor<f32>, %v0: tensor<f32>,
                 %p1: tensor<37xf32>, %g1: tensor<37xf32>, %m1: tensor<37xf32>, %v1: tensor<37xf32>,
                 %p2: tensor<3x100xf32>, %g2: tensor<3x100xf32>, %m2: tensor<3x100xf32>,
                 %v2: tensor<3x100xf32>, %step: tensor<i64>)
        -> (tensor<f32>, tensor<f32>, tensor<f32>, tensor<37xf32>, tensor<37xf32>,
            tensor<37xf32>, tensor<3x100xf32>, tensor<3x100xf32>, tensor<3x100xf32>) {
      %a:3 = loom.adamw_update %p0, %g0, %m0, %v0, %step ATTRS : tensor<f32>, tensor<f32>, tensor<i64>
      %b:3 = loom.adamw_update %p1, %g1, %m1, %v1, %step ATTRS : tensor<37xf32>, tensor<37xf32>, tensor<i64>
      %c:3 = loom.adamw_update %p2, %g2, %m2, %v2, %step ATTRS : tensor<3x100xf32>, tensor<3x100xf32>, tensor<i64>
      return %a#0, %a#1, %a#2, %b#0, %b#1, %b#2, %c#0, %c#1, %c#2
          : tensor<f32>, tensor<f32>, tensor<f32>, tensor<37xf32>, tensor<37xf32>,
            tensor<37xf32>, tensor<3x100xf32>, tensor<3x100xf32>, tensor<3x100xf32>
    })mlir";
  for (size_t at = source.find("ATTRS"); at != std::string::npos;
       at = source.find("ATTRS"))
    source.replace(at, 5, attrs);
  std::vector<Tensor> args;
  unsigned seed = 41;
  std::vector<std::vector<int64_t>> shapes = {{}, {37}, {3, 100}};
  for (const std::vector<int64_t> &shape : shapes) {
    args.push_back(randomFloats(shape, seed++));            // param
    args.push_back(randomFloats(shape, seed++));            // grad
    args.push_back(randomFloats(shape, seed++, -0.1, 0.1)); // m
    args.push_back(randomFloats(shape, seed++, 0.0, 0.1));  // v
  }
  args.push_back(Tensor::ints(nullptr, {}, {7}));
  expectFusedMatches(source, args,
                     {/*chains=*/0, /*matmuls=*/0, /*updates=*/1});
}

/// A cast to bf16 inside a chain rounds the register to the nearest bf16,
/// ties to even (the CPU lowering has no bf16 tensors, so the program is
/// called directly): x -> cast bf16 -> sub x gives the rounding error.
TEST(CpuFusedKernelTest, CastRoundsToBf16TiesToEven) {
  const float ulp = 1.0f / 128.0f; // bf16's spacing in [1, 2)
  std::vector<float> x = {1.0f + ulp / 2,    1.0f + 3 * ulp / 2,
                          1.0f + ulp / 4,    1.0f + 3 * ulp / 4,
                          -(1.0f + ulp / 2), std::nanf("")};
  std::vector<float> rounded(x.size()), error(x.size());
  int64_t n = static_cast<int64_t>(x.size());
  // One operand, two results [n] f32; cast (10) of r0 to bf16 (4), then
  // sub (1) r1 - r0; results r1 and r2.
  std::vector<int64_t> meta = {1, 2, 0,  1, n, 0, 1, n, 0, 1,
                               n, 2, 10, 0, 4, 1, 1, 0, 1, 2};
  void *buffers[] = {x.data(), rounded.data(), error.data()};
  ASSERT_EQ(loom_cpu_fused_elementwise(nullptr, buffers, meta.data()), 0)
      << loom_cpu_last_error();
  EXPECT_EQ(rounded[0], 1.0f);           // a tie: to the even 1.0
  EXPECT_EQ(rounded[1], 1.0f + 2 * ulp); // a tie: to the even 1 + 2 ulp
  EXPECT_EQ(rounded[2], 1.0f);           // below half: down
  EXPECT_EQ(rounded[3], 1.0f + ulp);     // above half: up
  EXPECT_EQ(rounded[4], -1.0f);          // ties to even, negative
  EXPECT_TRUE(std::isnan(rounded[5]));   // NaN stays NaN
  EXPECT_EQ(error[0], -ulp / 2);
  EXPECT_EQ(error[3], ulp / 4);
}

/// A malformed program fails with decodeFusedProgram's message.
TEST(CpuFusedKernelTest, MalformedProgramsFail) {
  std::vector<float> x(4), y(4);
  void *buffers[] = {x.data(), y.data()};
  auto message = [&](std::vector<int64_t> program) {
    std::vector<int64_t> meta = {1, 1, 0, 1, 4, 0, 1, 4};
    meta.insert(meta.end(), program.begin(), program.end());
    EXPECT_NE(loom_cpu_fused_elementwise(nullptr, buffers, meta.data()), 0);
    return std::string(loom_cpu_last_error());
  };
  EXPECT_EQ(message({1, 99, 0, 0, 1}),
            "fused_elementwise: instruction 0 has opcode 99");
  EXPECT_EQ(message({1, 0, 0, 1, 1}),
            "fused_elementwise: instruction 0 reads registers 0 and 1, not all "
            "below its own 1");
  EXPECT_EQ(message({1, 10, 0, 2, 1}),
            "fused_elementwise: instruction 0 casts to element type 2 (f32 or "
            "bf16)");
  EXPECT_EQ(message({1, 4, 0, 0, 2}),
            "fused_elementwise: result 0 is register 2, of 2");
  EXPECT_EQ(message({0, 0}), "fused_elementwise: 0 instructions (1 to 64)");
  EXPECT_EQ(message({65}), "fused_elementwise: 65 instructions (1 to 64)");
}

} // namespace
