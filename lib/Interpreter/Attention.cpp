//===- Attention.cpp - Rotary embeddings and fused attention --------------===//
//
// Attention is computed one (batch, query head) pair at a time, from the
// explicit score matrix: scores = scale * q k^T (+ the causal mask), its
// row log-sum-exp `lse`, the probabilities exp(scores - lse) and out = P v.
// The gradient recomputes P from the stored lse, as a fused kernel does:
//
//   dv = P^T dout,  dP = dout v^T,  dS = P * (dP - rowsum(dout * out)),
//   dq = scale * dS k,  dk = scale * dS^T q
//
// (FlashAttention-2, Dao 2023, Algorithm 2). Key/value head h / G serves
// query heads h (G = Hq / Hkv), so dk and dv add up over those heads.
//
// With attention dropout, out = Pd v with Pd = P * M (M the mask scaled by
// 1 / (1 - rate), drawn from DropoutMask.h at the index of (b, h, s, t) in
// [B, Hq, S, Skv]). Then dv = Pd^T dout, dPd = dout v^T, dP = dPd * M, and
// rowsum(dP * P) = rowsum(dPd * Pd) = rowsum(dout * out) still, so
//
//   dS = P * (M * dPd - rowsum(dout * out))
//
// (FlashAttention, Dao et al. 2022, Appendix B.4). On a shard of a
// partitioned op (`loom.mask_split_axes`), (b, h, s, t) are local and the
// mask is drawn at their global index.
//
//===----------------------------------------------------------------------===//

#include "DevicePosition.h"
#include "Kernels.h"

#include "dialects/Loom/LoomOps.h"
#include "loom/DropoutMask.h"
#include "loom/RopeFrequency.h"

#include <cmath>
#include <limits>

using namespace mlir;

namespace loom::interp {

//===----------------------------------------------------------------------===//
// rope
//===----------------------------------------------------------------------===//

/// Llama 3.1's frequency scaling of a rope or rope_grad op: all four of
/// its attributes or none (the importer writes them together).
template <typename RopeLikeOp> static RopeScaling ropeScalingOf(RopeLikeOp op) {
  auto value = [](std::optional<llvm::APFloat> attr) {
    return attr ? attr->convertToDouble() : 0.0;
  };
  RopeScaling scaling;
  if (!op.getScalingFactor())
    return scaling;
  scaling.factor = value(op.getScalingFactor());
  scaling.lowFreqFactor = value(op.getLowFreqFactor());
  scaling.highFreqFactor = value(op.getHighFreqFactor());
  scaling.originalMaxPositions = value(op.getOriginalMaxPositions());
  return scaling;
}

/// Rotates each pair (x[i], x[i + D/2]) of `x` [B, S, H, D] at position s by
/// `direction * s * theta^(-2i/D)` (under `scaling`): +1 for rope, -1 for
/// its gradient. A shard along the sequence (`loom.mask_split_axes`)
/// starts at its global position.
static llvm::Expected<Tensor> rotatePairs(Operation *op, const Tensor &x,
                                          double theta,
                                          const RopeScaling &scaling,
                                          double direction) {
  llvm::Expected<int64_t> start = globalStart(op, x.shape()[1], 1);
  if (!start)
    return start.takeError();
  Value result = op->getResult(0);
  ArrayRef<int64_t> shape = x.shape();
  int64_t batch = shape[0], seq = shape[1], heads = shape[2], dim = shape[3];
  int64_t half = dim / 2;
  std::vector<double> inverseFrequency(half);
  for (int64_t i = 0; i < half; ++i)
    inverseFrequency[i] = ropeFrequency(i, dim, theta, scaling);
  std::vector<double> y(x.f().size());
  for (int64_t b = 0; b < batch; ++b)
    for (int64_t s = 0; s < seq; ++s)
      for (int64_t i = 0; i < half; ++i) {
        double angle =
            direction * static_cast<double>(*start + s) * inverseFrequency[i];
        double c = std::cos(angle), sn = std::sin(angle);
        for (int64_t h = 0; h < heads; ++h) {
          int64_t base = ((b * seq + s) * heads + h) * dim;
          double x1 = x.f()[base + i], x2 = x.f()[base + i + half];
          y[base + i] = x1 * c - x2 * sn;
          y[base + i + half] = x2 * c + x1 * sn;
        }
      }
  return floatsLike(result, std::move(y));
}

//===----------------------------------------------------------------------===//
// attention
//===----------------------------------------------------------------------===//

namespace {
/// q, out, dout, dq are [B, S, Hq, D]; k, v, dk, dv are [B, Skv, Hkv, D];
/// lse is [B, Hq, S].
struct AttentionShape {
  int64_t batch, seq, heads, kvSeq, kvHeads, dim;
  bool causal;
  double scale;
  /// Attention dropout; rate 0 (and no step) without it.
  double dropoutRate = 0.0;
  uint64_t dropoutSeed = 0, dropoutKey = 0, step = 0;

  /// On a shard (`loom.mask_split_axes`), the global index of each local
  /// (b, h, s, t) of the probabilities; empty when local is global.
  std::vector<int64_t> maskIndex;
  /// The global position of local query 0: the queries of a shard split
  /// along the sequence are rows [queryStart, queryStart + seq) of the
  /// keys, which the causal mask compares against.
  int64_t queryStart = 0;

  /// Reads the shapes of `q` and `k` and the attributes of `op` (attention
  /// or attention_grad); `step` is the step operand, null without dropout.
  template <typename AttentionLikeOp>
  AttentionShape(AttentionLikeOp op, const Tensor &q, const Tensor &k,
                 const Tensor *step)
      : batch(q.shape()[0]), seq(q.shape()[1]), heads(q.shape()[2]),
        kvSeq(k.shape()[1]), kvHeads(k.shape()[2]), dim(q.shape()[3]),
        causal(op.getCausal()), scale(op.getScale().convertToDouble()) {
    if (std::optional<APFloat> rate = op.getDropoutRate()) {
      dropoutRate = rate->convertToDouble();
      dropoutSeed = static_cast<uint64_t>(*op.getDropoutSeed());
      dropoutKey = static_cast<uint64_t>(*op.getDropoutKey());
      this->step = static_cast<uint64_t>(scalarInt(*step));
    }
  }

  /// Reads the global mask indices of a partitioned op: the mask
  /// [B, H, S, T] takes the splits of q's [B, S, H, D] dimensions 0, 2 and
  /// 1; the key axis T is never split (attention's sharding rule keeps it
  /// whole).
  llvm::Error readMaskIndex(Operation *op) {
    if (causal) {
      llvm::Expected<int64_t> start = globalStart(op, seq, 1);
      if (!start)
        return start.takeError();
      queryStart = *start;
    }
    if (dropoutRate == 0.0)
      return llvm::Error::success();
    auto indices = maskIndices(op, {batch, heads, seq, kvSeq}, {0, 2, 1, -1});
    if (!indices)
      return indices.takeError();
    maskIndex = std::move(*indices);
    return llvm::Error::success();
  }

  /// The factor the dropout mask applies to probability (b, h, s, t):
  /// 1 / (1 - rate) where it keeps it, 0 where it drops it, 1 without
  /// dropout.
  double dropoutFactor(int64_t b, int64_t h, int64_t s, int64_t t) const {
    if (dropoutRate == 0.0)
      return 1.0;
    uint64_t index = ((b * heads + h) * seq + s) * kvSeq + t;
    if (!maskIndex.empty())
      index = maskIndex[index];
    return dropoutKeeps(dropoutSeed, dropoutKey, step, index, dropoutRate)
               ? 1.0 / (1.0 - dropoutRate)
               : 0.0;
  }

  /// The offset of row (b, s, h) of q-shaped tensors.
  int64_t qRow(int64_t b, int64_t s, int64_t h) const {
    return ((b * seq + s) * heads + h) * dim;
  }
  /// The offset of row (b, t, kv head of query head h) of k-shaped tensors.
  int64_t kvRow(int64_t b, int64_t t, int64_t h) const {
    return ((b * kvSeq + t) * kvHeads + h / (heads / kvHeads)) * dim;
  }
  int64_t lseIndex(int64_t b, int64_t h, int64_t s) const {
    return (b * heads + h) * seq + s;
  }
};
} // namespace

static double dot(const double *a, const double *b, int64_t size) {
  double sum = 0.0;
  for (int64_t d = 0; d < size; ++d)
    sum += a[d] * b[d];
  return sum;
}

/// The [S, Skv] scores scale * q k^T of query head h of batch b, with -inf
/// where the causal mask hides key t from query s (t after s's global
/// position).
static void computeScores(const AttentionShape &a, const Tensor &q,
                          const Tensor &k, int64_t b, int64_t h,
                          std::vector<double> &scores) {
  for (int64_t s = 0; s < a.seq; ++s)
    for (int64_t t = 0; t < a.kvSeq; ++t)
      scores[s * a.kvSeq + t] =
          a.causal && t > a.queryStart + s
              ? -std::numeric_limits<double>::infinity()
              : a.scale * dot(&q.f()[a.qRow(b, s, h)], &k.f()[a.kvRow(b, t, h)],
                              a.dim);
}

static llvm::Expected<Results> attention(AttentionOp op, Operands in) {
  const Tensor &q = *in[0], &k = *in[1], &v = *in[2];
  AttentionShape a(op, q, k, in.size() > 3 ? in[3] : nullptr);
  if (llvm::Error error = a.readMaskIndex(op))
    return std::move(error);
  std::vector<double> out(q.f().size(), 0.0);
  std::vector<double> lse(a.batch * a.heads * a.seq);
  std::vector<double> scores(a.seq * a.kvSeq);
  for (int64_t b = 0; b < a.batch; ++b)
    for (int64_t h = 0; h < a.heads; ++h) {
      computeScores(a, q, k, b, h, scores);
      for (int64_t s = 0; s < a.seq; ++s) {
        double *row = &scores[s * a.kvSeq];
        double max = *std::max_element(row, row + a.kvSeq);
        double sum = 0.0;
        for (int64_t t = 0; t < a.kvSeq; ++t)
          sum += std::exp(row[t] - max);
        double rowLse = max + std::log(sum);
        lse[a.lseIndex(b, h, s)] = rowLse;
        double *outRow = &out[a.qRow(b, s, h)];
        for (int64_t t = 0; t < a.kvSeq; ++t) {
          double p = std::exp(row[t] - rowLse) * a.dropoutFactor(b, h, s, t);
          const double *vRow = &v.f()[a.kvRow(b, t, h)];
          for (int64_t d = 0; d < a.dim; ++d)
            outRow[d] += p * vRow[d];
        }
      }
    }
  return Results{floatsLike(op.getOut(), std::move(out)),
                 floatsLike(op.getLse(), std::move(lse))};
}

static llvm::Expected<Results> attentionGrad(AttentionGradOp op, Operands in) {
  const Tensor &dout = *in[0], &q = *in[1], &k = *in[2], &v = *in[3],
               &out = *in[4], &lse = *in[5];
  AttentionShape a(op, q, k, in.size() > 6 ? in[6] : nullptr);
  if (llvm::Error error = a.readMaskIndex(op))
    return std::move(error);
  std::vector<double> dq(q.f().size(), 0.0), dk(k.f().size(), 0.0),
      dv(v.f().size(), 0.0);
  std::vector<double> scores(a.seq * a.kvSeq);
  for (int64_t b = 0; b < a.batch; ++b)
    for (int64_t h = 0; h < a.heads; ++h) {
      computeScores(a, q, k, b, h, scores);
      for (int64_t s = 0; s < a.seq; ++s) {
        const double *doutRow = &dout.f()[a.qRow(b, s, h)];
        const double *qRow = &q.f()[a.qRow(b, s, h)];
        double *dqRow = &dq[a.qRow(b, s, h)];
        double rowLse = lse.f()[a.lseIndex(b, h, s)];
        double rowDot = dot(doutRow, &out.f()[a.qRow(b, s, h)], a.dim);
        for (int64_t t = 0; t < a.kvSeq; ++t) {
          double p = std::exp(scores[s * a.kvSeq + t] - rowLse);
          if (p == 0.0)
            continue; // Masked: contributes nothing.
          int64_t kvRow = a.kvRow(b, t, h);
          double mask = a.dropoutFactor(b, h, s, t);
          double dp = dot(doutRow, &v.f()[kvRow], a.dim);
          double ds = p * (mask * dp - rowDot) * a.scale;
          for (int64_t d = 0; d < a.dim; ++d) {
            dv[kvRow + d] += p * mask * doutRow[d];
            dqRow[d] += ds * k.f()[kvRow + d];
            dk[kvRow + d] += ds * qRow[d];
          }
        }
      }
    }
  return Results{floatsLike(op.getDq(), std::move(dq)),
                 floatsLike(op.getDk(), std::move(dk)),
                 floatsLike(op.getDv(), std::move(dv))};
}

void addAttentionKernels(KernelTable &table) {
  table.add<RopeOp>([](RopeOp op, Operands in) -> llvm::Expected<Results> {
    auto y = rotatePairs(op, *in[0], op.getTheta().convertToDouble(),
                         ropeScalingOf(op), 1.0);
    if (!y)
      return y.takeError();
    return Results{std::move(*y)};
  });
  table.add<RopeGradOp>(
      [](RopeGradOp op, Operands in) -> llvm::Expected<Results> {
        auto dx = rotatePairs(op, *in[0], op.getTheta().convertToDouble(),
                              ropeScalingOf(op), -1.0);
        if (!dx)
          return dx.takeError();
        return Results{std::move(*dx)};
      });
  table.add<AttentionOp>(
      [](AttentionOp op, Operands in) { return attention(op, in); });
  table.add<AttentionGradOp>(
      [](AttentionGradOp op, Operands in) { return attentionGrad(op, in); });
}

} // namespace loom::interp
