//===- Activation.cuh - gelu and silu for the CUDA kernels -----*- CUDA -*-===//
//
// The activations' functions and derivatives, used by the gelu, gelu_erf
// and silu kernels (Norm.cu), matmul's gelu epilogue where cuBLASLt does not
// apply it (Matmul.cu) and fused elementwise chains (Fused.cu), so that all
// three compute an element alike. The formulas are the CPU kernels'
// (runtime/cpu/kernels/Activation.h), with the CUDA expf.
//
//===----------------------------------------------------------------------===//

#ifndef LOOM_RUNTIME_CUDA_KERNELS_ACTIVATION_CUH
#define LOOM_RUNTIME_CUDA_KERNELS_ACTIVATION_CUH

namespace loom::cuda {

// GPT-2's gelu_new written with sigmoids, as the CPU kernel writes it
// (0.5 (1 + tanh(u)) = sigmoid(2u), 1 - tanh(u)^2 = 4 sigmoid(2u)
// sigmoid(-2u)), which keeps its relative precision where 1 + tanh(u)
// cancels.
constexpr float kGeluScale = 0.7978845608028654f; // sqrt(2 / pi)
constexpr float kGeluCubic = 0.044715f;

__device__ __forceinline__ float sigmoid(float x) {
  return 1.0f / (1.0f + expf(-x));
}

__device__ __forceinline__ float geluInner(float x) {
  return kGeluScale * (x + kGeluCubic * x * x * x);
}

__device__ __forceinline__ float gelu(float x) {
  return x * sigmoid(2.0f * geluInner(x));
}

__device__ __forceinline__ float geluDerivative(float x) {
  float u = geluInner(x);
  float up = sigmoid(2.0f * u), down = sigmoid(-2.0f * u);
  return up +
         2.0f * x * up * down * kGeluScale * (1.0f + 3.0f * kGeluCubic * x * x);
}

/// The exact GELU as the CPU kernel writes it: 0.5 x erfc(-x / sqrt(2)),
/// and its derivative Phi(x) + x phi(x).
constexpr float kSqrtHalf = 0.7071067811865476f;      // 1 / sqrt(2)
constexpr float kNormalDensity = 0.3989422804014327f; // 1 / sqrt(2 pi)

__device__ __forceinline__ float geluErf(float x) {
  return 0.5f * x * erfcf(-x * kSqrtHalf);
}

__device__ __forceinline__ float geluErfDerivative(float x) {
  return 0.5f * erfcf(-x * kSqrtHalf) +
         x * kNormalDensity * expf(-0.5f * x * x);
}

__device__ __forceinline__ float silu(float x) { return x * sigmoid(x); }

/// s (1 + x (1 - s)), s = sigmoid(x), with 1 - s = sigmoid(-x).
__device__ __forceinline__ float siluDerivative(float x) {
  return sigmoid(x) * (1.0f + x * sigmoid(-x));
}

} // namespace loom::cuda

#endif // LOOM_RUNTIME_CUDA_KERNELS_ACTIVATION_CUH
