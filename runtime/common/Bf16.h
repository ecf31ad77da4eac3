//===- Bf16.h - bf16 bits to and from float ---------------------*- C++ -*-===//
//
// The one rounding every backend uses when it stores a float as bf16: the
// CPU kernels, the MPI bf16 reductions and the CUDA collectives must round
// alike, or a rank's replica drifts from its peers'. Header-only and
// usable from CUDA device code.
//
//===----------------------------------------------------------------------===//

#ifndef LOOM_RUNTIME_COMMON_BF16_H
#define LOOM_RUNTIME_COMMON_BF16_H

#include <cstdint>
#include <cstring>

#if defined(__CUDACC__)
#define LOOM_BF16_HOST_DEVICE __host__ __device__
#else
#define LOOM_BF16_HOST_DEVICE
#endif

namespace loom::rt {

/// The bits of the bf16 nearest to `value` (ties to even; a NaN stays a
/// quiet NaN).
LOOM_BF16_HOST_DEVICE inline uint16_t toBf16Bits(float value) {
  uint32_t bits;
  std::memcpy(&bits, &value, sizeof bits);
  if ((bits & 0x7fffffffu) > 0x7f800000u)
    bits |= 0x00400000u;
  else
    bits += 0x7fffu + ((bits >> 16) & 1u);
  return static_cast<uint16_t>(bits >> 16);
}

/// The float a bf16 holds (exact).
LOOM_BF16_HOST_DEVICE inline float fromBf16Bits(uint16_t bits) {
  uint32_t wide = static_cast<uint32_t>(bits) << 16;
  float value;
  std::memcpy(&value, &wide, sizeof value);
  return value;
}

/// `value` rounded to the nearest bf16, as a float.
LOOM_BF16_HOST_DEVICE inline float roundToBf16(float value) {
  return fromBf16Bits(toBf16Bits(value));
}

} // namespace loom::rt

#endif // LOOM_RUNTIME_COMMON_BF16_H
