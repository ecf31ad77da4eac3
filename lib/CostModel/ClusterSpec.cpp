//===- ClusterSpec.cpp - Cluster specs: JSON, presets ---------------------===//
// (being written)
#include "loom/CostModel/ClusterSpec.h"
// Placeholder until the JSON reader and the presets land (helper branch).
namespace loom::cost {
double DeviceSpec::peakFlops(MathMode mode) const {
  switch (mode) {
  case MathMode::FP32:
    return peakFlopsFP32;
  case MathMode::TF32:
    return peakFlopsTF32;
  case MathMode::BF16:
    return peakFlopsBF16;
  case MathMode::FP16:
    return peakFlopsFP16;
  }
  return peakFlopsFP32;
}
LinkSpec ClusterSpec::interNodePerDevice() const {
  return {interNodeName,
          double(nicsPerNode) * nicBandwidth / double(devicesPerNode),
          interNodeLatency};
}
} // namespace loom::cost
