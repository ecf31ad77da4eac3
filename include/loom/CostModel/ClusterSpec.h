//===- ClusterSpec.h - What a cluster can compute and move ------*- C++ -*-===//
//
// The machine half of the cost model: per device peak FLOP/s by math mode,
// memory capacity and bandwidth, and the links between devices (inside a
// node: NVLink/NVSwitch or shared memory; across nodes: NICs). Read from a
// JSON file (docs/cluster-spec.md, examples/clusters/), taken from a
// built-in preset, or written by loom-calibrate.
//
//===----------------------------------------------------------------------===//

#ifndef LOOM_COSTMODEL_CLUSTERSPEC_H
#define LOOM_COSTMODEL_CLUSTERSPEC_H

#include "llvm/ADT/StringRef.h"
#include "llvm/Support/Error.h"

#include <cstdint>
#include <string>
#include <vector>

namespace loom::cost {

/// The arithmetic a kernel runs in; each has its own peak.
enum class MathMode { FP32, TF32, BF16, FP16 };

/// One accelerator (or one CPU core, for `cpu-local`). Rates are per second,
/// sizes in bytes.
struct DeviceSpec {
  std::string name;
  double peakFlopsFP32 = 0, peakFlopsTF32 = 0, peakFlopsBF16 = 0,
         peakFlopsFP16 = 0;
  double memoryBytes = 0;     ///< capacity
  double memoryBandwidth = 0; ///< peak, bytes/s
  /// Fixed cost of one kernel launch (s).
  double launchOverhead = 0;
  /// GEMM efficiency model: a GEMM of W FLOPs takes
  ///   (W + gemmHalfWork) / (gemmEfficiency * peak)
  /// i.e. it reaches gemmEfficiency of peak when large, half of that at
  /// W = gemmHalfWork. loom-calibrate fits both by least squares.
  double gemmEfficiency = 0;
  double gemmHalfWork = 0;
  /// Fraction of the peak that fused attention reaches on the work it does
  /// (half the score matrix when causal): the rate of attention's kernels,
  /// which is not the GEMMs' (docs/cluster-spec.md); 0: gemmEfficiency.
  double attentionEfficiency = 0;
  /// The attention efficiency costs use: attentionEfficiency, or where none
  /// was given (0) the GEMMs' gemmEfficiency.
  double attentionEfficiencyOrGemm() const {
    return attentionEfficiency > 0 ? attentionEfficiency : gemmEfficiency;
  }
  /// Fraction of memoryBandwidth that bandwidth-bound kernels reach.
  double memoryEfficiency = 0;

  double peakFlops(MathMode mode) const;
};

/// A link class, with α–β parameters of one device's traffic over it.
struct LinkSpec {
  std::string name;
  double bandwidth = 0; ///< β⁻¹: bytes/s per device and direction
  double latency = 0;   ///< α: seconds per message
};

/// The largest cluster Loom plans for: so many nodes of so many devices
/// (2^26 devices in all, so that device counts and their products with the
/// plan's degrees stay far from overflowing).
constexpr int64_t kMaxNodes = int64_t(1) << 16;
constexpr int64_t kMaxDevicesPerNode = int64_t(1) << 10;

struct ClusterSpec {
  std::string name;
  int64_t nodes = 1;
  int64_t devicesPerNode = 1;
  DeviceSpec device;
  /// Between two devices of one node (NVLink/NVSwitch, shared memory).
  LinkSpec intraNode;
  /// Across nodes: `nicsPerNode` NICs of `nicBandwidth` bytes/s each, shared
  /// by the devicesPerNode devices; latency is the NIC-to-NIC α.
  int64_t nicsPerNode = 0;
  double nicBandwidth = 0;
  double interNodeLatency = 0;
  std::string interNodeName;

  int64_t numDevices() const { return nodes * devicesPerNode; }
  /// Inter-node bandwidth one device gets when every device of its node
  /// sends across nodes at once (rail-optimized DGX: one NIC per GPU).
  /// Bandwidth 0 when the cluster has no NICs (a single-node spec).
  LinkSpec interNodePerDevice() const;
};

/// Parses a spec from JSON text. Errors name `fileName` and the JSON path of
/// the offending key (e.g. `a.json: device.peak_flops.bf16: must be a
/// positive number`).
llvm::Expected<ClusterSpec> parseClusterSpec(llvm::StringRef text,
                                             llvm::StringRef fileName);
/// The spec as JSON in the format parseClusterSpec reads (round-trips).
std::string printClusterSpec(const ClusterSpec &spec);

/// Names of the built-in presets: a100-80g, h100-80g, h200, cpu-local.
std::vector<std::string> presetNames();
/// A built-in preset with one node; an error lists the known names.
llvm::Expected<ClusterSpec> getPreset(llvm::StringRef name);

/// Resolves a `--cluster` argument: `PRESET`, `PRESET:NODES`, `FILE.json`
/// or `FILE.json:NODES` (NODES overrides the node count).
llvm::Expected<ClusterSpec> resolveClusterSpec(llvm::StringRef argument);

} // namespace loom::cost

#endif // LOOM_COSTMODEL_CLUSTERSPEC_H
