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

enum class Init { Normal, Zeros, Ones };

/// How HF initializes the parameter `name`, and the normal's deviation.
Init initFor(const ModelConfig &config, StringRef name, double &stddev) {
  stddev = 0.02;
  if (name.ends_with(".bias"))
    return Init::Zeros;
  if (name.contains("ln_") || name.contains("layernorm") ||
      name == "model.norm.weight")
    return Init::Ones;
  if (config.type == ModelType::GPT2 && name.ends_with("c_proj.weight"))
    stddev = 0.02 / std::sqrt(2.0 * config.numLayers);
  return Init::Normal;
}

} // namespace

std::vector<CheckpointTensor> initParameters(const ModelConfig &config,
                                             uint64_t seed) {
  std::vector<CheckpointTensor> tensors;
  for (auto [index, spec] : llvm::enumerate(listParameters(config))) {
    CheckpointTensor tensor{
        spec.name, SmallVector<int64_t>(ArrayRef<int64_t>(spec.shape)), {}};
    double stddev;
    Init init = initFor(config, spec.name, stddev);
    SplitMix64 rng(seed * 0x100000001b3ull + index);
    tensor.values.resize(spec.numElements());
    for (float &value : tensor.values)
      value = init == Init::Normal ? static_cast<float>(stddev * rng.normal())
              : init == Init::Ones ? 1.0f
                                   : 0.0f;
    tensors.push_back(std::move(tensor));
  }
  return tensors;
}

} // namespace loom
