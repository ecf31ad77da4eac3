//===- ParamInit.cpp - Initial weights as Hugging Face initializes them ---===//

#include "loom/Import/ParamInit.h"

#include "loom/Import/ModelImporter.h"

#include <cmath>

using namespace llvm;

namespace loom {

namespace {

/// SplitMix64 (Steele, Lea and Flood, "Fast splittable pseudorandom number
/// generators", OOPSLA 2014): a tiny generator with a fully specified output.
class SplitMix64 {
public:
  explicit SplitMix64(uint64_t seed) : state(seed) {}

  uint64_t next() {
    uint64_t z = (state += 0x9e3779b97f4a7c15ull);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
  }

  /// Uniform in (0, 1]: 53 random bits, never 0 (log is taken of it).
  double uniform() { return ((next() >> 11) + 1) * 0x1.0p-53; }

  /// Standard normal by Box-Muller, one draw per call.
  double normal() {
    double radius = std::sqrt(-2.0 * std::log(uniform()));
    return radius * std::cos(2.0 * M_PI * uniform());
  }

private:
  uint64_t state;
};

} // namespace

std::vector<CheckpointTensor> initParameters(const ModelConfig &config,
                                             uint64_t seed) {
  std::vector<CheckpointTensor> tensors;
  for (auto [index, spec] : llvm::enumerate(listParameters(config))) {
    CheckpointTensor tensor{
        spec.name, SmallVector<int64_t>(ArrayRef<int64_t>(spec.shape)), {}};
    double stddev = spec.init == InitKind::ResidualNormal
                        ? 0.02 / std::sqrt(2.0 * config.numLayers)
                        : 0.02;
    SplitMix64 rng(seed * 0x100000001b3ull + index);
    tensor.values.resize(spec.numElements());
    for (float &value : tensor.values)
      value = spec.init == InitKind::Ones ? 1.0f
              : spec.init == InitKind::Zeros
                  ? 0.0f
                  : static_cast<float>(stddev * rng.normal());
    tensors.push_back(std::move(tensor));
  }
  return tensors;
}

} // namespace loom
