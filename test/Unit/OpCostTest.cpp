//===- OpCostTest.cpp - The work of ops through their cost interface ------===//
//
// Parses ops with concrete shapes and compares getOpWork with the FLOPs and
// bytes worked out here by hand from each op's semantics: an elementwise op
// on the interface's defaults, the ops that override them (matrix products,
// fused attention, views, gathers), and ops of other dialects. A last test
// makes sure every loom op but loom.yield has the interface.
//
//===----------------------------------------------------------------------===//

#include "loom/CostModel/OpCost.h"
#include "loom/CostModel/ClusterSpec.h"

#include "dialects/Loom/LoomOps.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/BuiltinOps.h"
#include "mlir/IR/MLIRContext.h"
#include "mlir/Parser/Parser.h"

#include <gtest/gtest.h>

using namespace mlir;
using namespace loom;
using namespace loom::cost;

namespace {

// clang-format off
const char *kOps = R"mlir(
func.func @ops(%a: tensor<4x8xf32>, %b: tensor<8xf32>, %x: tensor<4x8xbf16>,
               %m: tensor<2x3x4x8xf32>, %n: tensor<2x3x16x8xf32>,
               %q: tensor<2x16x8x64xf32>, %k: tensor<2x16x2x64xf32>,
               %lse: tensor<2x8x16xf32>, %t: tensor<100x32xf32>,
               %ids: tensor<2x16xi32>) {
  %add = loom.add %a, %b : (tensor<4x8xf32>, tensor<8xf32>) -> tensor<4x8xf32>
  %gelu = loom.gelu %x : tensor<4x8xbf16>
  %mm = loom.matmul %m, %n {transpose_rhs} : (tensor<2x3x4x8xf32>, tensor<2x3x16x8xf32>) -> tensor<2x3x4x16xf32>
  %att:2 = loom.attention %q, %k, %k {causal, scale = 0.125 : f64} : (tensor<2x16x8x64xf32>, tensor<2x16x2x64xf32>, tensor<2x16x2x64xf32>) -> (tensor<2x16x8x64xf32>, tensor<2x8x16xf32>)
  %grad:3 = loom.attention_grad %q, %q, %k, %k, %q, %lse {causal, scale = 0.125 : f64} : (tensor<2x16x8x64xf32>, tensor<2x16x8x64xf32>, tensor<2x16x2x64xf32>, tensor<2x16x2x64xf32>, tensor<2x16x8x64xf32>, tensor<2x8x16xf32>) -> (tensor<2x16x8x64xf32>, tensor<2x16x2x64xf32>, tensor<2x16x2x64xf32>)
  %view = loom.reshape %a : tensor<4x8xf32> -> tensor<32xf32>
  %rows = loom.embedding %t, %ids : (tensor<100x32xf32>, tensor<2x16xi32>) -> tensor<2x16x32xf32>
  func.return
}
)mlir";
// clang-format on

class OpCostTest : public ::testing::Test {
protected:
  void SetUp() override {
    context.loadDialect<func::FuncDialect, LoomDialect>();
    module = parseSourceString<ModuleOp>(kOps, &context);
    ASSERT_TRUE(module);
  }
  /// The work of the first op named `name`, at its own shapes.
  OpWork work(StringRef name) {
    Operation *found = nullptr;
    module->walk([&](Operation *op) {
      if (!found && op->getName().getStringRef() == name)
        found = op;
    });
    EXPECT_NE(found, nullptr) << name.str();
    return found ? getOpWork(found) : OpWork();
  }

  MLIRContext context;
  OwningOpRef<ModuleOp> module;
};

/// An elementwise op without overrides: one FLOP per result element, every
/// tensor moved once at its element type.
TEST_F(OpCostTest, ElementwiseOpsTakeTheDefaults) {
  OpWork add = work("loom.add");
  EXPECT_EQ(add.opClass, OpClass::Bandwidth);
  EXPECT_EQ(add.flops, 32);
  EXPECT_EQ(add.modelFlops, 0);
  EXPECT_EQ(add.bytes, (32 + 8 + 32) * 4);
  EXPECT_EQ(add.mathMode, MathMode::FP32);
}

TEST_F(OpCostTest, ActivationsCountTheirArithmeticPerElement) {
  OpWork gelu = work("loom.gelu");
  EXPECT_EQ(gelu.opClass, OpClass::Bandwidth);
  EXPECT_EQ(gelu.flops, 8 * 32);
  EXPECT_EQ(gelu.bytes, (32 + 32) * 2);
  EXPECT_EQ(gelu.mathMode, MathMode::BF16);
}

/// [2,3] batches of [4,8] x [8,16]: 2·6·4·16·8 FLOPs.
TEST_F(OpCostTest, MatmulIsTwoMNKPerBatch) {
  OpWork mm = work("loom.matmul");
  EXPECT_EQ(mm.opClass, OpClass::Gemm);
  EXPECT_EQ(mm.flops, 2.0 * 6 * 4 * 16 * 8);
  EXPECT_EQ(mm.modelFlops, mm.flops);
  EXPECT_EQ(mm.bytes, (6 * 32 + 6 * 128 + 6 * 64) * 4);
}

/// One product of q with k is 2·B·Hq·S·Skv·D = 2·2·8·16·16·64; the forward
/// does two, the backward four plus the recomputed scores. The model counts
/// the whole score matrix; the causal kernel computes the 16·17/2 = 136 of
/// its 256 scores on and below the diagonal.
TEST_F(OpCostTest, FusedAttentionCountsItsProducts) {
  double product = 2.0 * 2 * 8 * 16 * 16 * 64, causal = 136.0 / 256;
  OpWork forward = work("loom.attention");
  EXPECT_EQ(forward.opClass, OpClass::Attention);
  EXPECT_EQ(forward.flops, 2 * product * causal);
  EXPECT_EQ(forward.modelFlops, 2 * product);
  double q = 2 * 16 * 8 * 64, kv = 2 * 16 * 2 * 64, lse = 2 * 8 * 16;
  EXPECT_EQ(forward.bytes, (q + 2 * kv + q + lse) * 4);
  OpWork backward = work("loom.attention_grad");
  EXPECT_EQ(backward.opClass, OpClass::Attention);
  EXPECT_EQ(backward.flops, 5 * product * causal);
  EXPECT_EQ(backward.modelFlops, 4 * product);
}

/// Attention runs at the device's attention efficiency, not the GEMMs'.
TEST_F(OpCostTest, AttentionHasItsOwnRate) {
  DeviceSpec device;
  device.peakFlopsFP32 = 1e12;
  device.memoryBandwidth = 1e15;
  device.memoryEfficiency = 1;
  device.gemmEfficiency = 0.8;
  device.gemmHalfWork = 1e9;
  device.attentionEfficiency = 0.25;
  OpWork forward = work("loom.attention");
  EXPECT_DOUBLE_EQ(opTime(forward, device), forward.flops / 0.25e12);
  device.attentionEfficiency = 0.5;
  EXPECT_DOUBLE_EQ(opTime(forward, device), forward.flops / 0.5e12);
  // Unset, as a spec file without the key: the GEMMs' efficiency.
  device.attentionEfficiency = 0;
  EXPECT_DOUBLE_EQ(opTime(forward, device), forward.flops / 0.8e12);
}

TEST_F(OpCostTest, ViewsAndOtherDialectsAreFree) {
  OpWork view = work("loom.reshape");
  EXPECT_EQ(view.opClass, OpClass::Free);
  EXPECT_EQ(view.bytes, 0);
  OpWork ret = work("func.return");
  EXPECT_EQ(ret.opClass, OpClass::Free);
  EXPECT_EQ(ret.flops, 0);
}

/// The gather reads the 2·16 rows it copies (32 f32 each) and writes them,
/// and reads the ids.
TEST_F(OpCostTest, EmbeddingReadsOnlyTheRowsItCopies) {
  OpWork rows = work("loom.embedding");
  EXPECT_EQ(rows.opClass, OpClass::Bandwidth);
  EXPECT_EQ(rows.flops, 0);
  EXPECT_EQ(rows.bytes, 2 * (2 * 16 * 32) * 4 + 2 * 16 * 4);
}

/// A new loom op gets the interface, defaults included, from Loom_Op;
/// loom.fused has it too, and only loom.yield, the end of a fused body, has
/// none.
TEST(OpCostCoverage, EveryLoomOpHasTheInterface) {
  MLIRContext context;
  context.loadDialect<LoomDialect>();
  int loomOps = 0;
  for (RegisteredOperationName name : context.getRegisteredOperations()) {
    if (name.getDialectNamespace() != "loom")
      continue;
    ++loomOps;
    EXPECT_EQ(name.hasInterface<OpCostInterface>(),
              name.getStringRef() != "loom.yield")
        << name.getStringRef().str();
  }
  EXPECT_GT(loomOps, 40);
}

} // namespace
