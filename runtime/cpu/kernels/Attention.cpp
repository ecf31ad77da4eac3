//===- Attention.cpp - Fused attention and its gradient -------------------===//
//
// Attention is computed one (batch, query head) pair at a time, as the
// reference interpreter does (lib/Interpreter/Attention.cpp), with the
// products through OpenBLAS: scores = scale * q k^T (+ the causal mask),
// its row log-sum-exp `lse`, the probabilities P = exp(scores - lse) and
// out = P v. q-shaped tensors are [B, S, Hq, D] and k / v-shaped ones
// [B, Skv, Hkv, D], so the rows of one head are a strided matrix (leading
// dimension Hq * D or Hkv * D) that sgemm reads in place. The gradient
// recomputes P from the stored lse (FlashAttention-2, Dao 2023, Alg. 2):
//
//   dv = Pd^T dout,  dPd = dout v^T,  dS = P * (M * dPd - rowsum(dout * out)),
//   dq = scale * dS k,  dk = scale * dS^T q
//
// with M the dropout mask scaled by 1 / (1 - rate) and Pd = P * M (both 1
// and P without dropout). Key/value head h / (Hq / Hkv) serves query head
// h, so dk and dv add up over the heads of a group. Row sums (softmax
// sums, lse, rowsum(dout * out)) accumulate in double; the matrix products
// in float.
//
// The mask of probability (b, h, s, t) is drawn at its index in the global
// [B, Hq, S, Skv] tensor: on a shard, the mask block splits b, h and s as
// q's dimensions 0, 2 and 1 (the keys are whole). The same block places a
// shard's queries among the keys when the sequence is split (context
// parallelism): query s is at global position queryStart + s, which the
// causal mask compares against.
//
//===----------------------------------------------------------------------===//

#include "KernelArgs.h"

#include "loom/DropoutMask.h"

#include <cblas.h>

#include <cmath>
#include <cstring>
#include <vector>

namespace loom::cpu {

namespace {

/// The shapes and attributes of an attention or attention_grad call.
struct AttentionShape : kernels::AttentionDims {
  bool causal = false;
  float scale = 1.0f;
  /// Attention dropout: rate 0 without it.
  double dropoutRate = 0.0;
  uint64_t dropoutSeed = 0, dropoutKey = 0, step = 0;
  /// Global strides of the mask's [B, Hq, S, Skv] and the global index of
  /// its local element 0.
  int64_t maskStrides[4] = {};
  int64_t maskBase = 0;
  /// The global position of local query 0 (a sequence shard's offset).
  int64_t queryStart = 0;

  int64_t qStride() const { return heads * dim; }
  int64_t kvStride() const { return kvHeads * dim; }
  /// The offset of row (b, s = 0, h) of q-shaped tensors.
  int64_t qHead(int64_t b, int64_t h) const {
    return (b * seq * heads + h) * dim;
  }
  /// The offset of row (b, t = 0, kv head of query head h) of k-shaped
  /// tensors.
  int64_t kvHead(int64_t b, int64_t h) const {
    return (b * kvSeq * kvHeads + h / (heads / kvHeads)) * dim;
  }
  int64_t lseRow(int64_t b, int64_t h) const { return (b * heads + h) * seq; }
  /// How many keys query s sees.
  int64_t keysOf(int64_t s) const {
    return causal ? queryStart + s + 1 : kvSeq;
  }

  /// The mask factor of probability (b, h, s, t) is `dropoutFactor(
  /// maskRow(b, h, s) + t)`.
  int64_t maskRow(int64_t b, int64_t h, int64_t s) const {
    return maskBase + b * maskStrides[0] + h * maskStrides[1] +
           s * maskStrides[2];
  }
  float dropoutFactor(int64_t index, float kept) const {
    return dropoutKeeps(dropoutSeed, dropoutKey, step,
                        static_cast<uint64_t>(index), dropoutRate)
               ? kept
               : 0.0f;
  }
};

/// Reads the shapes (q is operand `qIndex`, k and v follow it), the
/// attributes and, with dropout, the mask's position; checks what the
/// kernels rely on. `operands` is the count without the step.
template <Kernel K>
int32_t readAttention(KernelArgs &args, const loom_call_frame *frame,
                      const char *op, int64_t operands, int64_t qIndex,
                      AttentionShape &a) {
  auto attrs = readAttrs<K>(args);
  a.causal = attrs.causal;
  a.scale = static_cast<float>(attrs.scale);
  bool hasStep = attrs.has_step;
  if (args.numOperands() != operands + (hasStep ? 1 : 0))
    return fail("loom_cpu_%s: expected %lld operands", op,
                static_cast<long long>(operands + (hasStep ? 1 : 0)));
  for (int64_t t = 0; t < args.numOperands() + args.numResults(); ++t) {
    bool isStep = hasStep && t == operands;
    const View &view =
        t < args.numOperands() ? args.in(t) : args.out(t - args.numOperands());
    if (!isStep && view.dtype != LOOM_DTYPE_F32)
      return fail("loom_cpu_%s: tensor %lld is not f32", op,
                  static_cast<long long>(t));
  }
  char error[256];
  if (!kernels::readAttentionDims(args, qIndex, a.causal, "loom_cpu", op, a,
                                  error, sizeof error))
    return fail("%s", error);

  a.dropoutRate = attrs.dropout_rate;
  a.dropoutSeed = static_cast<uint64_t>(attrs.dropout_seed);
  a.dropoutKey = static_cast<uint64_t>(attrs.dropout_key);
  if (!hasStep || a.dropoutRate == 0.0)
    a.dropoutRate = 0.0;
  if (hasStep) {
    const View &step = args.in(operands);
    if (step.dtype != LOOM_DTYPE_I32 && step.dtype != LOOM_DTYPE_I64)
      return fail("loom_cpu_%s: the step is not an integer", op);
    a.step = static_cast<uint64_t>(step.index(0));
  }
  if (!attrs.has_positions)
    return 0; // No mask block: the local tensor is the global one.
  int64_t maskShape[4] = {a.batch, a.heads, a.seq, a.kvSeq};
  const int64_t entryOfDim[4] = {0, 2, 1, -1};
  int64_t starts[4] = {};
  if (int32_t status =
          readMaskIndex(args, frame, /*blockRank=*/4, maskShape, 4, entryOfDim,
                        a.maskStrides, &a.maskBase, starts))
    return status;
  a.queryStart = a.causal ? starts[2] : 0;
  if (a.queryStart + a.seq > a.kvSeq)
    return fail("loom_cpu_%s: queries %lld to %lld past the %lld keys", op,
                static_cast<long long>(a.queryStart),
                static_cast<long long>(a.queryStart + a.seq),
                static_cast<long long>(a.kvSeq));
  return 0;
}

/// scores [S, Skv] = scale * q k^T for query head h of batch b.
void computeScores(const AttentionShape &a, const float *q, const float *k,
                   int64_t b, int64_t h, float *scores) {
  cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, a.seq, a.kvSeq, a.dim,
              a.scale, q + a.qHead(b, h), a.qStride(), k + a.kvHead(b, h),
              a.kvStride(), 0.0f, scores, a.kvSeq);
}

/// out, lse = attention(q, k, v).
int32_t attention(KernelArgs &args, const loom_call_frame *frame) {
  AttentionShape a;
  if (int32_t status = readAttention<Kernel::attention>(
          args, frame, "attention", 3, /*qIndex=*/0, a))
    return status;
  if (args.numResults() != 2)
    return fail("loom_cpu_attention: expected out and lse");
  const float *q = args.in(0).f32(), *k = args.in(1).f32(),
              *v = args.in(2).f32();
  float *out = args.out(0).f32(), *lse = args.out(1).f32();
  float kept = static_cast<float>(1.0 / (1.0 - a.dropoutRate));
  std::vector<float> scores(a.seq * a.kvSeq);
  for (int64_t b = 0; b < a.batch; ++b)
    for (int64_t h = 0; h < a.heads; ++h) {
      computeScores(a, q, k, b, h, scores.data());
      // Each row becomes its probabilities, dropped: Pd = P * M.
      for (int64_t s = 0; s < a.seq; ++s) {
        float *row = &scores[s * a.kvSeq];
        int64_t used = a.keysOf(s);
        float max = row[0];
        for (int64_t t = 1; t < used; ++t)
          max = std::fmax(max, row[t]);
        double sum = 0.0;
        for (int64_t t = 0; t < used; ++t)
          sum += row[t] = std::exp(row[t] - max);
        lse[a.lseRow(b, h) + s] = static_cast<float>(max + std::log(sum));
        float inverse = static_cast<float>(1.0 / sum);
        for (int64_t t = 0; t < used; ++t)
          row[t] *= inverse;
        if (a.dropoutRate != 0.0) {
          int64_t maskRow = a.maskRow(b, h, s);
          for (int64_t t = 0; t < used; ++t)
            row[t] *= a.dropoutFactor(maskRow + t, kept);
        }
        for (int64_t t = used; t < a.kvSeq; ++t)
          row[t] = 0.0f;
      }
      cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, a.seq, a.dim,
                  a.kvSeq, 1.0f, scores.data(), a.kvSeq, v + a.kvHead(b, h),
                  a.kvStride(), 0.0f, out + a.qHead(b, h), a.qStride());
    }
  return 0;
}

/// dq, dk, dv = attention_grad(dout, q, k, v, out, lse).
int32_t attentionGrad(KernelArgs &args, const loom_call_frame *frame) {
  AttentionShape a;
  if (int32_t status = readAttention<Kernel::attention_grad>(
          args, frame, "attention_grad", 6, /*qIndex=*/1, a))
    return status;
  if (args.numResults() != 3)
    return fail("loom_cpu_attention_grad: expected dq, dk and dv");
  const float *dout = args.in(0).f32(), *q = args.in(1).f32(),
              *k = args.in(2).f32(), *v = args.in(3).f32(),
              *out = args.in(4).f32(), *lse = args.in(5).f32();
  float *dq = args.out(0).f32(), *dk = args.out(1).f32(),
        *dv = args.out(2).f32();
  std::memset(dk, 0, sizeof(float) * args.out(1).numElements());
  std::memset(dv, 0, sizeof(float) * args.out(2).numElements());
  float kept = static_cast<float>(1.0 / (1.0 - a.dropoutRate));
  // probabilities: P, then Pd; gradients: dPd, then dS.
  std::vector<float> scratch(2 * a.seq * a.kvSeq);
  float *probabilities = scratch.data();
  float *gradients = scratch.data() + a.seq * a.kvSeq;
  for (int64_t b = 0; b < a.batch; ++b)
    for (int64_t h = 0; h < a.heads; ++h) {
      int64_t qHead = a.qHead(b, h), kvHead = a.kvHead(b, h);
      computeScores(a, q, k, b, h, probabilities);
      cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, a.seq, a.kvSeq,
                  a.dim, 1.0f, dout + qHead, a.qStride(), v + kvHead,
                  a.kvStride(), 0.0f, gradients, a.kvSeq);
      for (int64_t s = 0; s < a.seq; ++s) {
        float *p = probabilities + s * a.kvSeq;
        float *g = gradients + s * a.kvSeq;
        const float *doutRow = dout + qHead + s * a.qStride();
        const float *outRow = out + qHead + s * a.qStride();
        double dot = 0.0;
        for (int64_t d = 0; d < a.dim; ++d)
          dot += static_cast<double>(doutRow[d]) * outRow[d];
        float rowDot = static_cast<float>(dot);
        float rowLse = lse[a.lseRow(b, h) + s];
        int64_t used = a.keysOf(s);
        int64_t maskRow = a.dropoutRate != 0.0 ? a.maskRow(b, h, s) : 0;
        for (int64_t t = 0; t < used; ++t) {
          float probability = std::exp(p[t] - rowLse);
          float mask =
              a.dropoutRate != 0.0 ? a.dropoutFactor(maskRow + t, kept) : 1.0f;
          p[t] = probability * mask;
          g[t] = probability * (mask * g[t] - rowDot) * a.scale;
        }
        for (int64_t t = used; t < a.kvSeq; ++t)
          p[t] = g[t] = 0.0f;
      }
      // dv += Pd^T dout, dq = dS k, dk += dS^T q.
      cblas_sgemm(CblasRowMajor, CblasTrans, CblasNoTrans, a.kvSeq, a.dim,
                  a.seq, 1.0f, probabilities, a.kvSeq, dout + qHead,
                  a.qStride(), 1.0f, dv + kvHead, a.kvStride());
      cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, a.seq, a.dim,
                  a.kvSeq, 1.0f, gradients, a.kvSeq, k + kvHead, a.kvStride(),
                  0.0f, dq + qHead, a.qStride());
      cblas_sgemm(CblasRowMajor, CblasTrans, CblasNoTrans, a.kvSeq, a.dim,
                  a.seq, 1.0f, gradients, a.kvSeq, q + qHead, a.qStride(), 1.0f,
                  dk + kvHead, a.kvStride());
    }
  return 0;
}

} // namespace
} // namespace loom::cpu

extern "C" int32_t loom_cpu_attention(const loom_call_frame *frame,
                                      void *const *buffers,
                                      const int64_t *meta) {
  loom::cpu::KernelArgs args(buffers, meta);
  return loom::cpu::attention(args, frame);
}

extern "C" int32_t loom_cpu_attention_grad(const loom_call_frame *frame,
                                           void *const *buffers,
                                           const int64_t *meta) {
  loom::cpu::KernelArgs args(buffers, meta);
  return loom::cpu::attentionGrad(args, frame);
}
