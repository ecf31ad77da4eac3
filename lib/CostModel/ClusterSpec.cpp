//===- ClusterSpec.cpp - Cluster specs: JSON, presets ---------------------===//
//
// The JSON format is documented key by key in docs/cluster-spec.md; the
// presets' numbers cite their sources next to them. Every rate is per device
// and direction, every size in bytes, every time in seconds.
//
//===----------------------------------------------------------------------===//

#include "loom/CostModel/ClusterSpec.h"
#include "loom/Support/InputFile.h"
#include "loom/Support/Json.h"

#include "llvm/ADT/STLExtras.h"
#include "llvm/ADT/StringExtras.h"
#include "llvm/Support/JSON.h"
#include "llvm/Support/MemoryBuffer.h"
#include "llvm/TargetParser/Host.h"

#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <optional>
#include <thread>
#include <unistd.h>

using namespace llvm;

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
  llvm_unreachable("unknown math mode");
}

LinkSpec ClusterSpec::interNodePerDevice() const {
  // Every device of a node sends across nodes at once and the node's NICs
  // share that traffic evenly (one NIC per GPU on a rail-optimized DGX).
  LinkSpec link;
  link.name = interNodeName;
  link.bandwidth =
      static_cast<double>(nicsPerNode) * nicBandwidth / devicesPerNode;
  link.latency = interNodeLatency;
  return link;
}

//===----------------------------------------------------------------------===//
// Reading
//===----------------------------------------------------------------------===//

namespace {

/// The range of hardware the cost model takes: from a slow CPU core to
/// far past today's accelerators and links (FLOP/s, bytes/s, seconds).
constexpr double kMinFlops = 1e6, kMaxFlops = 1e18;
constexpr double kMinBandwidth = 1e3, kMaxBandwidth = 1e15;
constexpr double kMaxSeconds = 10;

std::string formatNumber(double value);

/// Reads the keys of one JSON object at `path` (e.g. `device.peak_flops`),
/// remembering the first error in `error`. Keys not in `known` are errors,
/// reported before anything else: a misspelled key then reads as such, not
/// as a missing one.
class ObjectReader {
public:
  ObjectReader(const json::Object &object, std::string path,
               ArrayRef<StringRef> known, std::optional<std::string> &error)
      : object(object), path(std::move(path)), error(error) {
    SmallVector<StringRef> unknown;
    for (const auto &entry : object)
      if (!llvm::is_contained(known, StringRef(entry.first)))
        unknown.push_back(entry.first);
    llvm::sort(unknown); // the object's order is not the file's
    if (!unknown.empty())
      fail(unknown.front(),
           "unknown key (known: " + llvm::join(known, ", ") + ")");
  }

  std::string string(StringRef key) {
    const json::Value *value = get(key);
    if (!value)
      return "";
    std::optional<StringRef> text = value->getAsString();
    if (!text)
      fail(key, "must be a string");
    return text.value_or("").str();
  }

  /// A positive integer of at most `max`.
  int64_t count(StringRef key, int64_t max) {
    const json::Value *value = get(key);
    if (!value)
      return 1;
    std::optional<int64_t> number = value->getAsInteger();
    if (!number || *number <= 0) {
      fail(key, "must be a positive integer");
      return 1;
    }
    if (*number > max) {
      fail(key, Twine(*number) + " is more than the " + Twine(max) +
                    " Loom plans for");
      return 1;
    }
    return *number;
  }

  /// A number > 0, or >= 0 with `zeroAllowed`, within [low, high]: the
  /// range of real hardware, past which the cost model's arithmetic would
  /// overflow to infinities and NaNs.
  double number(StringRef key, bool zeroAllowed, double low, double high) {
    const json::Value *value = get(key);
    if (!value)
      return 1;
    std::optional<double> number = value->getAsNumber();
    if (number && !std::isfinite(*number)) {
      // 1e400 reads as infinity.
      fail(key, "must be a finite number");
      return 1;
    }
    if (!number || *number < 0 || (*number == 0 && !zeroAllowed)) {
      fail(key, zeroAllowed ? "must be a non-negative number"
                            : "must be a positive number");
      return 1;
    }
    if ((*number != 0 && *number < low) || *number > high) {
      fail(key, formatNumber(*number) + " is outside [" + formatNumber(low) +
                    ", " + formatNumber(high) +
                    "], the range of hardware Loom plans for");
      return 1;
    }
    return *number;
  }

  /// A fraction in (0, 1].
  double efficiency(StringRef key) {
    const json::Value *value = get(key);
    if (!value)
      return 1;
    std::optional<double> number = value->getAsNumber();
    if (!number || !(*number > 0 && *number <= 1)) {
      fail(key, "must be a number in (0, 1]");
      return 1;
    }
    return *number;
  }

  /// Whether the object has `key` (for the optional ones).
  bool has(StringRef key) const { return object.get(key) != nullptr; }

  /// A nested object; null (after reporting) when absent or not an object.
  const json::Object *nested(StringRef key) {
    const json::Value *value = get(key);
    if (!value)
      return nullptr;
    const json::Object *result = value->getAsObject();
    if (!result)
      fail(key, "must be an object");
    return result;
  }

  std::string pathOf(StringRef key) const {
    return path.empty() ? key.str() : path + "." + key.str();
  }

  void fail(StringRef key, const Twine &message) {
    if (!error)
      error = (pathOf(key) + ": " + message).str();
  }

private:
  const json::Value *get(StringRef key) {
    const json::Value *value = object.get(key);
    if (!value)
      fail(key, "missing key");
    return value;
  }

  const json::Object &object;
  std::string path;
  std::optional<std::string> &error;
};

void readDevice(ObjectReader &parent, const json::Object &object,
                DeviceSpec &device, std::optional<std::string> &error) {
  ObjectReader reader(object, parent.pathOf("device"),
                      {"name", "peak_flops", "memory_bytes", "memory_bandwidth",
                       "memory_efficiency", "launch_overhead_s",
                       "gemm_efficiency", "gemm_half_work_flops",
                       "attention_efficiency"},
                      error);
  device.name = reader.string("name");
  if (const json::Object *peaks = reader.nested("peak_flops")) {
    ObjectReader peak(*peaks, reader.pathOf("peak_flops"),
                      {"fp32", "tf32", "bf16", "fp16"}, error);
    device.peakFlopsFP32 = peak.number("fp32", false, kMinFlops, kMaxFlops);
    device.peakFlopsTF32 = peak.number("tf32", false, kMinFlops, kMaxFlops);
    device.peakFlopsBF16 = peak.number("bf16", false, kMinFlops, kMaxFlops);
    device.peakFlopsFP16 = peak.number("fp16", false, kMinFlops, kMaxFlops);
  }
  device.memoryBytes = reader.number("memory_bytes", false, 1e6, 1e15);
  device.memoryBandwidth =
      reader.number("memory_bandwidth", false, kMinBandwidth, kMaxBandwidth);
  device.memoryEfficiency = reader.efficiency("memory_efficiency");
  device.launchOverhead =
      reader.number("launch_overhead_s", true, 0, kMaxSeconds);
  device.gemmEfficiency = reader.efficiency("gemm_efficiency");
  device.gemmHalfWork =
      reader.number("gemm_half_work_flops", true, 0, kMaxFlops);
  // Optional, for the spec files written before it existed: absent (0),
  // the attention kernels run at the GEMMs' rate, and reports say so.
  device.attentionEfficiency = reader.has("attention_efficiency")
                                   ? reader.efficiency("attention_efficiency")
                                   : 0;
}

Error specError(StringRef fileName, const Twine &message) {
  return createStringError(inconvertibleErrorCode(), fileName + ": " + message);
}

} // namespace

Expected<ClusterSpec> parseClusterSpec(StringRef text, StringRef fileName) {
  Expected<json::Value> parsed = parseJson(text);
  if (!parsed)
    return specError(fileName,
                     "not valid JSON: " + toString(parsed.takeError()));
  const json::Object *object = parsed->getAsObject();
  if (!object)
    return specError(fileName, "expected a JSON object at the top level");

  ClusterSpec spec;
  std::optional<std::string> error;
  ObjectReader reader(*object, "",
                      {"name", "nodes", "devices_per_node", "device",
                       "intra_node", "inter_node"},
                      error);
  spec.name = reader.string("name");
  spec.nodes = reader.count("nodes", kMaxNodes);
  spec.devicesPerNode = reader.count("devices_per_node", kMaxDevicesPerNode);
  if (const json::Object *device = reader.nested("device"))
    readDevice(reader, *device, spec.device, error);
  if (const json::Object *intra = reader.nested("intra_node")) {
    ObjectReader link(*intra, "intra_node", {"name", "bandwidth", "latency_s"},
                      error);
    spec.intraNode.name = link.string("name");
    spec.intraNode.bandwidth =
        link.number("bandwidth", false, kMinBandwidth, kMaxBandwidth);
    spec.intraNode.latency = link.number("latency_s", true, 0, kMaxSeconds);
  }
  // A single node needs no NICs; inter_node is then optional.
  if (!object->get("inter_node")) {
    if (spec.nodes > 1)
      reader.fail("inter_node", "missing key (required when nodes > 1)");
  } else if (const json::Object *inter = reader.nested("inter_node")) {
    ObjectReader link(*inter, "inter_node",
                      {"name", "nics_per_node", "nic_bandwidth", "latency_s"},
                      error);
    spec.interNodeName = link.string("name");
    spec.nicsPerNode = link.count("nics_per_node", 1 << 10);
    spec.nicBandwidth =
        link.number("nic_bandwidth", false, kMinBandwidth, kMaxBandwidth);
    spec.interNodeLatency = link.number("latency_s", true, 0, kMaxSeconds);
  }
  if (error)
    return specError(fileName, *error);
  return spec;
}

//===----------------------------------------------------------------------===//
// Printing
//===----------------------------------------------------------------------===//

namespace {

/// The shortest text that reads back as exactly `value`: `2.039e12`,
/// `85899345920`, `0.75`, `4e-6`.
std::string formatNumber(double value) {
  char buffer[32];
  std::string scientific;
  for (int precision = 1; precision <= 17; ++precision) {
    std::snprintf(buffer, sizeof(buffer), "%.*g", precision, value);
    if (std::strtod(buffer, nullptr) == value)
      break;
  }
  scientific = buffer;
  // "1.95e+13" -> "1.95e13", "4e-06" -> "4e-6".
  size_t e = scientific.find('e');
  if (e != std::string::npos) {
    std::string mantissa = scientific.substr(0, e);
    StringRef exponent = StringRef(scientific).drop_front(e + 1);
    bool negative = exponent.consume_front("-");
    exponent.consume_front("+");
    exponent = exponent.ltrim('0');
    scientific = mantissa + "e" + (negative ? "-" : "") + exponent.str();
  }
  if (value == std::floor(value) && std::fabs(value) < 1e15) {
    std::string integer = std::to_string(static_cast<int64_t>(value));
    if (integer.size() <= scientific.size())
      return integer;
  }
  return scientific;
}

void number(json::OStream &out, StringRef key, double value) {
  out.attributeBegin(key);
  out.rawValue(formatNumber(value));
  out.attributeEnd();
}

} // namespace

std::string printClusterSpec(const ClusterSpec &spec) {
  std::string text;
  raw_string_ostream os(text);
  json::OStream out(os, /*IndentSize=*/2);
  out.object([&] {
    out.attribute("name", spec.name);
    out.attribute("nodes", spec.nodes);
    out.attribute("devices_per_node", spec.devicesPerNode);
    const DeviceSpec &device = spec.device;
    out.attributeObject("device", [&] {
      out.attribute("name", device.name);
      out.attributeObject("peak_flops", [&] {
        number(out, "fp32", device.peakFlopsFP32);
        number(out, "tf32", device.peakFlopsTF32);
        number(out, "bf16", device.peakFlopsBF16);
        number(out, "fp16", device.peakFlopsFP16);
      });
      number(out, "memory_bytes", device.memoryBytes);
      number(out, "memory_bandwidth", device.memoryBandwidth);
      number(out, "memory_efficiency", device.memoryEfficiency);
      number(out, "launch_overhead_s", device.launchOverhead);
      number(out, "gemm_efficiency", device.gemmEfficiency);
      number(out, "gemm_half_work_flops", device.gemmHalfWork);
      if (device.attentionEfficiency > 0)
        number(out, "attention_efficiency", device.attentionEfficiency);
    });
    out.attributeObject("intra_node", [&] {
      out.attribute("name", spec.intraNode.name);
      number(out, "bandwidth", spec.intraNode.bandwidth);
      number(out, "latency_s", spec.intraNode.latency);
    });
    if (spec.nicsPerNode > 0)
      out.attributeObject("inter_node", [&] {
        out.attribute("name", spec.interNodeName);
        out.attribute("nics_per_node", spec.nicsPerNode);
        number(out, "nic_bandwidth", spec.nicBandwidth);
        number(out, "latency_s", spec.interNodeLatency);
      });
  });
  os << "\n";
  return text;
}

//===----------------------------------------------------------------------===//
// Presets
//===----------------------------------------------------------------------===//
//
// Sources:
//  [A100]  NVIDIA A100 Tensor Core GPU datasheet (80GB SXM column): dense
//          FP32 19.5 TFLOP/s, TF32 156, BF16/FP16 312; 80 GB HBM2e at
//          2,039 GB/s; NVLink 600 GB/s (both directions together).
//  [DGXA]  NVIDIA DGX A100 User Guide, "Hardware Overview": 8 A100 SXM4,
//          6 NVSwitches, 8 single-port ConnectX-6 HDR InfiniBand 200 Gb/s
//          for the compute fabric.
//  [H100]  NVIDIA H100 Tensor Core GPU Architecture whitepaper, table
//          "H100 SXM5": dense FP32 66.9 TFLOP/s, TF32 494.7, BF16/FP16
//          989.4; 80 GB HBM3 at 3.35 TB/s; NVLink 4 900 GB/s (both
//          directions together).
//  [DGXH]  NVIDIA DGX H100/H200 User Guide, "Hardware Overview": 8 GPUs,
//          4 NVSwitches, 8 single-port ConnectX-7 400 Gb/s NDR InfiniBand.
//  [H200]  NVIDIA H200 Tensor Core GPU datasheet: H100's SXM compute,
//          141 GB HBM3e at 4.8 TB/s, NVLink 900 GB/s.
//  [NCCL]  NCCL src/graph/tuning.cc, hwLat: per-step latency of the ring
//          with the Simple protocol (the one NCCL uses for the MB-sized
//          buffers of training) is 3.4 us over NVLink and 9.6 us over the
//          network (0.5 and 2.7 us with the LL protocol for tiny messages).
//  [MEGA]  Narayanan et al., "Efficient Large-Scale Language Model Training
//          on GPU Clusters Using Megatron-LM" (SC'21): 52% of A100 peak
//          end to end for GPT models; large cuBLAS GEMMs reach 70-80% of the
//          tensor-core peak on A100 and H100, small ones far less.
//  [CUDA]  Kernel launch overhead is a few microseconds (CUDA C++ Best
//          Practices Guide; nsys shows ~3-5 us between dependent kernels).
//  [STREAM] A STREAM-like copy reaches ~80-90% of the HBM datasheet
//          bandwidth on A100/H100 (e.g. BabelStream results).
//  [FA2]   T. Dao, "FlashAttention-2", arXiv 2307.08691, §4.1: on A100 the
//          forward reaches 50-73% of the peak and the backward up to 63%,
//          counting a causal kernel's work as half the score matrix; the
//          low end at the 2-8k-token causal sequences of training.
//  [FA3]   J. Shah et al., "FlashAttention-3", arXiv 2407.08608, abstract:
//          FlashAttention-2 reaches only 35% of the H100's peak (it uses the
//          Ampere-generation mma.sync instructions, not Hopper's wgmma).
//
// gemm_half_work_flops is an engineering estimate of where cuBLAS reaches
// half of its large-GEMM rate (a 1024^3 GEMM is 2.1 GFLOP and does not fill
// an H100's 132 SMs with 128x256 tiles); loom-calibrate measures the real
// value on CPUs, and a GPU calibration is future work. What a small GEMM
// loses is time, not work: the launch, the pipeline's fill and drain, the
// last wave of tiles. So the H100's is the A100's in time, 2e9 FLOPs at
// the A100's large-GEMM rate (8.5 us), at the H100's rate: 5.9e9 FLOPs.
// (4e9, 5.8 us of it, made the H100's small GEMMs faster than its large
// ones allow for, part of why its preset was optimistic where the A100's
// was not.)

namespace {

constexpr double GiB = 1024.0 * 1024.0 * 1024.0;

/// What the three DGX presets share.
ClusterSpec dgxNode() {
  ClusterSpec spec;
  spec.nodes = 1;
  spec.devicesPerNode = 8;            // [DGXA], [DGXH]
  spec.device.launchOverhead = 4e-6;  // [CUDA]
  spec.device.memoryEfficiency = 0.8; // [STREAM]
  spec.intraNode.latency = 3.4e-6;    // [NCCL] NVLink, ring, Simple
  spec.nicsPerNode = 8;               // [DGXA], [DGXH]: one NIC per GPU
  spec.interNodeLatency = 9.6e-6;     // [NCCL] network, ring, Simple
  return spec;
}

ClusterSpec a100Preset() {
  ClusterSpec spec = dgxNode();
  spec.name = "a100-80g";
  DeviceSpec &device = spec.device;
  device.name = "NVIDIA A100-SXM4-80GB";
  device.peakFlopsFP32 = 19.5e12;    // [A100]
  device.peakFlopsTF32 = 156e12;     // [A100]
  device.peakFlopsBF16 = 312e12;     // [A100]
  device.peakFlopsFP16 = 312e12;     // [A100]
  device.memoryBytes = 80 * GiB;     // [A100] (nvidia-smi: 81920 MiB)
  device.memoryBandwidth = 2.039e12; // [A100]
  device.gemmEfficiency = 0.75;      // [MEGA]
  device.gemmHalfWork = 2e9;         // estimate, see above
  device.attentionEfficiency = 0.5;  // [FA2]
  spec.intraNode.name = "NVSwitch (NVLink 3)";
  spec.intraNode.bandwidth = 300e9; // [A100] 600 GB/s bidirectional
  spec.interNodeName = "8 x HDR InfiniBand 200 Gb/s";
  spec.nicBandwidth = 25e9; // [DGXA] 200 Gb/s = 25 GB/s
  return spec;
}

ClusterSpec h100Preset() {
  ClusterSpec spec = dgxNode();
  spec.name = "h100-80g";
  DeviceSpec &device = spec.device;
  device.name = "NVIDIA H100 80GB HBM3";
  device.peakFlopsFP32 = 66.9e12;    // [H100]
  device.peakFlopsTF32 = 494.7e12;   // [H100]
  device.peakFlopsBF16 = 989.4e12;   // [H100]
  device.peakFlopsFP16 = 989.4e12;   // [H100]
  device.memoryBytes = 80 * GiB;     // [H100]
  device.memoryBandwidth = 3.35e12;  // [H100]
  device.gemmEfficiency = 0.7;       // [MEGA]
  device.gemmHalfWork = 5.9e9;       // the A100's 8.5 us, see above
  device.attentionEfficiency = 0.35; // [FA3]
  spec.intraNode.name = "NVSwitch (NVLink 4)";
  spec.intraNode.bandwidth = 450e9; // [H100] 900 GB/s bidirectional
  spec.interNodeName = "8 x NDR InfiniBand 400 Gb/s";
  spec.nicBandwidth = 50e9; // [DGXH] 400 Gb/s = 50 GB/s
  return spec;
}

ClusterSpec h200Preset() {
  ClusterSpec spec = h100Preset(); // [H200]: same compute and links
  spec.name = "h200";
  spec.device.name = "NVIDIA H200";
  spec.device.memoryBytes = 141e9;      // [H200]
  spec.device.memoryBandwidth = 4.8e12; // [H200]
  return spec;
}

/// This machine, one device per core. The per-core numbers are conservative
/// guesses for a current x86 server core running OpenBLAS single-threaded;
/// `loom-calibrate` measures the real ones (docs/cluster-spec.md).
ClusterSpec cpuLocalPreset() {
  ClusterSpec spec;
  spec.name = "cpu-local";
  spec.nodes = 1;
  spec.devicesPerNode =
      std::max<int64_t>(1, std::thread::hardware_concurrency());
  DeviceSpec &device = spec.device;
  device.name = "CPU core (" + sys::getHostCPUName().str() + ")";
  // One AVX2 core: 2 FMA units x 8 lanes x 2 FLOPs x ~2.5 GHz = 80 GFLOP/s;
  // OpenBLAS sgemm sustains most of it. bf16/fp16/tf32 run in fp32 on the
  // CPU backend, so they share its peak.
  device.peakFlopsFP32 = device.peakFlopsTF32 = device.peakFlopsBF16 =
      device.peakFlopsFP16 = 50e9;
  long pages = sysconf(_SC_PHYS_PAGES), pageSize = sysconf(_SC_PAGE_SIZE);
  double physical = pages > 0 && pageSize > 0
                        ? static_cast<double>(pages) * pageSize
                        : 4 * GiB * spec.devicesPerNode;
  device.memoryBytes = std::floor(physical / spec.devicesPerNode);
  // A core's share of DRAM bandwidth when every core streams at once
  // (8 DDR4/DDR5 channels, ~200 GB/s, over tens of cores).
  device.memoryBandwidth = 5e9;
  device.memoryEfficiency = 0.8;
  device.launchOverhead = 1e-6; // a function call plus loop setup, generous
  device.gemmEfficiency = 0.8;
  device.gemmHalfWork = 1e7;        // OpenBLAS is near full speed by ~256^3
  device.attentionEfficiency = 0.8; // the GEMMs' rate, not measured
  // MPI between processes of one host: a copy through shared memory.
  spec.intraNode.name = "shared memory";
  spec.intraNode.bandwidth = 2e9;
  spec.intraNode.latency = 1e-6;
  return spec;
}

} // namespace

std::vector<std::string> presetNames() {
  return {"a100-80g", "h100-80g", "h200", "cpu-local"};
}

Expected<ClusterSpec> getPreset(StringRef name) {
  if (name == "a100-80g")
    return a100Preset();
  if (name == "h100-80g")
    return h100Preset();
  if (name == "h200")
    return h200Preset();
  if (name == "cpu-local")
    return cpuLocalPreset();
  return createStringError(inconvertibleErrorCode(),
                           "unknown cluster preset '" + name +
                               "' (known: " + llvm::join(presetNames(), ", ") +
                               "; or a FILE.json)");
}

//===----------------------------------------------------------------------===//
// --cluster arguments
//===----------------------------------------------------------------------===//

Expected<ClusterSpec> resolveClusterSpec(StringRef argument) {
  // `BASE[:NODES]`; a BASE ending in .json or holding a '/' is a file.
  StringRef base = argument;
  std::optional<int64_t> nodes;
  if (!argument.ends_with(".json")) {
    auto [head, tail] = argument.rsplit(':');
    if (head.size() != argument.size()) {
      int64_t count;
      if (tail.getAsInteger(10, count) || count <= 0)
        return createStringError(inconvertibleErrorCode(),
                                 "--cluster '" + argument +
                                     "': the node count after ':' must be a "
                                     "positive integer");
      if (count > kMaxNodes)
        return createStringError(
            inconvertibleErrorCode(),
            "--cluster '" + argument + "': the node count " + Twine(count) +
                " is more than the " + Twine(kMaxNodes) + " Loom plans for");
      base = head;
      nodes = count;
    }
  }
  if (base.empty())
    return createStringError(inconvertibleErrorCode(),
                             "--cluster '" + argument +
                                 "': expected PRESET[:NODES] or "
                                 "FILE.json[:NODES]");

  Expected<ClusterSpec> spec = [&]() -> Expected<ClusterSpec> {
    if (!base.ends_with(".json") && !base.contains('/'))
      return getPreset(base);
    Expected<std::unique_ptr<MemoryBuffer>> buffer =
        readInputFile(base, kMaxJsonFileBytes);
    if (!buffer)
      return buffer.takeError();
    return parseClusterSpec((*buffer)->getBuffer(), base);
  }();
  if (!spec || !nodes)
    return spec;
  if (*nodes > 1 && spec->nicsPerNode == 0)
    return createStringError(
        inconvertibleErrorCode(),
        "--cluster '" + argument + "': '" + spec->name +
            "' has no inter_node link, so it cannot span " + Twine(*nodes) +
            " nodes");
  spec->nodes = *nodes;
  return spec;
}

} // namespace loom::cost
