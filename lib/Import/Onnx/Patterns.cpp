//===- Patterns.cpp - Fused ops recognised in ONNX graphs -----------------===//
//
// The exporters decompose the ops Loom keeps fused; these patterns find
// them again, each rooted at the node whose output the fused op replaces:
//
//   gelu        0.5 x (1 + tanh(sqrt(2/pi) (x + 0.044715 x^3)))   (Mul)
//   gelu_erf    0.5 x (1 + erf(x / sqrt(2)))                       (Mul)
//   silu        x * sigmoid(x)                                     (Mul)
//   rmsnorm     g * (x / sqrt(mean(x^2) + eps))                    (Mul)
//   layernorm   (x - mean) / sqrt(var + eps) * g + b               (Add)
//   rope        x * cos + rotate_half(x) * sin, tables of RoPE     (Add)
//   attention   softmax(scale q k^T + causal mask) v, with repeated
//               key/value heads (grouped-query attention)          (MatMul)
//   causal_softmax  softmax(s + causal mask)                       (Softmax)
//
// Products are matched as bags of factors (nested Mul nodes, scalar
// constants multiplied into one coefficient), so the operand order and
// association the exporter chose do not matter; float-to-float casts and
// identities are transparent (Loom computes every float tensor in one
// type). A pattern fuses only when the values inside it are read by
// nothing else, and constants (the 0.5, the tables, the mask) must be the
// op's, within float32 rounding.
//
//===----------------------------------------------------------------------===//

#include "Matcher.h"

#include "dialects/Loom/LoomOps.h"

#include "llvm/ADT/SmallPtrSet.h"

#include <cmath>

using namespace mlir;

namespace loom::onnx_import {

bool near(double value, double expected, double rtol) {
  return std::fabs(value - expected) <= rtol * std::fabs(expected) + 1e-12;
}

StringRef Matcher::skip(StringRef value,
                        SmallVectorImpl<const OnnxNode *> *nodes) {
  while (const OnnxNode *n = im.producer(value)) {
    bool noOp = n->opType == "Identity" ||
                ((n->opType == "Cast" || n->opType == "CastLike") &&
                 isFloat(im.typeOf(n->input(0)).dtype) &&
                 isFloat(im.typeOf(value).dtype));
    if (!noOp)
      break;
    if (nodes)
      nodes->push_back(n);
    value = n->input(0);
  }
  return value;
}

const OnnxNode *Matcher::def(StringRef value, StringRef op,
                             SmallVectorImpl<const OnnxNode *> &nodes) {
  StringRef at = skip(value, &nodes);
  const OnnxNode *n = im.producer(at);
  if (!n || n->opType != op)
    return nullptr;
  nodes.push_back(n);
  return n;
}

Product Matcher::product(const OnnxNode &node) {
  Product p;
  p.nodes.push_back(&node);
  collect(node, p, 0);
  return p;
}

bool Matcher::closed(ArrayRef<const OnnxNode *> nodes, const OnnxNode &root) {
  llvm::SmallPtrSet<const OnnxNode *, 16> members(nodes.begin(), nodes.end());
  members.insert(&root);
  for (const OnnxNode *n : members) {
    if (n == &root)
      continue;
    for (const std::string &output : n->outputs) {
      int inside = 0;
      for (const OnnxNode *reader : members)
        inside += llvm::count(reader->inputs, output);
      if (ValueState *s = im.state(output); s && s->uses != inside)
        return false;
    }
  }
  return true;
}

void Matcher::collect(const OnnxNode &node, Product &p, int depth) {
  for (const std::string &operand : node.inputs) {
    if (std::optional<double> c = im.scalar(operand)) {
      p.coefficient *= *c;
      continue;
    }
    SmallVector<const OnnxNode *, 2> skipped;
    StringRef value = skip(operand, &skipped);
    const OnnxNode *inner = im.producer(value);
    if (inner && inner->opType == "Mul" && depth < 4 && im.singleUse(value)) {
      p.nodes.append(skipped.begin(), skipped.end());
      p.nodes.push_back(inner);
      collect(*inner, p, depth + 1);
      continue;
    }
    p.factors.push_back(value.str());
  }
}

namespace {

//===----------------------------------------------------------------------===//
// Activations
//===----------------------------------------------------------------------===//

/// `1 + f(...)` where the producer of `value` is an Add of 1 and an `op`:
/// the op node, or null.
const OnnxNode *onePlus(Matcher &m, StringRef value, StringRef op,
                        SmallVectorImpl<const OnnxNode *> &nodes) {
  const OnnxNode *add = m.def(value, "Add", nodes);
  if (!add)
    return nullptr;
  for (int i = 0; i < 2; ++i) {
    std::optional<double> one = m.im.scalar(add->input(i));
    if (one && *one == 1.0)
      return m.def(add->input(1 - i), op, nodes);
  }
  return nullptr;
}

/// 0.5 x (1 + tanh(sqrt(2/pi) (x + 0.044715 x^3))) or
/// 0.5 x (1 + erf(x / sqrt(2))): the x and whether it is the exact GELU.
std::optional<std::pair<std::string, bool>>
matchGelu(Matcher &m, const OnnxNode &root, Product &p) {
  if (!near(p.coefficient, 0.5) || p.factors.size() != 2)
    return std::nullopt;
  for (int i = 0; i < 2; ++i) {
    const std::string &x = p.factors[i], &other = p.factors[1 - i];
    SmallVector<const OnnxNode *, 8> nodes(p.nodes.begin(), p.nodes.end());
    if (const OnnxNode *tanh = onePlus(m, other, "Tanh", nodes)) {
      // u = sqrt(2/pi) * (x + 0.044715 * x^3)
      const OnnxNode *scaled = m.def(tanh->input(0), "Mul", nodes);
      if (!scaled)
        continue;
      Product u = m.product(*scaled);
      nodes.append(u.nodes.begin(), u.nodes.end());
      if (!near(u.coefficient, std::sqrt(2.0 / M_PI)) || u.factors.size() != 1)
        continue;
      const OnnxNode *sum = m.def(u.factors[0], "Add", nodes);
      if (!sum)
        continue;
      for (int j = 0; j < 2; ++j) {
        if (!m.same(sum->input(j), x))
          continue;
        SmallVector<const OnnxNode *, 8> cubic(nodes.begin(), nodes.end());
        const OnnxNode *term = m.def(sum->input(1 - j), "Mul", cubic);
        if (!term)
          continue;
        Product c = m.product(*term);
        cubic.append(c.nodes.begin(), c.nodes.end());
        if (!near(c.coefficient, 0.044715))
          continue;
        bool isCube = false;
        if (c.factors.size() == 1) {
          const OnnxNode *pow = m.def(c.factors[0], "Pow", cubic);
          std::optional<double> e =
              pow ? m.im.scalar(pow->input(1)) : std::nullopt;
          isCube = e && *e == 3.0 && m.same(pow->input(0), x);
        } else if (c.factors.size() == 3) {
          isCube =
              llvm::all_of(c.factors, [&](auto &f) { return m.same(f, x); });
        }
        if (isCube && m.closed(cubic, root))
          return std::make_pair(x, false);
      }
      continue;
    }
    if (const OnnxNode *erf = onePlus(m, other, "Erf", nodes)) {
      StringRef arg = m.skip(erf->input(0), &nodes);
      const OnnxNode *n = m.im.producer(arg);
      if (!n)
        continue;
      nodes.push_back(n);
      bool ok = false;
      if (n->opType == "Div") {
        std::optional<double> c = m.im.scalar(n->input(1));
        ok = c && near(*c, M_SQRT2) && m.same(n->input(0), x);
      } else if (n->opType == "Mul") {
        Product q = m.product(*n);
        nodes.append(q.nodes.begin(), q.nodes.end());
        ok = near(q.coefficient, M_SQRT1_2) && q.factors.size() == 1 &&
             m.same(q.factors[0], x);
      }
      if (ok && m.closed(nodes, root))
        return std::make_pair(x, true);
    }
  }
  return std::nullopt;
}

/// x * sigmoid(x).
std::optional<std::string> matchSilu(Matcher &m, const OnnxNode &root,
                                     Product &p) {
  if (p.coefficient != 1.0 || p.factors.size() != 2)
    return std::nullopt;
  for (int i = 0; i < 2; ++i) {
    SmallVector<const OnnxNode *, 8> nodes(p.nodes.begin(), p.nodes.end());
    const OnnxNode *sigmoid = m.def(p.factors[1 - i], "Sigmoid", nodes);
    if (sigmoid && m.same(sigmoid->input(0), p.factors[i]) &&
        m.closed(nodes, root))
      return p.factors[i];
  }
  return std::nullopt;
}

//===----------------------------------------------------------------------===//
// Norms
//===----------------------------------------------------------------------===//

/// mean(y, last axis, keepdims) + eps: y and eps.
std::optional<std::pair<std::string, double>>
matchMeanPlusEps(Matcher &m, StringRef value,
                 SmallVectorImpl<const OnnxNode *> &nodes) {
  const OnnxNode *add = m.def(value, "Add", nodes);
  if (!add)
    return std::nullopt;
  for (int i = 0; i < 2; ++i) {
    std::optional<double> eps = m.im.scalar(add->input(i));
    if (!eps)
      continue;
    const OnnxNode *mean = m.def(add->input(1 - i), "ReduceMean", nodes);
    if (!mean || mean->intAttr("keepdims", 1) != 1)
      return std::nullopt;
    int64_t rank = m.im.typeOf(mean->input(0)).shape.size();
    auto axes = nodeAxes(*mean, m.im.operandsOf(*mean), 1, rank);
    if (!axes) {
      consumeError(axes.takeError());
      return std::nullopt;
    }
    if (!*axes || (*axes)->size() != 1 || (**axes)[0] != rank - 1)
      return std::nullopt;
    return std::make_pair(mean->input(0).str(), *eps);
  }
  return std::nullopt;
}

/// `value` is 1 / sqrt(v), x / sqrt(v)'s divisor, or rsqrt: returns the v.
std::optional<std::string>
matchInverseSqrt(Matcher &m, StringRef value,
                 SmallVectorImpl<const OnnxNode *> &nodes) {
  StringRef at = m.skip(value, &nodes);
  const OnnxNode *n = m.im.producer(at);
  if (!n)
    return std::nullopt;
  nodes.push_back(n);
  const OnnxNode *sqrt = nullptr;
  if (n->opType == "Reciprocal") {
    sqrt = m.def(n->input(0), "Sqrt", nodes);
  } else if (n->opType == "Div") {
    std::optional<double> one = m.im.scalar(n->input(0));
    if (one && *one == 1.0)
      sqrt = m.def(n->input(1), "Sqrt", nodes);
  } else if (n->opType == "Pow") {
    std::optional<double> e = m.im.scalar(n->input(1));
    if (e && *e == -0.5)
      return n->input(0).str();
  }
  if (!sqrt)
    return std::nullopt;
  return sqrt->input(0).str();
}

/// g * x / sqrt(mean(x^2) + eps), as a product of g, x and 1/sqrt(...).
bool fuseRMSNorm(Matcher &m, const OnnxNode &root, Product &p) {
  if (p.coefficient != 1.0 || p.factors.size() != 3)
    return false;
  for (int g = 0; g < 3; ++g) {
    ValueState *gamma = m.im.state(p.factors[g]);
    if (!gamma->weightLike || gamma->type.shape.size() != 1)
      continue;
    for (int r = 0; r < 3; ++r) {
      if (r == g)
        continue;
      const std::string &x = p.factors[3 - g - r];
      SmallVector<const OnnxNode *, 8> nodes(p.nodes.begin(), p.nodes.end());
      std::optional<std::string> v = matchInverseSqrt(m, p.factors[r], nodes);
      if (!v)
        continue;
      auto meanEps = matchMeanPlusEps(m, *v, nodes);
      if (!meanEps)
        continue;
      // mean's operand: x^2 as Pow(x, 2) or x * x.
      const OnnxNode *square = m.im.producer(m.skip(meanEps->first, &nodes));
      if (!square)
        continue;
      nodes.push_back(square);
      bool ok = false;
      if (square->opType == "Pow") {
        std::optional<double> e = m.im.scalar(square->input(1));
        ok = e && *e == 2.0 && m.same(square->input(0), x);
      } else if (square->opType == "Mul") {
        ok = m.same(square->input(0), x) && m.same(square->input(1), x);
      }
      const ValueType &xType = m.im.typeOf(x);
      if (!ok || xType.shape.empty() ||
          xType.shape.back() != gamma->type.shape[0] || !m.closed(nodes, root))
        continue;
      Value xv = m.im.ir(x), gv = m.im.ir(p.factors[g]);
      if (!xv || !gv)
        return true; // the error is recorded
      OpBuilder &b = m.im.builder();
      m.im.noteFused("rmsnorm");
      m.im.define(root.outputs[0],
                  RMSNormOp::create(
                      b, m.im.locationOf(root), xv, gv,
                      b.getF64FloatAttr(shortestDecimal(meanEps->second))));
      return true;
    }
  }
  return false;
}

/// (x - mean(x)) / sqrt(mean((x - mean(x))^2) + eps) * g + b, rooted at
/// the Add of b.
bool fuseLayerNorm(Matcher &m, const OnnxNode &root) {
  for (int i = 0; i < 2; ++i) {
    ValueState *beta = m.im.state(root.input(i));
    if (!beta || !beta->weightLike || beta->type.shape.size() != 1)
      continue;
    SmallVector<const OnnxNode *, 16> nodes;
    const OnnxNode *scale = m.def(root.input(1 - i), "Mul", nodes);
    if (!scale)
      continue;
    for (int j = 0; j < 2; ++j) {
      ValueState *gamma = m.im.state(scale->input(j));
      if (!gamma || !gamma->weightLike)
        continue;
      SmallVector<const OnnxNode *, 16> inner(nodes.begin(), nodes.end());
      const OnnxNode *div = m.def(scale->input(1 - j), "Div", inner);
      if (!div)
        continue;
      const OnnxNode *centered = m.def(div->input(0), "Sub", inner);
      const OnnxNode *sqrt = m.def(div->input(1), "Sqrt", inner);
      if (!centered || !sqrt)
        continue;
      std::string x = centered->input(0).str();
      const OnnxNode *mean = m.def(centered->input(1), "ReduceMean", inner);
      auto meanEps = matchMeanPlusEps(m, sqrt->input(0), inner);
      if (!mean || !meanEps || !m.same(mean->input(0), x))
        continue;
      const OnnxNode *square = m.im.producer(m.skip(meanEps->first, &inner));
      if (!square)
        continue;
      inner.push_back(square);
      bool ok = false;
      if (square->opType == "Pow") {
        std::optional<double> e = m.im.scalar(square->input(1));
        ok = e && *e == 2.0 && m.same(square->input(0), centered->outputs[0]);
      } else if (square->opType == "Mul") {
        ok = m.same(square->input(0), centered->outputs[0]) &&
             m.same(square->input(1), centered->outputs[0]);
      }
      if (!ok || !m.closed(inner, root))
        continue;
      Value xv = m.im.ir(x), gv = m.im.ir(scale->input(j)),
            bv = m.im.ir(root.input(i));
      if (!xv || !gv || !bv)
        return true;
      OpBuilder &b = m.im.builder();
      m.im.noteFused("layernorm");
      m.im.define(root.outputs[0],
                  LayerNormOp::create(
                      b, m.im.locationOf(root), xv, gv, bv,
                      b.getF64FloatAttr(shortestDecimal(meanEps->second))));
      return true;
    }
  }
  return false;
}

} // namespace

bool fusePatterns(GraphImporter &importer, const OnnxNode &node) {
  Matcher m(importer);
  const ValueType &type = importer.typeOf(node.outputs.front());
  if (!isFloat(type.dtype))
    return false;
  StringRef op = node.opType;
  if (op == "Mul") {
    Product p = m.product(node);
    if (auto gelu = matchGelu(m, node, p)) {
      Value x = importer.ir(gelu->first);
      if (!x)
        return true;
      OpBuilder &b = importer.builder();
      Location loc = importer.locationOf(node);
      importer.noteFused(gelu->second ? "gelu_erf" : "gelu");
      importer.define(node.outputs[0], gelu->second
                                           ? Value(GeluErfOp::create(b, loc, x))
                                           : Value(GeluOp::create(b, loc, x)));
      return true;
    }
    if (std::optional<std::string> x = matchSilu(m, node, p)) {
      Value xv = importer.ir(*x);
      if (!xv)
        return true;
      importer.noteFused("silu");
      importer.define(
          node.outputs[0],
          SiluOp::create(importer.builder(), importer.locationOf(node), xv));
      return true;
    }
    return fuseRMSNorm(m, node, p);
  }
  if (op == "Add")
    return fuseLayerNorm(m, node) || fuseRope(m, node);
  if (op == "MatMul")
    return fuseAttention(m, node);
  if (op == "Softmax")
    return fuseCausalSoftmax(m, node);
  return false;
}

} // namespace loom::onnx_import
