//===- ShardingRuleTest.cpp - Every op's sharding rule against its shapes -===//
//
// Each case parses one loom op with concrete shapes, checks that its rule is
// consistent with those shapes (OpShardingRule::verify) and compares the
// rule with the one written here by hand from the op's semantics. The
// cases of ops marked Loom_Linear are checked to be linear in the reference
// interpreter. A last test makes sure every registered loom op has a case.
//
//===----------------------------------------------------------------------===//

#include "dialects/Loom/LoomOps.h"
#include "loom/Interpreter/Interpreter.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/BuiltinOps.h"
#include "mlir/IR/MLIRContext.h"
#include "mlir/Parser/Parser.h"
#include "llvm/ADT/StringSet.h"

#include <gtest/gtest.h>

#include <cmath>
#include <random>

using namespace mlir;
using namespace loom;

namespace {

struct RuleCase {
  const char *name;
  /// The function's arguments, then the op (results unnamed).
  const char *args;
  const char *op;
  /// The rule in OpShardingRule::print notation.
  const char *rule;
};

// clang-format off
const RuleCase kCases[] = {
  // Elementwise: one factor per result dimension; broadcast dims map none.
  {"Add", "%a: tensor<4x8xf32>, %b: tensor<8xf32>",
   "loom.add %a, %b : (tensor<4x8xf32>, tensor<8xf32>) -> tensor<4x8xf32>",
   "([i, j], [j]) -> ([i, j]) {i=4, j=8}"},
  {"Sub", "%a: tensor<4x8xf32>, %b: tensor<4x1xf32>",
   "loom.sub %a, %b : (tensor<4x8xf32>, tensor<4x1xf32>) -> tensor<4x8xf32>",
   "([i, j], [i, 1]) -> ([i, j]) {i=4, j=8}"},
  {"Mul", "%a: tensor<1x8xbf16>, %b: tensor<4x1xbf16>",
   "loom.mul %a, %b : (tensor<1x8xbf16>, tensor<4x1xbf16>) -> tensor<4x8xbf16>",
   "([1, j], [i, 1]) -> ([i, j]) {i=4, j=8}"},
  {"Div", "%a: tensor<4x8xf32>, %b: tensor<f32>",
   "loom.div %a, %b : (tensor<4x8xf32>, tensor<f32>) -> tensor<4x8xf32>",
   "([i, j], []) -> ([i, j]) {i=4, j=8}"},
  {"Neg", "%a: tensor<2x3xf32>", "loom.neg %a : tensor<2x3xf32>",
   "([i, j]) -> ([i, j]) {i=2, j=3}"},
  {"Exp", "%a: tensor<2x3xf32>", "loom.exp %a : tensor<2x3xf32>",
   "([i, j]) -> ([i, j]) {i=2, j=3}"},
  {"Log", "%a: tensor<2x3xf32>", "loom.log %a : tensor<2x3xf32>",
   "([i, j]) -> ([i, j]) {i=2, j=3}"},
  {"Sqrt", "%a: tensor<2x3xf32>", "loom.sqrt %a : tensor<2x3xf32>",
   "([i, j]) -> ([i, j]) {i=2, j=3}"},
  {"Rsqrt", "%a: tensor<2x3xf32>", "loom.rsqrt %a : tensor<2x3xf32>",
   "([i, j]) -> ([i, j]) {i=2, j=3}"},
  {"Tanh", "%a: tensor<2x3xf16>", "loom.tanh %a : tensor<2x3xf16>",
   "([i, j]) -> ([i, j]) {i=2, j=3}"},
  {"Cast", "%a: tensor<2x3xf32>",
   "loom.cast %a : tensor<2x3xf32> -> tensor<2x3xbf16>",
   "([i, j]) -> ([i, j]) {i=2, j=3}"},
  // Layout.
  {"ReshapeSplitHeads", "%a: tensor<2x16x768xf32>",
   "loom.reshape %a : tensor<2x16x768xf32> -> tensor<2x16x12x64xf32>",
   "([i, j, kl]) -> ([i, j, k, l]) {i=2, j=16, k=12, l=64}"},
  {"ReshapeMergeHeads", "%a: tensor<2x16x12x64xf32>",
   "loom.reshape %a : tensor<2x16x12x64xf32> -> tensor<32x768xf32>",
   "([i, j, k, l]) -> ([ij, kl]) {i=2, j=16, k=12, l=64}"},
  {"ReshapeUnitDims", "%a: tensor<1x8xf32>",
   "loom.reshape %a : tensor<1x8xf32> -> tensor<8x1xf32>",
   "([1, i]) -> ([i, 1]) {i=8}"},
  {"ReshapeIncompatible", "%a: tensor<6x4xf32>",
   "loom.reshape %a : tensor<6x4xf32> -> tensor<4x6xf32>",
   "([i, l]) -> ([j, k]) {i=6, j=4, k=6, l=4} whole={i, j, k, l}"},
  {"Transpose", "%a: tensor<2x3x4xf32>",
   "loom.transpose %a [0, 2, 1] : tensor<2x3x4xf32> -> tensor<2x4x3xf32>",
   "([i, j, k]) -> ([i, k, j]) {i=2, j=3, k=4}"},
  {"Broadcast", "%a: tensor<16x1xf32>",
   "loom.broadcast %a : tensor<16x1xf32> -> tensor<2x16x768xf32>",
   "([j, 1]) -> ([i, j, k]) {i=2, j=16, k=768}"},
  {"Slice", "%a: tensor<2x16x2304xf32>",
   "loom.slice %a [0, 0, 768] : tensor<2x16x2304xf32> -> tensor<2x16x768xf32>",
   "([i, j, k]) -> ([i, j, l]) {i=2, j=16, k=2304, l=768} whole={k, l}"},
  {"Pad", "%a: tensor<2x16x768xf32>",
   "loom.pad %a low [0, 0, 768] : tensor<2x16x768xf32> -> tensor<2x16x2304xf32>",
   "([i, j, k]) -> ([i, j, l]) {i=2, j=16, k=768, l=2304} whole={k, l}"},
  {"Concat", "%a: tensor<2x3xf32>, %b: tensor<2x5xf32>",
   "loom.concat %a, %b {axis = 1 : i64} : (tensor<2x3xf32>, tensor<2x5xf32>) -> tensor<2x8xf32>",
   "([i, k], [i, l]) -> ([i, j]) {i=2, j=8, k=3, l=5} whole={j, k, l}"},
  // Reductions leave partial results over the reduced factors.
  {"ReduceSum", "%a: tensor<4x8xf32>",
   "loom.reduce_sum %a [1] : tensor<4x8xf32> -> tensor<4xf32>",
   "([i, j]) -> ([i]) {i=4, j=8} reduction={j}"},
  {"ReduceMeanKeepDims", "%a: tensor<4x8xf32>",
   "loom.reduce_mean %a [1] {keep_dims} : tensor<4x8xf32> -> tensor<4x1xf32>",
   "([i, j]) -> ([i, 1]) {i=4, j=8} reduction={j}"},
  {"ReduceMax", "%a: tensor<4x8xf32>",
   "loom.reduce_max %a [0] : tensor<4x8xf32> -> tensor<8xf32>",
   "([i, j]) -> ([j]) {i=4, j=8} reduction={i}(max)"},
  // Matmul: M and N parallel, K a reduction (Megatron's row-parallel split).
  {"Matmul", "%a: tensor<4x8xf32>, %b: tensor<8x16xf32>",
   "loom.matmul %a, %b : (tensor<4x8xf32>, tensor<8x16xf32>) -> tensor<4x16xf32>",
   "([i, k], [k, j]) -> ([i, j]) {i=4, j=16, k=8} reduction={k}"},
  {"MatmulTransposeLhs", "%a: tensor<8x4xf32>, %b: tensor<8x16xf32>",
   "loom.matmul %a, %b {transpose_lhs} : (tensor<8x4xf32>, tensor<8x16xf32>) -> tensor<4x16xf32>",
   "([k, i], [k, j]) -> ([i, j]) {i=4, j=16, k=8} reduction={k}"},
  {"MatmulBatchedTransposeRhs", "%a: tensor<2x3x4x8xf32>, %b: tensor<2x3x16x8xf32>",
   "loom.matmul %a, %b {transpose_rhs} : (tensor<2x3x4x8xf32>, tensor<2x3x16x8xf32>) -> tensor<2x3x4x16xf32>",
   "([i, j, k, m], [i, j, l, m]) -> ([i, j, k, l]) {i=2, j=3, k=4, l=16, m=8} reduction={m}"},
  {"MatmulSharedWeight", "%a: tensor<2x16x8xf32>, %b: tensor<8x32xf32>",
   "loom.matmul %a, %b : (tensor<2x16x8xf32>, tensor<8x32xf32>) -> tensor<2x16x32xf32>",
   "([i, j, l], [l, k]) -> ([i, j, k]) {i=2, j=16, k=32, l=8} reduction={l}"},
  // Normalizations: the normalized dimension stays whole; the gradients of
  // gamma and beta are partial over the rows.
  {"LayerNorm", "%x: tensor<2x16x768xf32>, %g: tensor<768xf32>",
   "loom.layernorm %x, %g, %g {epsilon = 1.0e-05 : f64} : tensor<2x16x768xf32>, tensor<768xf32>",
   "([i, j, k], [k], [k]) -> ([i, j, k]) {i=2, j=16, k=768} whole={k}"},
  {"LayerNormGrad", "%x: tensor<2x16x768xf32>, %g: tensor<768xf32>",
   "loom.layernorm_grad %x, %x, %g {epsilon = 1.0e-05 : f64} : tensor<2x16x768xf32>, tensor<768xf32>",
   "([i, j, k], [i, j, k], [k]) -> ([i, j, k], [k], [k]) {i=2, j=16, k=768} reduction={i, j} whole={k}"},
  {"RMSNorm", "%x: tensor<2x16x512xf32>, %g: tensor<512xf32>",
   "loom.rmsnorm %x, %g {epsilon = 1.0e-06 : f64} : tensor<2x16x512xf32>, tensor<512xf32>",
   "([i, j, k], [k]) -> ([i, j, k]) {i=2, j=16, k=512} whole={k}"},
  {"RMSNormGrad", "%x: tensor<2x16x512xf32>, %g: tensor<512xf32>",
   "loom.rmsnorm_grad %x, %x, %g {epsilon = 1.0e-06 : f64} : tensor<2x16x512xf32>, tensor<512xf32>",
   "([i, j, k], [i, j, k], [k]) -> ([i, j, k], [k]) {i=2, j=16, k=512} reduction={i, j} whole={k}"},
  {"Softmax", "%x: tensor<2x4x16x16xf32>", "loom.softmax %x : tensor<2x4x16x16xf32>",
   "([i, j, k, l]) -> ([i, j, k, l]) {i=2, j=4, k=16, l=16} whole={l}"},
  // Causal: the mask compares row and column, both stay whole.
  {"SoftmaxCausal", "%x: tensor<2x4x16x16xf32>", "loom.softmax %x {causal} : tensor<2x4x16x16xf32>",
   "([i, j, k, l]) -> ([i, j, k, l]) {i=2, j=4, k=16, l=16} whole={k, l}"},
  {"SoftmaxGrad", "%x: tensor<2x4x16x16xf32>",
   "loom.softmax_grad %x, %x : tensor<2x4x16x16xf32>",
   "([i, j, k, l], [i, j, k, l]) -> ([i, j, k, l]) {i=2, j=4, k=16, l=16} whole={l}"},
  // Activations.
  {"Gelu", "%x: tensor<4x8xf32>", "loom.gelu %x : tensor<4x8xf32>",
   "([i, j]) -> ([i, j]) {i=4, j=8}"},
  {"GeluGrad", "%x: tensor<4x8xf32>", "loom.gelu_grad %x, %x : tensor<4x8xf32>",
   "([i, j], [i, j]) -> ([i, j]) {i=4, j=8}"},
  {"GeluErf", "%x: tensor<4x8xf32>", "loom.gelu_erf %x : tensor<4x8xf32>",
   "([i, j]) -> ([i, j]) {i=4, j=8}"},
  {"GeluErfGrad", "%x: tensor<4x8xf32>",
   "loom.gelu_erf_grad %x, %x : tensor<4x8xf32>",
   "([i, j], [i, j]) -> ([i, j]) {i=4, j=8}"},
  {"Silu", "%x: tensor<4x8xf32>", "loom.silu %x : tensor<4x8xf32>",
   "([i, j]) -> ([i, j]) {i=4, j=8}"},
  {"SiluGrad", "%x: tensor<4x8xf32>", "loom.silu_grad %x, %x : tensor<4x8xf32>",
   "([i, j], [i, j]) -> ([i, j]) {i=4, j=8}"},
  // Rotary embeddings: the rotated pairs lie along the head dimension; a
  // shard of the sequence finds its positions from its split.
  {"Rope", "%x: tensor<2x16x8x64xf32>",
   "loom.rope %x {theta = 10000.0 : f64} : tensor<2x16x8x64xf32>",
   "([i, j, k, l]) -> ([i, j, k, l]) {i=2, j=16, k=8, l=64} whole={l}"},
  {"RopeGrad", "%x: tensor<2x16x8x64xf32>",
   "loom.rope_grad %x {theta = 10000.0 : f64} : tensor<2x16x8x64xf32>",
   "([i, j, k, l]) -> ([i, j, k, l]) {i=2, j=16, k=8, l=64} whole={l}"},
  // Attention: a query head is (kv head l, group m); the queries j split
  // even under the causal mask (context parallelism: the keys k stay
  // whole, so the gradient leaves dk and dv partial over j).
  {"AttentionCausalGQA",
   "%q: tensor<2x16x8x64xf32>, %k: tensor<2x16x2x64xf32>",
   "loom.attention %q, %k, %k {causal, scale = 0.125 : f64} : (tensor<2x16x8x64xf32>, tensor<2x16x2x64xf32>, tensor<2x16x2x64xf32>) -> (tensor<2x16x8x64xf32>, tensor<2x8x16xf32>)",
   "([i, j, lm, n], [i, k, l, n], [i, k, l, n]) -> ([i, j, lm, n], [i, lm, j]) {i=2, j=16, k=16, l=2, m=4, n=64} whole={k, n}"},
  {"AttentionMultiHead",
   "%q: tensor<2x8x4x32xf32>",
   "loom.attention %q, %q, %q {scale = 0.125 : f64} : (tensor<2x8x4x32xf32>, tensor<2x8x4x32xf32>, tensor<2x8x4x32xf32>) -> (tensor<2x8x4x32xf32>, tensor<2x4x8xf32>)",
   "([i, j, l, m], [i, k, l, m], [i, k, l, m]) -> ([i, j, l, m], [i, l, j]) {i=2, j=8, k=8, l=4, m=32} whole={k, m}"},
  {"AttentionGradCausalGQA",
   "%q: tensor<2x16x8x64xf32>, %k: tensor<2x16x2x64xf32>, %lse: tensor<2x8x16xf32>",
   "loom.attention_grad %q, %q, %k, %k, %q, %lse {causal, scale = 0.125 : f64} : (tensor<2x16x8x64xf32>, tensor<2x16x8x64xf32>, tensor<2x16x2x64xf32>, tensor<2x16x2x64xf32>, tensor<2x16x8x64xf32>, tensor<2x8x16xf32>) -> (tensor<2x16x8x64xf32>, tensor<2x16x2x64xf32>, tensor<2x16x2x64xf32>)",
   "([i, j, lm, n], [i, j, lm, n], [i, k, l, n], [i, k, l, n], [i, j, lm, n], [i, lm, j]) -> ([i, j, lm, n], [i, k, l, n], [i, k, l, n]) {i=2, j=16, k=16, l=2, m=4, n=64} reduction={j, m} whole={k, n}"},
  // Attention dropout: the step is 0-d; the mask indexes the global
  // probabilities, so nothing more stays whole than without dropout.
  {"AttentionDropoutGQA",
   "%q: tensor<2x16x8x64xf32>, %k: tensor<2x16x2x64xf32>, %step: tensor<i64>",
   "loom.attention %q, %k, %k, %step {causal, scale = 0.125 : f64, dropout_rate = 0.1 : f64, dropout_seed = 1 : i64, dropout_key = 3 : i64} : (tensor<2x16x8x64xf32>, tensor<2x16x2x64xf32>, tensor<2x16x2x64xf32>, tensor<i64>) -> (tensor<2x16x8x64xf32>, tensor<2x8x16xf32>)",
   "([i, j, lm, n], [i, k, l, n], [i, k, l, n], []) -> ([i, j, lm, n], [i, lm, j]) {i=2, j=16, k=16, l=2, m=4, n=64} whole={k, n}"},
  {"AttentionGradDropoutGQA",
   "%q: tensor<2x16x8x64xf32>, %k: tensor<2x16x2x64xf32>, %lse: tensor<2x8x16xf32>, %step: tensor<i64>",
   "loom.attention_grad %q, %q, %k, %k, %q, %lse, %step {causal, scale = 0.125 : f64, dropout_rate = 0.1 : f64, dropout_seed = 1 : i64, dropout_key = 3 : i64} : (tensor<2x16x8x64xf32>, tensor<2x16x8x64xf32>, tensor<2x16x2x64xf32>, tensor<2x16x2x64xf32>, tensor<2x16x8x64xf32>, tensor<2x8x16xf32>, tensor<i64>) -> (tensor<2x16x8x64xf32>, tensor<2x16x2x64xf32>, tensor<2x16x2x64xf32>)",
   "([i, j, lm, n], [i, j, lm, n], [i, k, l, n], [i, k, l, n], [i, j, lm, n], [i, lm, j], []) -> ([i, j, lm, n], [i, k, l, n], [i, k, l, n]) {i=2, j=16, k=16, l=2, m=4, n=64} reduction={j, m} whole={k, n}"},
  // Embedding: the vocabulary stays whole (a split table would need the
  // device's row offset).
  {"Embedding", "%t: tensor<100x32xf32>, %ids: tensor<2x16xi32>",
   "loom.embedding %t, %ids : (tensor<100x32xf32>, tensor<2x16xi32>) -> tensor<2x16x32xf32>",
   "([i, j], [k, l]) -> ([k, l, j]) {i=100, j=32, k=2, l=16} whole={i}"},
  // The gradient of a maximum needs the whole reduced group.
  {"ReduceMaxGrad", "%dy: tensor<4xf32>, %x: tensor<4x8xf32>",
   "loom.reduce_max_grad %dy, %x [1] : tensor<4xf32>, tensor<4x8xf32>",
   "([i], [i, j]) -> ([i, j]) {i=4, j=8} whole={j}"},
  {"ReduceMaxGradKeepDims", "%dy: tensor<1x8xf32>, %x: tensor<4x8xf32>",
   "loom.reduce_max_grad %dy, %x [0] {keep_dims} : tensor<1x8xf32>, tensor<4x8xf32>",
   "([1, j], [i, j]) -> ([i, j]) {i=4, j=8} whole={i}"},
  {"EmbeddingGrad", "%dy: tensor<2x16x32xf32>, %ids: tensor<2x16xi64>",
   "loom.embedding_grad %dy, %ids : (tensor<2x16x32xf32>, tensor<2x16xi64>) -> tensor<100x32xf32>",
   "([k, l, j], [k, l]) -> ([i, j]) {i=100, j=32, k=2, l=16} reduction={k, l} whole={i}"},
  // Cross-entropy: tokens are summed into the loss, the vocabulary is whole.
  {"CrossEntropy", "%x: tensor<2x16x100xf32>, %y: tensor<2x16xi32>",
   "loom.cross_entropy %x, %y : (tensor<2x16x100xf32>, tensor<2x16xi32>) -> tensor<f32>",
   "([i, j, k], [i, j]) -> ([]) {i=2, j=16, k=100} reduction={i, j} whole={k}"},
  {"CrossEntropyGrad", "%d: tensor<f32>, %x: tensor<2x16x100xf32>, %y: tensor<2x16xi32>",
   "loom.cross_entropy_grad %d, %x, %y : (tensor<f32>, tensor<2x16x100xf32>, tensor<2x16xi32>) -> tensor<2x16x100xf32>",
   "([], [i, j, k], [i, j]) -> ([i, j, k]) {i=2, j=16, k=100} whole={k}"},
  // Dropout and the optimizers are elementwise; the step is a scalar.
  {"Dropout", "%x: tensor<4x8xf32>, %s: tensor<i64>",
   "loom.dropout %x, %s {key = 1 : i64, rate = 0.1 : f64, seed = 7 : i64} : tensor<4x8xf32>, tensor<i64>",
   "([i, j], []) -> ([i, j]) {i=4, j=8}"},
  {"DropoutGrad", "%x: tensor<4x8xf32>, %s: tensor<i64>",
   "loom.dropout_grad %x, %s {key = 1 : i64, rate = 0.1 : f64, seed = 7 : i64} : tensor<4x8xf32>, tensor<i64>",
   "([i, j], []) -> ([i, j]) {i=4, j=8}"},
  {"AdamW", "%p: tensor<4x8xf32>, %g: tensor<4x8xbf16>, %s: tensor<i64>",
   "loom.adamw_update %p, %g, %p, %p, %s {beta1 = 0.9 : f64, beta2 = 0.95 : f64, eps = 1.0e-08 : f64, lr = 1.0e-03 : f64, weight_decay = 0.1 : f64} : tensor<4x8xf32>, tensor<4x8xbf16>, tensor<i64>",
   "([i, j], [i, j], [i, j], [i, j], []) -> ([i, j], [i, j], [i, j]) {i=4, j=8}"},
  {"SGD", "%p: tensor<4x8xf32>",
   "loom.sgd_update %p, %p {lr = 1.0e-02 : f64, weight_decay = 0.0 : f64} : tensor<4x8xf32>, tensor<4x8xf32>",
   "([i, j], [i, j]) -> ([i, j]) {i=4, j=8}"},
};
// clang-format on

/// Parses a case into a module holding one function with the op.
class ShardingRuleTest : public ::testing::TestWithParam<RuleCase> {
protected:
  ShardingRuleTest() { context.loadDialect<func::FuncDialect, LoomDialect>(); }

  /// Returns the op of `c`, or null with the parser's diagnostics in
  /// `diagnostics`.
  Operation *parse(const RuleCase &c) {
    std::string source = std::string("func.func @f(") + c.args + ") {\n  " +
                         c.op + "\n  return\n}\n";
    ScopedDiagnosticHandler handler(
        &context, [&](Diagnostic &diag) { diagnostics += diag.str() + "\n"; });
    module = parseSourceString<ModuleOp>(source, &context);
    if (!module)
      return nullptr;
    Operation *found = nullptr;
    module->walk([&](ShardingRuleOpInterface op) { found = op; });
    return found;
  }

  MLIRContext context;
  OwningOpRef<ModuleOp> module;
  std::string diagnostics;
};

TEST_P(ShardingRuleTest, MatchesShapesAndSemantics) {
  const RuleCase &c = GetParam();
  Operation *op = parse(c);
  ASSERT_NE(op, nullptr) << diagnostics;
  OpShardingRule rule = cast<ShardingRuleOpInterface>(op).getShardingRule();
  std::string error;
  ScopedDiagnosticHandler handler(
      &context, [&](Diagnostic &diag) { error += diag.str(); });
  EXPECT_TRUE(succeeded(rule.verify(op->getOperandTypes(), op->getResultTypes(),
                                    [&] { return op->emitError(); })))
      << error;
  EXPECT_EQ(rule.str(), c.rule);
}

INSTANTIATE_TEST_SUITE_P(AllOps, ShardingRuleTest, ::testing::ValuesIn(kCases),
                         [](const ::testing::TestParamInfo<RuleCase> &info) {
                           return std::string(info.param.name);
                         });

/// The cases of ops marked Loom_Linear (partial sums may flow through them,
/// which the solver relies on) are linear in their operands jointly:
/// op(a + b) = op(a) + op(b), in the interpreter in f64.
TEST(ShardingRuleLinearity, LinearOpsAreLinear) {
  MLIRContext context;
  context.loadDialect<func::FuncDialect, LoomDialect>();
  std::mt19937 rng(7);
  std::uniform_real_distribution<double> uniform(-1, 1);
  int checked = 0;
  for (const RuleCase &c : kCases) {
    std::string source =
        std::string("func.func @f(") + c.args + ") {\n  " + c.op + "\n}\n";
    // Parsed once for the op's traits and result type (the function has no
    // terminator yet, so it is not verified).
    ParserConfig config(&context, /*verifyAfterParse=*/false);
    OwningOpRef<ModuleOp> probe = parseSourceString<ModuleOp>(source, config);
    ASSERT_TRUE(probe) << c.name;
    Operation *op = &cast<func::FuncOp>(probe->getBody()->front())
                         .getBody()
                         .front()
                         .front();
    if (!op->hasTrait<Linear>())
      continue;
    ASSERT_EQ(op->getNumResults(), 1u) << c.name;
    std::string type;
    llvm::raw_string_ostream os(type);
    op->getResult(0).getType().print(os);
    source = std::string("func.func @f(") + c.args + ") -> " + type +
             " {\n  %r = " + c.op + "\n  return %r : " + type + "\n}\n";
    OwningOpRef<ModuleOp> module =
        parseSourceString<ModuleOp>(source, &context);
    ASSERT_TRUE(module) << source;
    auto fn = cast<func::FuncOp>(module->getBody()->front());

    std::vector<interp::Tensor> a, b, sum;
    for (Type argType : fn.getArgumentTypes()) {
      auto tensor = cast<RankedTensorType>(argType);
      ASSERT_TRUE(isa<FloatType>(tensor.getElementType())) << c.name;
      std::vector<double> x(tensor.getNumElements()), y(x.size()), z(x.size());
      for (size_t i = 0; i < x.size(); ++i) {
        x[i] = uniform(rng);
        y[i] = uniform(rng);
        z[i] = x[i] + y[i];
      }
      a.push_back(interp::Tensor::floats(nullptr, tensor.getShape(), x));
      b.push_back(interp::Tensor::floats(nullptr, tensor.getShape(), y));
      sum.push_back(interp::Tensor::floats(nullptr, tensor.getShape(), z));
    }
    auto ra = interp::run(fn, a, interp::Precision::F64);
    auto rb = interp::run(fn, b, interp::Precision::F64);
    auto rs = interp::run(fn, sum, interp::Precision::F64);
    ASSERT_TRUE(ra && rb && rs) << c.name;
    const std::vector<double> &fa = (*ra)[0].f(), &fb = (*rb)[0].f(),
                              &fs = (*rs)[0].f();
    ASSERT_EQ(fs.size(), fa.size()) << c.name;
    for (size_t i = 0; i < fs.size(); ++i)
      EXPECT_NEAR(fs[i], fa[i] + fb[i], 1e-12) << c.name << ", element " << i;
    ++checked;
  }
  EXPECT_GE(checked, 10);
}

/// Every registered loom op implements the interface and has a case above,
/// but loom.fused and its loom.yield: --loom-fuse builds them after
/// partitioning, right before the lowering, so nothing shards them.
TEST(ShardingRuleCoverage, EveryOpHasARuleAndACase) {
  MLIRContext context;
  context.loadDialect<func::FuncDialect, LoomDialect>();
  llvm::StringSet<> covered;
  for (const RuleCase &c : kCases) {
    StringRef op(c.op);
    covered.insert(op.take_until([](char ch) { return ch == ' '; }));
  }
  int loomOps = 0;
  for (RegisteredOperationName name : context.getRegisteredOperations()) {
    if (name.getDialectNamespace() != "loom")
      continue;
    if (name.getStringRef() == "loom.fused" ||
        name.getStringRef() == "loom.yield") {
      EXPECT_FALSE(name.hasInterface<ShardingRuleOpInterface>());
      continue;
    }
    ++loomOps;
    EXPECT_TRUE(name.hasInterface<ShardingRuleOpInterface>())
        << name.getStringRef().str() << " has no sharding rule";
    EXPECT_TRUE(covered.contains(name.getStringRef()))
        << name.getStringRef().str() << " has no sharding-rule test case";
  }
  EXPECT_GT(loomOps, 40);
}

/// Verifies `rule` for an op whose operands and results all have `shape`;
/// returns the error, or "" when the rule is accepted.
std::string verifyError(const OpShardingRule &rule, ArrayRef<int64_t> shape) {
  MLIRContext context;
  auto type = RankedTensorType::get(shape, Float32Type::get(&context));
  std::string error;
  ScopedDiagnosticHandler handler(
      &context, [&](Diagnostic &diag) { error = diag.str(); });
  Location loc = UnknownLoc::get(&context);
  (void)rule.verify(TypeRange(type), TypeRange(type),
                    [&] { return emitError(loc); });
  return error;
}

/// The rule checker rejects a mapping that does not fit the shapes.
TEST(OpShardingRule, VerifyRejectsWrongSizes) {
  OpShardingRule rule;
  int64_t i = rule.addFactor(4), j = rule.addFactor(8);
  rule.addOperand({{i}, {j}});
  rule.addResult({{j}, {i}});
  EXPECT_EQ(
      verifyError(rule, {4, 8}),
      "sharding rule makes dimension 0 of result #0 8 elements, it has 4");
}

TEST(OpShardingRule, VerifyRejectsUnusedFactor) {
  OpShardingRule rule;
  int64_t i = rule.addFactor(4);
  rule.addFactor(8);
  rule.addOperand({{i}});
  rule.addResult({{i}});
  EXPECT_EQ(verifyError(rule, {4}), "sharding rule factor 1 maps no dimension");
}

TEST(OpShardingRule, KindsFollowTheResults) {
  OpShardingRule rule;
  int64_t m = rule.addFactor(4), n = rule.addFactor(16), k = rule.addFactor(8);
  int64_t whole = rule.addFactor(2, /*whole=*/true);
  EXPECT_EQ(rule.addFactor(1), OpShardingRule::kNoFactor);
  rule.addOperand({{m}, {k}, {whole}});
  rule.addOperand({{k}, {n}});
  rule.addResult({{m}, {n}, {whole}});
  EXPECT_EQ(rule.getFactorKind(m), FactorKind::Parallel);
  EXPECT_EQ(rule.getFactorKind(n), FactorKind::Parallel);
  EXPECT_EQ(rule.getFactorKind(k), FactorKind::Reduction);
  EXPECT_EQ(rule.getFactorKind(whole), FactorKind::Whole);
}

} // namespace
