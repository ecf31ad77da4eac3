//===- AttentionPatterns.cpp - Attention and RoPE in ONNX graphs ----------===//
//
// Attention as Hugging Face's eager attention computes it: scores q k^T,
// scaled (a Mul or Div by a constant), masked (an additive mask of 0 and a
// large negative value, or a Where choosing a large negative fill), a
// softmax over the keys, a product with v; keys and values may have their
// heads repeated for grouped-query attention (repeat_kv: Unsqueeze, Expand,
// Reshape). q, k and v are [batch, heads, sequence, head size] there;
// loom.attention takes [batch, sequence, heads, head size], so the fused op
// is wrapped in transposes that the importer's simplification cancels
// against the graph's own.
//
// Rotary embeddings as rotate_half writes them: x * cos + [-x2, x1] * sin
// with tables folded at import. The tables must be RoPE's: cos and sin of
// s * theta^(-2i/d) for position s and pair i; theta is read back from the
// tables and checked against every entry.
//
//===----------------------------------------------------------------------===//

#include "Matcher.h"

#include "dialects/Loom/LoomOps.h"

#include <cmath>

using namespace mlir;

namespace loom::onnx_import {
namespace {

Value transposeHeads(OpBuilder &b, Location loc, Value x,
                     ArrayRef<int64_t> perm = {0, 2, 1, 3}) {
  return TransposeOp::create(b, loc, x, perm);
}

//===----------------------------------------------------------------------===//
// Masks
//===----------------------------------------------------------------------===//

struct Mask {
  std::string scores;
  bool causal = false;
  SmallVector<const OnnxNode *, 4> nodes;
};

/// Whether a mask of `shape` whose element e is allowed iff `allowed(e)`
/// is the causal mask over its last two dimensions (all allowed: none).
enum class MaskKind { None, Causal, Other };
MaskKind classify(ArrayRef<int64_t> shape,
                  const std::function<bool(int64_t)> &allowed) {
  if (shape.size() < 2 || shape[shape.size() - 1] != shape[shape.size() - 2])
    return MaskKind::Other;
  bool all = true, causal = true;
  int64_t n = 1;
  for (int64_t d : shape)
    n *= d;
  int64_t cols = shape.back();
  for (int64_t e = 0; e < n; ++e) {
    int64_t i = (e / cols) % cols, j = e % cols;
    bool a = allowed(e);
    all &= a;
    causal &= a == (j <= i);
  }
  return all ? MaskKind::None : causal ? MaskKind::Causal : MaskKind::Other;
}

/// A mask value that takes a score out of the softmax: exp(fill - max)
/// is 0 in float for any realistic scores.
bool isBlocking(double value) { return value <= -1e4; }

/// The mask between `value` and a softmax; the reason in `why` when there
/// is one Loom cannot take.
std::optional<Mask> matchMask(Matcher &m, StringRef value, std::string &why) {
  Mask mask;
  StringRef at = m.skip(value, &mask.nodes);
  const OnnxNode *n = m.im.producer(at);
  const ValueType &scores = m.im.typeOf(at);
  auto kindOf = [&](ArrayRef<int64_t> shape,
                    const std::function<bool(int64_t)> &allowed) {
    if (shape.size() < 2 || scores.shape.size() < 2 ||
        shape.take_back(2) != ArrayRef<int64_t>(scores.shape).take_back(2))
      return MaskKind::Other;
    return classify(shape, allowed);
  };
  if (n && n->opType == "Add") {
    for (int i = 0; i < 2; ++i) {
      const HostTensor *added = m.im.constant(n->input(i));
      if (!added)
        continue;
      for (int64_t e = 0, count = added->numElements(); e < count; ++e)
        if (added->value(e) != 0 && !isBlocking(added->value(e))) {
          why = "the additive mask holds values other than 0 and a large "
                "negative number";
          return std::nullopt;
        }
      MaskKind kind =
          kindOf(added->shape, [&](int64_t e) { return added->value(e) == 0; });
      if (kind == MaskKind::Other) {
        why = "the mask is not causal";
        return std::nullopt;
      }
      mask.nodes.push_back(n);
      mask.scores = n->input(1 - i);
      mask.causal = kind == MaskKind::Causal;
      return mask;
    }
    bool parameter = m.im.state(n->input(0))->weightLike ||
                     m.im.state(n->input(1))->weightLike;
    why = parameter ? "the mask is a parameter (an initializer: with "
                      "--weights, only the weights file's tensors are)"
                    : "the mask is computed at run time";
    return std::nullopt;
  }
  if (n && n->opType == "Where") {
    const HostTensor *cond = m.im.constant(n->input(0));
    if (!cond) {
      why = "the mask is computed at run time";
      return std::nullopt;
    }
    for (int branch = 1; branch <= 2; ++branch) {
      std::optional<double> fill = m.im.scalar(n->input(3 - branch));
      if (!fill || !isBlocking(*fill))
        continue;
      bool keepWhenTrue = branch == 1;
      MaskKind kind = kindOf(cond->shape, [&](int64_t e) {
        return (cond->integer(e) != 0) == keepWhenTrue;
      });
      if (kind == MaskKind::Other) {
        why = "the mask is not causal";
        return std::nullopt;
      }
      mask.nodes.push_back(n);
      mask.scores = n->input(branch);
      mask.causal = kind == MaskKind::Causal;
      return mask;
    }
    why = "the masked scores are not filled with a large negative number";
    return std::nullopt;
  }
  mask.nodes.clear();
  mask.scores = value.str();
  return mask;
}

//===----------------------------------------------------------------------===//
// Attention
//===----------------------------------------------------------------------===//

/// repeat_kv(x): x0 [B, Hkv, S, D] unsqueezed at 2, expanded to
/// [B, Hkv, r, S, D], reshaped to [B, Hkv r, S, D]. Returns x0.
std::optional<std::string> unrepeat(Matcher &m, StringRef value,
                                    SmallVectorImpl<const OnnxNode *> &nodes) {
  SmallVector<const OnnxNode *, 4> found;
  const OnnxNode *reshape = m.def(value, "Reshape", found);
  const OnnxNode *expand =
      reshape ? m.def(reshape->input(0), "Expand", found) : nullptr;
  if (!expand)
    return std::nullopt;
  StringRef inner = m.skip(expand->input(0), &found);
  const OnnxNode *unsqueeze = m.im.producer(inner);
  if (!unsqueeze ||
      (unsqueeze->opType != "Unsqueeze" && unsqueeze->opType != "Reshape"))
    return std::nullopt;
  found.push_back(unsqueeze);
  ArrayRef<int64_t> x0 = m.im.typeOf(unsqueeze->input(0)).shape;
  ArrayRef<int64_t> u = m.im.typeOf(unsqueeze->outputs[0]).shape;
  ArrayRef<int64_t> e = m.im.typeOf(expand->outputs[0]).shape;
  ArrayRef<int64_t> r = m.im.typeOf(reshape->outputs[0]).shape;
  if (x0.size() != 4 || u.size() != 5 || e.size() != 5 || r.size() != 4 ||
      u[2] != 1 || u[0] != x0[0] || u[1] != x0[1] || u[3] != x0[2] ||
      u[4] != x0[3] || e[0] != x0[0] || e[1] != x0[1] || e[3] != x0[2] ||
      e[4] != x0[3] || r[0] != x0[0] || r[1] != x0[1] * e[2] || r[2] != x0[2] ||
      r[3] != x0[3])
    return std::nullopt;
  nodes.append(found.begin(), found.end());
  return unsqueeze->input(0).str();
}

} // namespace

bool fuseAttention(Matcher &m, const OnnxNode &root) {
  SmallVector<const OnnxNode *, 16> core;
  const OnnxNode *softmax = m.def(root.input(0), "Softmax", core);
  if (!softmax)
    return false;
  auto unfused = [&](const Twine &why) {
    m.im.noteUnfused("attention", root, why);
    return false;
  };
  const ValueType &probs = m.im.typeOf(softmax->outputs[0]);
  int64_t axis = softmax->intAttr("axis", -1);
  if (axis != -1 && axis != int64_t(probs.shape.size()) - 1)
    return unfused("the softmax is not over the keys");
  std::string why;
  std::optional<Mask> mask = matchMask(m, softmax->input(0), why);
  if (!mask)
    return unfused(why);
  core.append(mask->nodes.begin(), mask->nodes.end());

  // scale * (q k^T): a Mul or Div by a constant, or none.
  double scale = 1.0;
  std::string scoresName = mask->scores;
  StringRef at = m.skip(scoresName, &core);
  if (const OnnxNode *n = m.im.producer(at)) {
    if (n->opType == "Mul" || n->opType == "Div") {
      for (int i = n->opType == "Div" ? 1 : 0; i < 2; ++i) {
        if (std::optional<double> c = m.im.scalar(n->input(i))) {
          scale = n->opType == "Div" ? 1.0 / *c : *c;
          scoresName = n->input(1 - i);
          core.push_back(n);
          break;
        }
      }
    }
  }
  const OnnxNode *product = m.def(scoresName, "MatMul", core);
  if (!product)
    return unfused("the scores are not a product q k^T");
  std::string q = product->input(0).str(), kt = product->input(1).str(),
              v = root.input(1).str();
  ArrayRef<int64_t> qShape = m.im.typeOf(q).shape,
                    ktShape = m.im.typeOf(kt).shape,
                    vShape = m.im.typeOf(v).shape;
  if (qShape.size() != 4 || ktShape.size() != 4 || vShape.size() != 4)
    return unfused("q, k and v are not [batch, heads, sequence, head size]");
  int64_t headDim = qShape[3];
  if (vShape[3] != headDim)
    return unfused("the values' head size differs from the queries'");
  if (mask->causal && qShape[2] != ktShape[3])
    return unfused("a causal mask over unequal query and key lengths");

  // k: k^T as Transpose(k, [0, 1, 3, 2]) of a [B, H, S, D] k (which may
  // repeat its heads), or any [B, H, D, S] value transposed back.
  SmallVector<const OnnxNode *, 8> keyNodes, repeatNodes;
  std::string k = kt;
  SmallVector<int64_t, 4> keyPerm = {0, 3, 1, 2};
  if (const OnnxNode *t = m.def(kt, "Transpose", keyNodes)) {
    if (transposePermutation(*t, 4) == SmallVector<int64_t, 4>{0, 1, 3, 2}) {
      k = t->input(0).str();
      keyPerm = {0, 2, 1, 3};
    } else {
      keyNodes.clear();
    }
  } else {
    keyNodes.clear();
  }
  // Grouped-query heads: k and v repeated alike, or neither.
  std::string k0 = k, v0 = v;
  if (keyPerm[1] == 2) {
    SmallVector<const OnnxNode *, 8> kRepeat, vRepeat;
    std::optional<std::string> kIn = unrepeat(m, k, kRepeat);
    std::optional<std::string> vIn = unrepeat(m, v, vRepeat);
    if (kIn && vIn &&
        m.im.typeOf(*kIn).shape[1] == m.im.typeOf(*vIn).shape[1]) {
      k0 = *kIn;
      v0 = *vIn;
      repeatNodes.append(kRepeat.begin(), kRepeat.end());
      repeatNodes.append(vRepeat.begin(), vRepeat.end());
    }
  }
  SmallVector<const OnnxNode *, 32> all(core.begin(), core.end());
  all.append(keyNodes.begin(), keyNodes.end());
  all.append(repeatNodes.begin(), repeatNodes.end());
  if (!m.closed(all, root)) {
    // Repeated heads or the key's transpose read elsewhere: keep them.
    k0 = keyNodes.empty() ? kt : k;
    v0 = v;
    all.assign(core.begin(), core.end());
    all.append(keyNodes.begin(), keyNodes.end());
    if (!m.closed(all, root)) {
      keyPerm = {0, 3, 1, 2};
      k0 = kt;
      if (!m.closed(core, root))
        return unfused("a value inside the attention is read elsewhere");
    }
  }
  // 1 / sqrt(head size) as the exporter rounded it to float.
  if (near(scale, 1.0 / std::sqrt(double(headDim))))
    scale = 1.0 / std::sqrt(double(headDim));

  Value qv = m.im.ir(q), kv = m.im.ir(k0), vv = m.im.ir(v0);
  if (!qv || !kv || !vv)
    return true;
  OpBuilder &b = m.im.builder();
  Location loc = m.im.locationOf(root);
  Value out =
      AttentionOp::create(b, loc, transposeHeads(b, loc, qv),
                          transposeHeads(b, loc, kv, keyPerm),
                          transposeHeads(b, loc, vv), mask->causal, scale)
          .getOut();
  m.im.noteFused("attention");
  m.im.define(root.outputs[0], transposeHeads(b, loc, out));
  return true;
}

bool fuseCausalSoftmax(Matcher &m, const OnnxNode &root) {
  const ValueType &type = m.im.typeOf(root.outputs[0]);
  int64_t axis = root.intAttr("axis", -1);
  if (axis != -1 && axis != int64_t(type.shape.size()) - 1)
    return false;
  std::string why;
  std::optional<Mask> mask = matchMask(m, root.input(0), why);
  if (!mask || !mask->causal || !m.closed(mask->nodes, root))
    return false;
  Value scores = m.im.ir(mask->scores);
  if (!scores)
    return true;
  m.im.noteFused("causal_softmax");
  m.im.define(root.outputs[0],
              SoftmaxOp::create(m.im.builder(), m.im.locationOf(root), scores,
                                /*causal=*/true));
  return true;
}

//===----------------------------------------------------------------------===//
// RoPE
//===----------------------------------------------------------------------===//

namespace {

/// A cos or sin table broadcast against x [B, ., ., D]: which of x's
/// dimensions 1 and 2 holds the positions, and the table's value at
/// batch row b, position s, column i.
struct Table {
  const HostTensor *data;
  SmallVector<int64_t, 4> shape; // padded to rank 4
  int64_t positionAxis;

  double at(int64_t b, int64_t s, int64_t i) const {
    SmallVector<int64_t, 4> c = {shape[0] == 1 ? 0 : b, 0, 0, i};
    c[positionAxis] = s;
    int64_t e = 0;
    for (int d = 0; d < 4; ++d)
      e = e * shape[d] + c[d];
    return data->value(e);
  }
};

std::optional<Table> tableFor(const HostTensor *data, ArrayRef<int64_t> x) {
  if (!data || data->shape.size() > 4)
    return std::nullopt;
  Table t;
  t.data = data;
  t.shape.assign(4 - data->shape.size(), 1);
  t.shape.append(data->shape.begin(), data->shape.end());
  if (t.shape[3] != x[3] || (t.shape[0] != 1 && t.shape[0] != x[0]))
    return std::nullopt;
  if (t.shape[1] == 1 && t.shape[2] == x[2])
    t.positionAxis = 2;
  else if (t.shape[2] == 1 && t.shape[1] == x[1])
    t.positionAxis = 1;
  else
    return std::nullopt;
  return t;
}

/// Whether cos and sin are RoPE's tables for `theta` within float32
/// rounding of the angles (which grows with the position).
bool isRope(const Table &cos, const Table &sin, double theta, int64_t rows,
            int64_t positions, int64_t dim) {
  double tolerance = 1e-5 + 3e-7 * positions;
  for (int64_t b = 0; b < rows; ++b)
    for (int64_t s = 0; s < positions; ++s)
      for (int64_t i = 0; i < dim; ++i) {
        double angle =
            s * std::pow(theta, -2.0 * double(i % (dim / 2)) / double(dim));
        if (std::fabs(cos.at(b, s, i) - std::cos(angle)) > tolerance ||
            std::fabs(sin.at(b, s, i) - std::sin(angle)) > tolerance)
          return false;
      }
  return true;
}

/// theta of RoPE tables: the second pair's frequency theta^(-2/d), read
/// from the angle at the latest position where it is below pi, then
/// rounded to the fewest significant digits that still fit every entry.
std::optional<double> ropeTheta(const Table &cos, const Table &sin,
                                int64_t rows, int64_t positions, int64_t dim) {
  if (dim / 2 < 2 || positions < 2)
    return isRope(cos, sin, 10000.0, rows, positions, dim)
               ? std::optional<double>(10000.0)
               : std::nullopt;
  double first = std::atan2(sin.at(0, 1, 1), cos.at(0, 1, 1));
  if (!(first > 0))
    return std::nullopt;
  int64_t s = std::clamp<int64_t>(int64_t(3.0 / first), 1, positions - 1);
  double frequency = std::atan2(sin.at(0, s, 1), cos.at(0, s, 1)) / s;
  double estimate = std::pow(frequency, -double(dim) / 2.0);
  for (int digits = 1; digits <= 8; ++digits) {
    double magnitude =
        std::pow(10.0, std::floor(std::log10(estimate)) + 1 - digits);
    double candidate = std::round(estimate / magnitude) * magnitude;
    if (isRope(cos, sin, candidate, rows, positions, dim))
      return candidate;
  }
  if (isRope(cos, sin, estimate, rows, positions, dim))
    return estimate;
  return std::nullopt;
}

/// rotate_half(x) = concat(-x[..., D/2:], x[..., :D/2]): true when `value`
/// is that of x.
bool isRotateHalf(Matcher &m, StringRef value, StringRef x,
                  SmallVectorImpl<const OnnxNode *> &nodes) {
  const OnnxNode *cat = m.def(value, "Concat", nodes);
  if (!cat || cat->inputs.size() != 2)
    return false;
  ArrayRef<int64_t> shape = m.im.typeOf(x).shape;
  int64_t rank = shape.size(), dim = shape.back(), half = dim / 2;
  int64_t axis = cat->intAttr("axis", 0);
  if ((axis != -1 && axis != rank - 1) || dim % 2)
    return false;
  const OnnxNode *neg = m.def(cat->input(0), "Neg", nodes);
  if (!neg)
    return false;
  auto isHalf = [&](StringRef part, int64_t start) {
    const OnnxNode *slice = m.def(part, "Slice", nodes);
    if (!slice || !m.same(slice->input(0), x))
      return false;
    auto box = sliceBox(m.im.operandsOf(*slice), shape);
    if (!box) {
      consumeError(box.takeError());
      return false;
    }
    for (int64_t d = 0; d < rank; ++d) {
      int64_t first = d == rank - 1 ? start : 0;
      int64_t size = d == rank - 1 ? half : shape[d];
      if (box->starts[d] != first || box->steps[d] != 1 ||
          box->sizes[d] != size)
        return false;
    }
    return true;
  };
  return isHalf(neg->input(0), half) && isHalf(cat->input(1), 0);
}

} // namespace

bool fuseRope(Matcher &m, const OnnxNode &root) {
  for (int i = 0; i < 2; ++i) {
    SmallVector<const OnnxNode *, 16> nodes;
    const OnnxNode *cosTerm = m.def(root.input(i), "Mul", nodes);
    const OnnxNode *sinTerm = m.def(root.input(1 - i), "Mul", nodes);
    if (!cosTerm || !sinTerm)
      continue;
    Product pc = m.product(*cosTerm), ps = m.product(*sinTerm);
    if (pc.factors.size() != 2 || ps.factors.size() != 2 ||
        pc.coefficient != 1.0 || ps.coefficient != 1.0)
      continue;
    nodes.append(pc.nodes.begin(), pc.nodes.end());
    nodes.append(ps.nodes.begin(), ps.nodes.end());
    for (int a = 0; a < 2; ++a) {
      const std::string &x = pc.factors[a];
      ArrayRef<int64_t> shape = m.im.typeOf(x).shape;
      if (shape.size() != 4 || m.im.constant(x))
        continue;
      std::optional<Table> cos =
          tableFor(m.im.constant(pc.factors[1 - a]), shape);
      for (int c = 0; c < 2 && cos; ++c) {
        SmallVector<const OnnxNode *, 16> all(nodes.begin(), nodes.end());
        std::optional<Table> sin =
            tableFor(m.im.constant(ps.factors[1 - c]), shape);
        if (!sin || sin->positionAxis != cos->positionAxis ||
            !isRotateHalf(m, ps.factors[c], x, all) || !m.closed(all, root))
          continue;
        int64_t rows = std::max(cos->shape[0], sin->shape[0]);
        std::optional<double> theta =
            ropeTheta(*cos, *sin, rows, shape[cos->positionAxis], shape[3]);
        if (!theta)
          continue;
        Value xv = m.im.ir(x);
        if (!xv)
          return true;
        OpBuilder &b = m.im.builder();
        Location loc = m.im.locationOf(root);
        FloatAttr thetaAttr = b.getF64FloatAttr(*theta);
        // Plain RoPE: no frequency scaling attributes.
        auto rope = [&](Value in) -> Value {
          return RopeOp::create(b, loc, in, thetaAttr, FloatAttr(), FloatAttr(),
                                FloatAttr(), FloatAttr());
        };
        Value out;
        if (cos->positionAxis == 1)
          out = rope(xv);
        else
          out = transposeHeads(b, loc, rope(transposeHeads(b, loc, xv)));
        m.im.noteFused("rope");
        m.im.define(root.outputs[0], out);
        return true;
      }
    }
  }
  return false;
}

} // namespace loom::onnx_import
