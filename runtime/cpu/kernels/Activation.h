//===- Activation.h - gelu and silu, shared by the CPU kernels ---*- C++
//-*-===//
//
// The activations' functions and derivatives, used by the gelu, gelu_erf
// and silu kernels (Norm.cpp), matmul's gelu epilogue (Linear.cpp) and
// fused elementwise chains (Fused.cpp), so that all three compute an
// element bit for bit alike.
//
//===----------------------------------------------------------------------===//

#ifndef LOOM_RUNTIME_CPU_KERNELS_ACTIVATION_H
#define LOOM_RUNTIME_CPU_KERNELS_ACTIVATION_H

#include <cmath>
#include <cstdint>
#include <cstring>

namespace loom::cpu {

// GPT-2's gelu_new, 0.5 x (1 + tanh(u)) with u = sqrt(2/pi) (x + 0.044715
// x^3), as the interpreter computes it. Since 0.5 (1 + tanh(u)) =
// sigmoid(2u) and 1 - tanh(u)^2 = 4 sigmoid(2u) sigmoid(-2u), both the
// function and its derivative are written with sigmoids, which keep their
// relative precision in float where 1 + tanh(u) would cancel.
inline constexpr float kGeluScale = 0.7978845608028654f; // sqrt(2 / pi)
inline constexpr float kGeluCubic = 0.044715f;

/// exp(x) for x <= 0 without a library call, so that loops over it
/// vectorize: x = n ln 2 + r with |r| <= ln 2 / 2, exp(r) by Cephes' expf
/// polynomial (about 1 ulp), times 2^n built in the exponent bits. Below
/// -87 it returns 2^-126 times a polynomial value instead of a denormal.
inline float expNonPositive(float x) {
  x = std::fmax(x, -87.0f);
  float n = std::floor(x * 1.44269504088896341f + 0.5f);
  float r = x - n * 0.693359375f + n * 2.12194440e-4f;
  float p = 1.9875691500e-4f;
  p = p * r + 1.3981999507e-3f;
  p = p * r + 8.3334519073e-3f;
  p = p * r + 4.1665795894e-2f;
  p = p * r + 1.6666665459e-1f;
  p = p * r + 5.0000001201e-1f;
  float y = p * r * r + r + 1.0f;
  int32_t bits = (static_cast<int32_t>(n) + 127) << 23;
  float scale;
  std::memcpy(&scale, &bits, sizeof scale);
  return y * scale;
}

/// 1 / (1 + exp(-x)), from exp(-|x|) in (0, 1].
inline float sigmoid(float x) {
  float e = expNonPositive(-std::fabs(x));
  float large = 1.0f / (1.0f + e);
  return x >= 0.0f ? large : e * large;
}

inline float geluInner(float x) {
  return kGeluScale * (x + kGeluCubic * x * x * x);
}

inline float gelu(float x) { return x * sigmoid(2.0f * geluInner(x)); }

/// 0.5 (1 + t) + 0.5 x (1 - t^2) sqrt(2/pi) (1 + 3 * 0.044715 x^2).
/// sigmoid(z) and sigmoid(-z) from one exponential, e = exp(-|z|) in (0, 1]:
/// the sigmoid of the larger is 1 / (1 + e), the other e times it.
inline void sigmoidPair(float z, float &positive, float &negative) {
  float e = expNonPositive(-std::fabs(z));
  float large = 1.0f / (1.0f + e), small = e * large;
  positive = z >= 0.0f ? large : small;
  negative = z >= 0.0f ? small : large;
}

inline float geluDerivative(float x) {
  float u = geluInner(x);
  float up, down;
  sigmoidPair(2.0f * u, up, down);
  return up +
         2.0f * x * up * down * kGeluScale * (1.0f + 3.0f * kGeluCubic * x * x);
}

/// The exact GELU, x Phi(x) = 0.5 x erfc(-x / sqrt(2)): erfc keeps its
/// relative precision at negative x, where 1 + erf(x / sqrt(2)) cancels.
inline constexpr float kSqrtHalf = 0.7071067811865476f;      // 1 / sqrt(2)
inline constexpr float kNormalDensity = 0.3989422804014327f; // 1 / sqrt(2 pi)

inline float geluErf(float x) { return 0.5f * x * std::erfc(-x * kSqrtHalf); }

/// Phi(x) + x phi(x), phi the standard normal density.
inline float geluErfDerivative(float x) {
  return 0.5f * std::erfc(-x * kSqrtHalf) +
         x * kNormalDensity * std::exp(-0.5f * x * x);
}

inline float silu(float x) { return x * sigmoid(x); }

/// s (1 + x (1 - s)), s = sigmoid(x), with 1 - s = sigmoid(-x).
inline float siluDerivative(float x) {
  float s, rest;
  sigmoidPair(x, s, rest);
  return s * (1.0f + x * rest);
}

} // namespace loom::cpu

#endif // LOOM_RUNTIME_CPU_KERNELS_ACTIVATION_H
