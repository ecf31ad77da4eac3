//===- CudnnAttention.h - Attention on cuDNN's fused SDPA -------*- C++ -*-===//
//
// loom_cuda_attention and attention_grad on cuDNN's runtime-fusion flash
// attention engines, where cuDNN takes the call (CudnnAttention.cpp says
// which graphs); Attention.cu runs Loom's own kernels otherwise. The
// tensors are described by strides, so that q, k, v and their gradients
// may live anywhere in memory, inside a fused projection included.
//
//===----------------------------------------------------------------------===//

#ifndef LOOM_RUNTIME_CUDA_KERNELS_CUDNNATTENTION_H
#define LOOM_RUNTIME_CUDA_KERNELS_CUDNNATTENTION_H

#include "Context.h"

#include <string>

namespace loom::cuda::cudnn {

/// A bf16 tensor with q's or k's shape, viewed as [B, H, S, D]: element
/// (b, h, s, d) at `data` + b * batch + h * head + s * seq + d (elements).
/// Loom's dense [B, S, H, D] is {S * H * D, D, H * D}.
struct Strided {
  void *data = nullptr;
  int64_t batch = 0, head = 0, seq = 0;
};

/// The dense [B, S, H, D] layout of `data`.
inline Strided dense(void *data, int64_t seq, int64_t heads, int64_t dim) {
  return {data, seq * heads * dim, dim, heads * dim};
}

/// What an attention call computes: q [B, Hq, S, D], k and v
/// [B, Hkv, Skv, D] (Hkv dividing Hq), softmax(scale * q k^T + mask) v.
struct Problem {
  int64_t batch = 0, heads = 0, kvHeads = 0, seq = 0, kvSeq = 0, dim = 0;
  bool causal = false;
  float scale = 1.0f;
};

/// out and the row log-sum-exps (f32 [B, Hq, S], dense) of q, k, v.
struct Forward {
  Problem problem;
  Strided q, k, v, out;
  float *lse = nullptr;
};

/// dq, dk, dv of attention_grad(dout, q, k, v, out, lse).
struct Backward {
  Problem problem;
  Strided dout, q, k, v, out, dq, dk, dv;
  const float *lse = nullptr;
};

/// How a call went: run on cuDNN (`engine` its engine's global index, -1
/// if unknown), or refused with the reason. A refusal leaves the results
/// untouched, and Loom's kernels run the call instead.
struct Outcome {
  bool ran = false;
  int64_t engine = -1;
  std::string refusal;
};

/// Runs `call` on cuDNN if it takes it. The plan is built at the first
/// call of its kind (shapes, strides, causal) and kept in the context, a
/// refusal too; the scratch grows to what the plan needs (see
/// growScratch).
Outcome forward(loom_cuda_context *context, const Forward &call);
Outcome backward(loom_cuda_context *context, const Backward &call);

/// Frees the handle and the plans of a context (null: nothing).
void destroy(State *state);

} // namespace loom::cuda::cudnn

#endif // LOOM_RUNTIME_CUDA_KERNELS_CUDNNATTENTION_H
