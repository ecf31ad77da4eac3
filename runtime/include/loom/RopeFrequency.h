//===- RopeFrequency.h - Rotary embedding frequencies -----------*- C++ -*-===//
//
// The angle RoPE rotates pair i of a head of D dimensions by at position s
// is s * f(i), with f(i) = theta^(-2i/D) (Su et al. 2021; Hugging Face's
// default rope). Llama 3.1's `rope_scaling` ("rope_type": "llama3") keeps
// the high frequencies, divides the low ones by `factor` and blends the
// band between (transformers' _compute_llama3_parameters): with
// wavelength w = 2 pi / f(i), L the original context length,
//
//   w < L / high_freq_factor:   f(i)
//   w > L / low_freq_factor:    f(i) / factor
//   otherwise:                  (1 - a) f(i) / factor + a f(i),
//                               a = (L / w - low_freq_factor) /
//                                   (high_freq_factor - low_freq_factor)
//
// One function, header-only, for the reference interpreter and both kernel
// libraries (CUDA code includes it too).
//
//===----------------------------------------------------------------------===//

#ifndef LOOM_ROPEFREQUENCY_H
#define LOOM_ROPEFREQUENCY_H

#include <cmath>
#include <cstdint>

#ifndef LOOM_HOST_DEVICE
#if defined(__CUDACC__)
#define LOOM_HOST_DEVICE __host__ __device__
#else
#define LOOM_HOST_DEVICE
#endif
#endif

namespace loom {

/// Llama 3.1's frequency scaling; factor 0: none.
struct RopeScaling {
  double factor = 0, lowFreqFactor = 0, highFreqFactor = 0,
         originalMaxPositions = 0;
};

/// f(i) of pair i of `dim` under `scaling`.
LOOM_HOST_DEVICE inline double ropeFrequency(int64_t i, int64_t dim,
                                             double theta,
                                             const RopeScaling &scaling) {
  double frequency =
      pow(theta, -2.0 * static_cast<double>(i) / static_cast<double>(dim));
  if (scaling.factor == 0)
    return frequency;
  const double pi = 3.14159265358979323846;
  double wavelength = 2 * pi / frequency;
  double lowWavelength = scaling.originalMaxPositions / scaling.lowFreqFactor,
         highWavelength = scaling.originalMaxPositions / scaling.highFreqFactor;
  if (wavelength < highWavelength)
    return frequency;
  if (wavelength > lowWavelength)
    return frequency / scaling.factor;
  double smooth =
      (scaling.originalMaxPositions / wavelength - scaling.lowFreqFactor) /
      (scaling.highFreqFactor - scaling.lowFreqFactor);
  return (1 - smooth) * frequency / scaling.factor + smooth * frequency;
}

} // namespace loom

#endif // LOOM_ROPEFREQUENCY_H
