//===- OnnxImportTest.cpp - The ONNX importer's folding and patterns ------===//
//
// The node evaluator against hand-computed results (ONNX's operator
// definitions: negative axes and indices, Reshape's 0 and -1, Slice's
// clamping, opset 18's axes inputs and num_outputs), and small graphs
// built in memory through the whole importer: which fused op a pattern
// becomes, what stays unfused and why, and the plain lowering of what no
// pattern takes. The end-to-end checks against PyTorch are lit tests
// (test/tools/loom-run/onnx-*.test).
//
//===----------------------------------------------------------------------===//

#include "lib/Import/Onnx/Evaluate.h"
#include "lib/Import/Onnx/GraphImporter.h"

#include "mlir/IR/MLIRContext.h"
#include "llvm/Support/raw_ostream.h"

#include <gtest/gtest.h>

#include <cmath>
#include <cstring>

using namespace loom;
using namespace loom::onnx_import;

namespace {

//===----------------------------------------------------------------------===//
// The evaluator
//===----------------------------------------------------------------------===//

OnnxNode node(llvm::StringRef op, size_t inputs, size_t outputs = 1) {
  OnnxNode n;
  n.name = op.str();
  n.opType = op.str();
  for (size_t i = 0; i < inputs; ++i)
    n.inputs.push_back("in" + std::to_string(i));
  for (size_t i = 0; i < outputs; ++i)
    n.outputs.push_back("out" + std::to_string(i));
  return n;
}

void setInts(OnnxNode &n, llvm::StringRef key, std::vector<int64_t> values) {
  OnnxAttribute a;
  a.kind = OnnxAttribute::Ints;
  a.ints.assign(values.begin(), values.end());
  n.attributes[key] = a;
}

void setInt(OnnxNode &n, llvm::StringRef key, int64_t value) {
  OnnxAttribute a;
  a.kind = OnnxAttribute::Int;
  a.i = value;
  n.attributes[key] = a;
}

/// An operand holding `t`.
Operand known(const HostTensor &t) {
  Operand o;
  o.present = true;
  o.type = {t.dtype, t.shape};
  o.data = &t;
  return o;
}

/// An operand of `shape` known only by its type (a run-time value).
Operand dynamic(llvm::ArrayRef<int64_t> shape, DType dtype = DType::F32) {
  Operand o;
  o.present = true;
  o.type = {dtype, llvm::SmallVector<int64_t, 4>(shape)};
  return o;
}

HostTensor ints(std::vector<int64_t> values, std::vector<int64_t> shape = {}) {
  if (shape.empty() && values.size() != 1)
    shape = {int64_t(values.size())};
  return HostTensor::ints(DType::I64, shape, std::move(values));
}

HostTensor iota(std::vector<int64_t> shape) {
  HostTensor t = HostTensor::floats(DType::F32, shape, {});
  for (int64_t e = 0; e < t.numElements(); ++e)
    t.f.push_back(e);
  return t;
}

Evaluation run(const OnnxNode &n, llvm::ArrayRef<Operand> in,
               int64_t opset = 17) {
  auto result = evaluate(n, in, opset, /*wantData=*/true);
  if (!result) {
    ADD_FAILURE() << toString(result.takeError());
    return {};
  }
  return *result;
}

std::string failure(const OnnxNode &n, llvm::ArrayRef<Operand> in,
                    int64_t opset = 17) {
  auto result = evaluate(n, in, opset, /*wantData=*/true);
  if (result)
    return "(no error)";
  return toString(result.takeError());
}

TEST(OnnxEvaluateTest, ShapeArithmeticFolds) {
  // Shape of a [2, 5, 8] activation, its dimension 1, as a 1-D list.
  OnnxNode shape = node("Shape", 1);
  Evaluation s = run(shape, {dynamic({2, 5, 8})});
  ASSERT_TRUE(s.data);
  EXPECT_EQ((*s.data)[0].i, (std::vector<int64_t>{2, 5, 8}));
  setInt(shape, "start", -2);
  EXPECT_EQ((*run(shape, {dynamic({2, 5, 8})}).data)[0].i,
            (std::vector<int64_t>{5, 8}));

  HostTensor dims = ints({2, 5, 8}), index = ints({-2}); // a scalar index

  Evaluation g = run(node("Gather", 2), {known(dims), known(index)});
  EXPECT_TRUE(g.types[0].shape.empty());
  EXPECT_EQ((*g.data)[0].i, (std::vector<int64_t>{5}));

  // Unsqueeze by an axes input (opset 13+), negative axes index the result.
  HostTensor scalar = ints({5}), axes = ints({-1}, {1});
  Evaluation u = run(node("Unsqueeze", 2), {known(scalar), known(axes)});
  EXPECT_EQ(u.types[0].shape, (llvm::SmallVector<int64_t, 4>{1}));

  HostTensor a = ints({2}, {1}), b = ints({-1}, {1}), c = ints({4}, {1});
  OnnxNode concat = node("Concat", 3);
  setInt(concat, "axis", 0);
  EXPECT_EQ((*run(concat, {known(a), known(b), known(c)}).data)[0].i,
            (std::vector<int64_t>{2, -1, 4}));
}

TEST(OnnxEvaluateTest, ReshapeCopiesZerosAndInfersMinusOne) {
  HostTensor target = ints({0, -1, 2});
  Evaluation r = run(node("Reshape", 2), {dynamic({3, 4, 2}), known(target)});
  EXPECT_EQ(r.types[0].shape, (llvm::SmallVector<int64_t, 4>{3, 4, 2}));
  HostTensor bad = ints({5, -1});
  EXPECT_EQ(failure(node("Reshape", 2), {dynamic({3, 4}), known(bad)}),
            "cannot reshape [3, 4] to [5, -1]");
  // A shape computed at run time is the error a user sees by the node.
  EXPECT_EQ(
      failure(node("Reshape", 2), {dynamic({3, 4}), dynamic({2}, DType::I64)}),
      "its shape input is not a constant after folding (a shape "
      "computed from data Loom cannot fold at import)");
}

TEST(OnnxEvaluateTest, SliceClampsLikeOnnx) {
  // x[:, 1:INT64_MAX] and x[:, -2:] of a [2, 5] tensor, and a reversed
  // step.
  HostTensor x = iota({2, 5});
  HostTensor starts = ints({1}, {1}), ends = ints({INT64_MAX}, {1}),
             axes = ints({-1}, {1});
  Evaluation s = run(node("Slice", 4),
                     {known(x), known(starts), known(ends), known(axes)});
  EXPECT_EQ(s.types[0].shape, (llvm::SmallVector<int64_t, 4>{2, 4}));
  EXPECT_EQ((*s.data)[0].f, (std::vector<double>{1, 2, 3, 4, 6, 7, 8, 9}));
  HostTensor from = ints({-2}, {1});
  Evaluation tail =
      run(node("Slice", 4), {known(x), known(from), known(ends), known(axes)});
  EXPECT_EQ((*tail.data)[0].f, (std::vector<double>{3, 4, 8, 9}));
  HostTensor back = ints({-1}, {1}), begin = ints({INT64_MIN}, {1}),
             step = ints({-2}, {1});
  Evaluation reversed =
      run(node("Slice", 5),
          {known(x), known(back), known(begin), known(axes), known(step)});
  EXPECT_EQ((*reversed.data)[0].f, (std::vector<double>{4, 2, 0, 9, 7, 5}));
}

TEST(OnnxEvaluateTest, Opset18AxesInputsAndSplitOutputs) {
  // ReduceMean's axes are an input from opset 18.
  HostTensor x = iota({2, 3}), axes = ints({-1}, {1});
  Evaluation mean = run(node("ReduceMean", 2), {known(x), known(axes)}, 18);
  EXPECT_EQ(mean.types[0].shape, (llvm::SmallVector<int64_t, 4>{2, 1}));
  EXPECT_EQ((*mean.data)[0].f, (std::vector<double>{1, 4}));
  // Split into num_outputs parts, the last smaller.
  OnnxNode split = node("Split", 1, 3);
  setInt(split, "axis", 1);
  HostTensor y = iota({1, 8});
  Evaluation parts = run(split, {known(y)}, 18);
  ASSERT_EQ(parts.types.size(), 3u);
  EXPECT_EQ(parts.types[2].shape, (llvm::SmallVector<int64_t, 4>{1, 2}));
  EXPECT_EQ((*parts.data)[1].f, (std::vector<double>{3, 4, 5}));
}

TEST(OnnxEvaluateTest, CausalMasksFold) {
  // Llama's mask: full(min).triu(1) as Trilu, and a Where on a comparison
  // of two Ranges.
  HostTensor full = HostTensor::floats(DType::F32, {3, 3}, {});
  full.f.assign(9, -3.0e38f);
  HostTensor k = ints({1});
  Evaluation triu = run(node("Trilu", 2), {known(full), known(k)});
  EXPECT_EQ((*triu.data)[0].f, (std::vector<double>{0, -3.0e38f, -3.0e38f, 0, 0,
                                                    -3.0e38f, 0, 0, 0}));
  HostTensor start = ints({0}), limit = ints({3}), delta = ints({1});
  Evaluation range =
      run(node("Range", 3), {known(start), known(limit), known(delta)});
  HostTensor positions = (*range.data)[0];
  HostTensor column = positions;
  column.shape = {3, 1};
  Evaluation later = run(node("Greater", 2), {known(positions), known(column)});
  EXPECT_EQ(later.types[0].dtype, DType::Bool);
  EXPECT_EQ((*later.data)[0].i,
            (std::vector<int64_t>{0, 1, 1, 0, 0, 1, 0, 0, 0}));
}

TEST(OnnxEvaluateTest, BadGraphsAreErrorsNotCrashes) {
  EXPECT_EQ(failure(node("Gather", 1), {dynamic({4, 2})}),
            "has 1 inputs; it needs 2");
  EXPECT_EQ(failure(node("Add", 2), {dynamic({2, 3}), dynamic({4})}),
            "shapes [2, 3] and [4] do not broadcast");
  HostTensor huge = ints({1 << 20, 1 << 20});
  EXPECT_EQ(failure(node("ConstantOfShape", 1), {known(huge)}),
            "would fold a constant of shape [1048576, 1048576] (Loom folds "
            "at most 67108864 elements at import)");
  HostTensor negative = ints({-3}, {1});
  EXPECT_EQ(failure(node("Expand", 2), {dynamic({1}), known(negative)}),
            "computes the negative shape [-3]");
  OnnxNode transpose = node("Transpose", 1);
  setInts(transpose, "perm", {0, 0});
  EXPECT_EQ(failure(transpose, {dynamic({2, 3})}), "perm is not a permutation");
  // Axes of scalars, and joins of them, have no meaning.
  HostTensor scalar = ints({7});
  EXPECT_EQ(failure(node("Concat", 2), {known(scalar), known(scalar)}),
            "joins scalars (its inputs need a rank of 1 or more)");
  HostTensor index = ints({0});
  EXPECT_EQ(failure(node("Gather", 2), {known(scalar), known(index)}),
            "takes an axis of a scalar");
}

//===----------------------------------------------------------------------===//
// Graphs through the importer
//===----------------------------------------------------------------------===//

/// Builds a graph: token ids [2, 4] in, nodes, float initializers.
class Graph {
public:
  Graph() {
    TensorInfo ids;
    ids.name = "ids";
    ids.dtype = DType::I64;
    ids.hasShape = true;
    ids.dims = {2, 4};
    ids.dimNames = {"", ""};
    g.inputs.push_back(ids);
    g.opset = 17;
  }

  /// A float initializer with values 0.1 * sin(e + seed): varied, non-zero.
  void weight(const std::string &name, std::vector<int64_t> shape,
              double seed = 0) {
    RawTensor t;
    t.name = name;
    t.dtype = DType::F32;
    t.shape.assign(shape.begin(), shape.end());
    for (int64_t e = 0; e < t.numElements(); ++e) {
      float v = 0.1f * std::sin(float(e) + float(seed));
      t.bytes.append(reinterpret_cast<const char *>(&v), sizeof v);
    }
    g.initializers.push_back(std::move(t));
  }

  /// A float scalar (an initializer, which a one-element float is not a
  /// parameter).
  void scalar(const std::string &name, float value) {
    RawTensor t;
    t.name = name;
    t.dtype = DType::F32;
    t.bytes.append(reinterpret_cast<const char *>(&value), sizeof value);
    g.initializers.push_back(std::move(t));
  }

  void intConstant(const std::string &name, std::vector<int64_t> values) {
    RawTensor t;
    t.name = name;
    t.dtype = DType::I64;
    t.shape = {int64_t(values.size())};
    for (int64_t v : values)
      t.bytes.append(reinterpret_cast<const char *>(&v), sizeof v);
    g.initializers.push_back(std::move(t));
  }

  OnnxNode &add(const std::string &op, std::vector<std::string> inputs,
                std::string output) {
    OnnxNode n;
    n.name = output;
    n.opType = op;
    n.inputs.assign(inputs.begin(), inputs.end());
    n.outputs.push_back(std::move(output));
    g.nodes.push_back(std::move(n));
    return g.nodes.back();
  }

  /// Imports with `logits` as the output; the module's text, or "error:
  /// ..." with the message.
  std::string import(const std::string &logits = "logits") {
    TensorInfo out;
    out.name = logits;
    g.outputs = {out};
    mlir::MLIRContext context;
    OnnxImportOptions options;
    GraphImporter importer(context, g, "test.onnx", options);
    auto result = importer.run();
    if (!result)
      return "error: " + toString(result.takeError());
    report = result->report;
    std::string text;
    llvm::raw_string_ostream os(text);
    result->module->print(os);
    return text;
  }

  OnnxGraph g;
  OnnxImportReport report;
};

/// ids -> embedding [2, 4, 8] -> f(x) -> logits by a head [8, 16].
Graph embedded() {
  Graph graph;
  graph.weight("E", {16, 8});
  graph.weight("W", {8, 16}, 1);
  graph.add("Gather", {"E", "ids"}, "x");
  return graph;
}

bool contains(const std::string &text, const std::string &what) {
  return text.find(what) != std::string::npos;
}

TEST(OnnxImportTest, DecomposedLayerNormIsFused) {
  Graph graph = embedded();
  graph.weight("g", {8}, 2);
  graph.weight("b", {8}, 3);
  graph.intConstant("last", {-1});
  graph.scalar("two", 2.0f);
  graph.scalar("eps", 1e-5f);
  auto &mean = graph.add("ReduceMean", {"x", "last"}, "mean");
  setInt(mean, "keepdims", 1);
  graph.add("Sub", {"x", "mean"}, "centered");
  graph.add("Pow", {"centered", "two"}, "squared");
  graph.add("ReduceMean", {"squared", "last"}, "variance");
  graph.add("Add", {"variance", "eps"}, "shifted");
  graph.add("Sqrt", {"shifted"}, "deviation");
  graph.add("Div", {"centered", "deviation"}, "normed");
  graph.add("Mul", {"normed", "g"}, "scaled");
  graph.add("Add", {"scaled", "b"}, "y");
  graph.add("MatMul", {"y", "W"}, "logits");
  std::string ir = graph.import();
  EXPECT_TRUE(contains(ir, "loom.layernorm %0, %arg2, %arg3 {epsilon = "
                           "1.000000e-05 : f64}"))
      << ir;
  EXPECT_FALSE(contains(ir, "loom.reduce_mean")) << ir;
  EXPECT_EQ(graph.report.fused["layernorm"], 1);
}

TEST(OnnxImportTest, InnerValueReadElsewhereKeepsThePatternUnfused) {
  // The same GELU twice: once with its tanh also read by the head.
  Graph graph = embedded();
  graph.scalar("half", 0.5f);
  graph.scalar("one", 1.0f);
  graph.scalar("three", 3.0f);
  graph.scalar("cubic", 0.044715f);
  graph.scalar("scale", 0.7978845608f);
  graph.add("Pow", {"x", "three"}, "x3");
  graph.add("Mul", {"x3", "cubic"}, "c");
  graph.add("Add", {"x", "c"}, "inner");
  graph.add("Mul", {"inner", "scale"}, "u");
  graph.add("Tanh", {"u"}, "t");
  graph.add("Add", {"t", "one"}, "t1");
  graph.add("Mul", {"x", "half"}, "hx");
  graph.add("Mul", {"hx", "t1"}, "gelu");
  graph.add("Add", {"gelu", "t"}, "y");
  graph.add("MatMul", {"y", "W"}, "logits");
  std::string ir = graph.import();
  EXPECT_FALSE(contains(ir, "loom.gelu")) << ir;
  EXPECT_TRUE(contains(ir, "loom.tanh")) << ir;

  Graph fused = embedded();
  fused.g.initializers = graph.g.initializers;
  fused.g.nodes.assign(graph.g.nodes.begin(), graph.g.nodes.end() - 2);
  fused.add("MatMul", {"gelu", "W"}, "logits");
  std::string ok = fused.import();
  EXPECT_TRUE(contains(ok, "loom.gelu %0 : tensor<2x4x8xf32>")) << ok;
  EXPECT_FALSE(contains(ok, "loom.tanh")) << ok;
}

/// Scores of x [2, 4, 8] viewed as [2, 1, 4, 8] heads against themselves,
/// masked by `mask` [4, 4] (additive), softmax, times the values.
Graph attention(std::vector<float> mask) {
  Graph graph = embedded();
  graph.intConstant("heads", {2, 1, 4, 8});
  graph.intConstant("tokens", {2, 4, 8});
  // The mask as a Constant node, as the exporters write a folded one.
  auto m = std::make_shared<RawTensor>();
  m->dtype = DType::F32;
  m->shape = {4, 4};
  for (float v : mask)
    m->bytes.append(reinterpret_cast<const char *>(&v), sizeof v);
  OnnxAttribute value;
  value.kind = OnnxAttribute::Tensor;
  value.tensor = m;
  graph.add("Constant", {}, "mask").attributes["value"] = value;
  graph.scalar("scale", 0.35355339f);
  graph.add("Reshape", {"x", "heads"}, "q");
  auto &t = graph.add("Transpose", {"q"}, "kt");
  setInts(t, "perm", {0, 1, 3, 2});
  graph.add("MatMul", {"q", "kt"}, "s0");
  graph.add("Mul", {"s0", "scale"}, "s1");
  graph.add("Add", {"s1", "mask"}, "s2");
  graph.add("Softmax", {"s2"}, "p");
  graph.add("MatMul", {"p", "q"}, "o");
  graph.add("Reshape", {"o", "tokens"}, "y");
  graph.add("MatMul", {"y", "W"}, "logits");
  return graph;
}

TEST(OnnxImportTest, CausalAttentionIsFused) {
  const float blocked = -3.0e38f;
  Graph graph = attention({0, blocked, blocked, blocked, 0, 0, blocked, blocked,
                           0, 0, 0, blocked, 0, 0, 0, 0});
  std::string ir = graph.import();
  // 0.35355339 is 1/sqrt(8) in float: the exact scale.
  EXPECT_TRUE(contains(ir, "loom.attention") &&
              contains(ir, "{causal, scale = 0.35355339059327373 : f64} : "
                           "(tensor<2x4x1x8xf32>, tensor<2x4x1x8xf32>, "
                           "tensor<2x4x1x8xf32>)"))
      << ir;
  EXPECT_FALSE(contains(ir, "loom.softmax")) << ir;
  EXPECT_TRUE(graph.report.unfused.empty());
}

TEST(OnnxImportTest, NonCausalMaskStaysUnfusedAndSaysWhy) {
  // A sliding window of 2 (position 2 does not see position 0).
  const float blocked = -3.0e38f;
  Graph graph = attention({0, blocked, blocked, blocked, 0, 0, blocked, blocked,
                           blocked, 0, 0, blocked, blocked, blocked, 0, 0});
  std::string ir = graph.import();
  EXPECT_FALSE(contains(ir, "loom.attention")) << ir;
  EXPECT_TRUE(contains(ir, "loom.softmax")) << ir;
  ASSERT_EQ(graph.report.unfused.size(), 1u);
  EXPECT_EQ(graph.report.unfused[0],
            "attention at node 'o': the mask is not causal");
}

TEST(OnnxImportTest, MaskAsParameterSaysSo) {
  // The same mask as a float initializer: without --weights, a parameter.
  const float blocked = -3.0e38f;
  Graph graph = attention({0, blocked, blocked, blocked, 0, 0, blocked, blocked,
                           0, 0, 0, blocked, 0, 0, 0, 0});
  OnnxNode &constant = graph.g.nodes[1];
  ASSERT_EQ(constant.opType, "Constant");
  RawTensor mask = *constant.attribute("value")->tensor;
  mask.name = "mask";
  graph.g.initializers.push_back(mask);
  graph.g.nodes.erase(graph.g.nodes.begin() + 1);
  std::string ir = graph.import();
  EXPECT_FALSE(contains(ir, "loom.attention")) << ir;
  ASSERT_EQ(graph.report.unfused.size(), 1u);
  EXPECT_EQ(graph.report.unfused[0],
            "attention at node 'o': the mask is a parameter (an initializer: "
            "with --weights, only the weights file's tensors are)");
}

TEST(OnnxImportTest, ErrorsNameTheNode) {
  Graph graph = embedded();
  graph.add("Erf", {"x"}, "e");
  graph.add("MatMul", {"e", "W"}, "logits");
  EXPECT_EQ(graph.import(),
            "error: test.onnx: node 'e' (Erf, opset 17): has no loom op "
            "outside a fused pattern (erf: the exact GELU; cos and sin: "
            "rotary tables folded at import)");

  Graph output = embedded();
  output.add("MatMul", {"x", "W"}, "logits");
  EXPECT_EQ(output.import("x2"),
            "error: test.onnx: graph output 'x2' is not computed by any node");
}

} // namespace
