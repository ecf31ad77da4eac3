//===- ClusterSpecTest.cpp - Cluster spec JSON, presets, --cluster --------===//

#include "loom/CostModel/ClusterSpec.h"

#include "TestFiles.h"

#include "llvm/Support/JSON.h"
#include "llvm/Support/MemoryBuffer.h"
#include "llvm/Support/raw_ostream.h"

#include <gtest/gtest.h>

#include <thread>

using namespace loom::cost;
using loom::unittest::TempDir;

namespace {

/// The text of examples/clusters/<name> (LOOM_EXAMPLES_DIR, absolute: a
/// path from __FILE__ is relative to the build under ccache's base_dir).
std::string readExample(llvm::StringRef name) {
  std::string path =
      (llvm::Twine(LOOM_EXAMPLES_DIR) + "/clusters/" + name).str();
  auto buffer = llvm::MemoryBuffer::getFile(path);
  if (!buffer) {
    ADD_FAILURE() << "cannot read " << path;
    return "";
  }
  return (*buffer)->getBuffer().str();
}

ClusterSpec preset(llvm::StringRef name) {
  llvm::Expected<ClusterSpec> spec = getPreset(name);
  if (!spec) {
    ADD_FAILURE() << llvm::toString(spec.takeError());
    return {};
  }
  return *spec;
}

/// The error message of parsing `text` as `x.json` (empty if it parsed).
std::string parseError(llvm::StringRef text) {
  llvm::Expected<ClusterSpec> spec = parseClusterSpec(text, "x.json");
  if (spec)
    return "";
  return llvm::toString(spec.takeError());
}

/// The a100-80g preset as JSON after `edit` changed it.
std::string editedA100(llvm::function_ref<void(llvm::json::Object &)> edit) {
  llvm::Expected<llvm::json::Value> value =
      llvm::json::parse(printClusterSpec(preset("a100-80g")));
  EXPECT_TRUE(static_cast<bool>(value));
  edit(*value->getAsObject());
  std::string text;
  llvm::raw_string_ostream os(text);
  os << *value;
  return text;
}

llvm::json::Object &member(llvm::json::Object &object, llvm::StringRef key) {
  return *object.getObject(key);
}

//===----------------------------------------------------------------------===//
// Presets and examples
//===----------------------------------------------------------------------===//

TEST(ClusterSpecTest, PresetNumbers) {
  EXPECT_EQ(presetNames(), (std::vector<std::string>{"a100-80g", "h100-80g",
                                                     "h200", "cpu-local"}));
  ClusterSpec a100 = preset("a100-80g");
  EXPECT_EQ(a100.nodes, 1);
  EXPECT_EQ(a100.devicesPerNode, 8);
  EXPECT_EQ(a100.numDevices(), 8);
  EXPECT_EQ(a100.device.peakFlops(MathMode::FP32), 19.5e12);
  EXPECT_EQ(a100.device.peakFlops(MathMode::TF32), 156e12);
  EXPECT_EQ(a100.device.peakFlops(MathMode::BF16), 312e12);
  EXPECT_EQ(a100.device.peakFlops(MathMode::FP16), 312e12);
  EXPECT_EQ(a100.device.memoryBytes, 85899345920.0);
  EXPECT_EQ(a100.intraNode.bandwidth, 300e9);
  EXPECT_EQ(a100.nicsPerNode, 8);
  EXPECT_EQ(a100.nicBandwidth, 25e9);

  ClusterSpec h100 = preset("h100-80g");
  EXPECT_EQ(h100.device.peakFlops(MathMode::BF16), 989.4e12);
  EXPECT_EQ(h100.device.peakFlops(MathMode::TF32), 494.7e12);
  EXPECT_EQ(h100.device.memoryBandwidth, 3.35e12);
  EXPECT_EQ(h100.intraNode.bandwidth, 450e9);
  EXPECT_EQ(h100.nicBandwidth, 50e9);

  // A GEMM's ramp (launch, fill, last wave) takes the same time on both:
  // the work at which each reaches half its large-GEMM rate, over that rate.
  auto ramp = [](const DeviceSpec &d) {
    return d.gemmHalfWork / (d.gemmEfficiency * d.peakFlops(MathMode::BF16));
  };
  EXPECT_NEAR(ramp(h100.device), ramp(a100.device), 0.01 * ramp(a100.device));

  ClusterSpec h200 = preset("h200");
  EXPECT_EQ(h200.device.peakFlops(MathMode::BF16), 989.4e12);
  EXPECT_EQ(h200.device.memoryBytes, 141e9);
  EXPECT_EQ(h200.device.memoryBandwidth, 4.8e12);
}

TEST(ClusterSpecTest, CpuLocalDescribesThisMachine) {
  ClusterSpec cpu = preset("cpu-local");
  EXPECT_EQ(cpu.devicesPerNode,
            std::max<int64_t>(1, std::thread::hardware_concurrency()));
  EXPECT_GT(cpu.device.memoryBytes, 0);
  EXPECT_EQ(cpu.nicsPerNode, 0);
  EXPECT_EQ(cpu.intraNode.name, "shared memory");
  // Its printed form has no inter_node and parses back.
  std::string text = printClusterSpec(cpu);
  EXPECT_EQ(text.find("inter_node"), std::string::npos) << text;
  llvm::Expected<ClusterSpec> parsed = parseClusterSpec(text, "cpu.json");
  ASSERT_TRUE(static_cast<bool>(parsed)) << llvm::toString(parsed.takeError());
  EXPECT_EQ(printClusterSpec(*parsed), text);
}

TEST(ClusterSpecTest, ExamplesAreThePresets) {
  for (llvm::StringRef name : {"a100-80g", "h100-80g", "h200"}) {
    std::string text = readExample((name + ".json").str());
    llvm::Expected<ClusterSpec> parsed = parseClusterSpec(text, name);
    ASSERT_TRUE(static_cast<bool>(parsed))
        << llvm::toString(parsed.takeError());
    std::string expected = printClusterSpec(preset(name));
    EXPECT_EQ(printClusterSpec(*parsed), expected);
    // The files are the printer's output, byte for byte.
    EXPECT_EQ(text, expected);
  }
}

TEST(ClusterSpecTest, RoundTripIsExact) {
  for (const std::string &name : presetNames()) {
    std::string text = printClusterSpec(preset(name));
    llvm::Expected<ClusterSpec> parsed = parseClusterSpec(text, name);
    ASSERT_TRUE(static_cast<bool>(parsed))
        << llvm::toString(parsed.takeError());
    EXPECT_EQ(printClusterSpec(*parsed), text);
  }
  // Numbers with no short decimal form come back bit for bit.
  ClusterSpec spec = preset("a100-80g");
  spec.device.gemmEfficiency = 1.0 / 3.0;
  spec.device.launchOverhead = 1e-300;
  spec.device.memoryBandwidth = 123456789.123456789;
  spec.intraNode.latency = 0;
  spec.nodes = 16;
  llvm::Expected<ClusterSpec> parsed =
      parseClusterSpec(printClusterSpec(spec), "x.json");
  ASSERT_TRUE(static_cast<bool>(parsed)) << llvm::toString(parsed.takeError());
  EXPECT_EQ(parsed->device.gemmEfficiency, 1.0 / 3.0);
  EXPECT_EQ(parsed->device.launchOverhead, 1e-300);
  EXPECT_EQ(parsed->device.memoryBandwidth, 123456789.123456789);
  EXPECT_EQ(parsed->intraNode.latency, 0);
  EXPECT_EQ(parsed->nodes, 16);
}

TEST(ClusterSpecTest, NumbersPrintShort) {
  std::string text = printClusterSpec(preset("a100-80g"));
  for (llvm::StringRef expected :
       {"\"fp32\": 1.95e13", "\"memory_bytes\": 85899345920",
        "\"memory_bandwidth\": 2.039e12", "\"gemm_efficiency\": 0.75",
        "\"launch_overhead_s\": 4e-6", "\"bandwidth\": 3e11"})
    EXPECT_NE(text.find(expected.str()), std::string::npos)
        << expected.str() << " in\n"
        << text;
}

TEST(ClusterSpecTest, InterNodePerDevice) {
  ClusterSpec spec = preset("a100-80g");
  LinkSpec link = spec.interNodePerDevice();
  EXPECT_EQ(link.name, "8 x HDR InfiniBand 200 Gb/s");
  EXPECT_EQ(link.bandwidth, 25e9); // 8 NICs of 25 GB/s over 8 GPUs
  EXPECT_EQ(link.latency, 9.6e-6);
  spec.nicsPerNode = 2; // 2 NICs shared by 8 devices
  EXPECT_EQ(spec.interNodePerDevice().bandwidth, 2 * 25e9 / 8);
  // Without NICs nothing crosses nodes.
  EXPECT_EQ(preset("cpu-local").interNodePerDevice().bandwidth, 0);
}

//===----------------------------------------------------------------------===//
// Errors
//===----------------------------------------------------------------------===//

TEST(ClusterSpecTest, NotAnObject) {
  std::string error = parseError("{");
  EXPECT_EQ(error.rfind("x.json: not valid JSON: [1:1, byte=1]: ", 0), 0u)
      << error;
  EXPECT_EQ(parseError("[1]"),
            "x.json: expected a JSON object at the top level");
}

TEST(ClusterSpecTest, MissingKeysNameTheirPath) {
  EXPECT_EQ(parseError(editedA100([](llvm::json::Object &spec) {
              member(member(spec, "device"), "peak_flops").erase("bf16");
            })),
            "x.json: device.peak_flops.bf16: missing key");
  EXPECT_EQ(parseError(editedA100([](llvm::json::Object &spec) {
              member(spec, "device").erase("memory_bandwidth");
            })),
            "x.json: device.memory_bandwidth: missing key");
  EXPECT_EQ(parseError(editedA100(
                [](llvm::json::Object &spec) { spec.erase("intra_node"); })),
            "x.json: intra_node: missing key");
  EXPECT_EQ(parseError(editedA100([](llvm::json::Object &spec) {
              member(spec, "inter_node").erase("latency_s");
            })),
            "x.json: inter_node.latency_s: missing key");
  EXPECT_EQ(parseError(editedA100(
                [](llvm::json::Object &spec) { spec.erase("name"); })),
            "x.json: name: missing key");
}

TEST(ClusterSpecTest, AttentionEfficiencyIsOptional) {
  // A spec file written before the key existed: attention at the GEMMs'
  // rate.
  llvm::Expected<ClusterSpec> parsed =
      parseClusterSpec(editedA100([](llvm::json::Object &spec) {
                         member(spec, "device").erase("attention_efficiency");
                       }),
                       "x.json");
  ASSERT_TRUE(static_cast<bool>(parsed)) << llvm::toString(parsed.takeError());
  // It stays unset (0), so that reports can tell the GEMMs' rate from a
  // measured one, and prints back without it.
  EXPECT_EQ(parsed->device.attentionEfficiency, 0);
  EXPECT_EQ(parsed->device.attentionEfficiencyOrGemm(), 0.75);
  EXPECT_EQ(printClusterSpec(*parsed).find("attention_efficiency"),
            std::string::npos);
  EXPECT_EQ(preset("a100-80g").device.attentionEfficiency, 0.5);
}

TEST(ClusterSpecTest, UnknownKeys) {
  EXPECT_EQ(parseError(editedA100([](llvm::json::Object &spec) {
              member(spec, "device")["peak_flop"] = 1.0;
            })),
            "x.json: device.peak_flop: unknown key (known: name, peak_flops, "
            "memory_bytes, memory_bandwidth, memory_efficiency, "
            "launch_overhead_s, gemm_efficiency, gemm_half_work_flops, "
            "attention_efficiency)");
  EXPECT_EQ(parseError(editedA100([](llvm::json::Object &spec) {
              member(member(spec, "device"), "peak_flops")["int8"] = 1.0;
            })),
            "x.json: device.peak_flops.int8: unknown key (known: fp32, tf32, "
            "bf16, fp16)");
  EXPECT_EQ(parseError(
                editedA100([](llvm::json::Object &spec) { spec["gpus"] = 8; })),
            "x.json: gpus: unknown key (known: name, nodes, devices_per_node, "
            "device, intra_node, inter_node)");
  EXPECT_EQ(parseError(editedA100([](llvm::json::Object &spec) {
              member(spec, "inter_node")["bandwidth"] = 1.0;
            })),
            "x.json: inter_node.bandwidth: unknown key (known: name, "
            "nics_per_node, nic_bandwidth, latency_s)");
}

TEST(ClusterSpecTest, BadValues) {
  // 1e400 reads as infinity: not a bad sign, a number out of any range.
  std::string infinite = printClusterSpec(preset("a100-80g"));
  size_t at = infinite.find("\"memory_bytes\": ") + 16;
  infinite.replace(at, infinite.find(',', at) - at, "1e400");
  llvm::Expected<ClusterSpec> parsed = parseClusterSpec(infinite, "x.json");
  ASSERT_FALSE(bool(parsed));
  EXPECT_EQ(llvm::toString(parsed.takeError()),
            "x.json: device.memory_bytes: must be a finite number");
  EXPECT_EQ(parseError(editedA100([](llvm::json::Object &spec) {
              member(member(spec, "device"), "peak_flops")["bf16"] = 0.0;
            })),
            "x.json: device.peak_flops.bf16: must be a positive number");
  EXPECT_EQ(parseError(editedA100([](llvm::json::Object &spec) {
              member(spec, "device")["memory_bytes"] = "80 GB";
            })),
            "x.json: device.memory_bytes: must be a positive number");
  EXPECT_EQ(parseError(editedA100([](llvm::json::Object &spec) {
              member(spec, "intra_node")["bandwidth"] = -1.0;
            })),
            "x.json: intra_node.bandwidth: must be a positive number");
  EXPECT_EQ(parseError(editedA100([](llvm::json::Object &spec) {
              member(spec, "intra_node")["latency_s"] = -1e-6;
            })),
            "x.json: intra_node.latency_s: must be a non-negative number");
  EXPECT_EQ(parseError(editedA100([](llvm::json::Object &spec) {
              member(spec, "device")["gemm_efficiency"] = 1.5;
            })),
            "x.json: device.gemm_efficiency: must be a number in (0, 1]");
  EXPECT_EQ(parseError(editedA100([](llvm::json::Object &spec) {
              member(spec, "device")["attention_efficiency"] = 0.0;
            })),
            "x.json: device.attention_efficiency: must be a number in (0, 1]");
  EXPECT_EQ(parseError(editedA100([](llvm::json::Object &spec) {
              member(spec, "device")["memory_efficiency"] = 0.0;
            })),
            "x.json: device.memory_efficiency: must be a number in (0, 1]");
  EXPECT_EQ(parseError(editedA100(
                [](llvm::json::Object &spec) { spec["nodes"] = 2.5; })),
            "x.json: nodes: must be a positive integer");
  EXPECT_EQ(parseError(editedA100([](llvm::json::Object &spec) {
              spec["devices_per_node"] = 0;
            })),
            "x.json: devices_per_node: must be a positive integer");
  EXPECT_EQ(parseError(editedA100([](llvm::json::Object &spec) {
              member(spec, "inter_node")["nics_per_node"] = 0;
            })),
            "x.json: inter_node.nics_per_node: must be a positive integer");
  EXPECT_EQ(parseError(
                editedA100([](llvm::json::Object &spec) { spec["name"] = 3; })),
            "x.json: name: must be a string");
  EXPECT_EQ(parseError(editedA100(
                [](llvm::json::Object &spec) { spec["device"] = "A100"; })),
            "x.json: device: must be an object");
}

TEST(ClusterSpecTest, ZeroOffsetsAreAllowed) {
  // Latencies, launch overhead and the GEMM half-work point may be 0 (the
  // term is ignored); rates and sizes may not.
  llvm::Expected<ClusterSpec> spec =
      parseClusterSpec(editedA100([](llvm::json::Object &spec) {
                         member(spec, "device")["launch_overhead_s"] = 0;
                         member(spec, "device")["gemm_half_work_flops"] = 0;
                         member(spec, "intra_node")["latency_s"] = 0;
                         member(spec, "inter_node")["latency_s"] = 0;
                       }),
                       "x.json");
  ASSERT_TRUE(static_cast<bool>(spec)) << llvm::toString(spec.takeError());
  EXPECT_EQ(spec->device.launchOverhead, 0);
  EXPECT_EQ(spec->interNodeLatency, 0);
}

TEST(ClusterSpecTest, InterNodeIsOptionalForOneNode) {
  std::string oneNode =
      editedA100([](llvm::json::Object &spec) { spec.erase("inter_node"); });
  llvm::Expected<ClusterSpec> spec = parseClusterSpec(oneNode, "x.json");
  ASSERT_TRUE(static_cast<bool>(spec)) << llvm::toString(spec.takeError());
  EXPECT_EQ(spec->nicsPerNode, 0);
  EXPECT_EQ(printClusterSpec(*spec).find("inter_node"), std::string::npos);

  EXPECT_EQ(parseError(editedA100([](llvm::json::Object &spec) {
              spec.erase("inter_node");
              spec["nodes"] = 2;
            })),
            "x.json: inter_node: missing key (required when nodes > 1)");
}

//===----------------------------------------------------------------------===//
// --cluster arguments
//===----------------------------------------------------------------------===//

std::string resolveError(llvm::StringRef argument) {
  llvm::Expected<ClusterSpec> spec = resolveClusterSpec(argument);
  if (spec)
    return "";
  return llvm::toString(spec.takeError());
}

TEST(ClusterSpecTest, ResolvePresets) {
  llvm::Expected<ClusterSpec> one = resolveClusterSpec("h100-80g");
  ASSERT_TRUE(static_cast<bool>(one)) << llvm::toString(one.takeError());
  EXPECT_EQ(one->name, "h100-80g");
  EXPECT_EQ(one->nodes, 1);
  llvm::Expected<ClusterSpec> four = resolveClusterSpec("h100-80g:4");
  ASSERT_TRUE(static_cast<bool>(four)) << llvm::toString(four.takeError());
  EXPECT_EQ(four->nodes, 4);
  EXPECT_EQ(four->numDevices(), 32);
  llvm::Expected<ClusterSpec> cpu = resolveClusterSpec("cpu-local:1");
  ASSERT_TRUE(static_cast<bool>(cpu)) << llvm::toString(cpu.takeError());
}

TEST(ClusterSpecTest, ResolveFiles) {
  TempDir dir;
  std::string path = dir.file("two.json");
  {
    std::error_code error;
    llvm::raw_fd_ostream os(path, error);
    ASSERT_FALSE(error) << error.message();
    os << printClusterSpec(preset("a100-80g"));
  }
  llvm::Expected<ClusterSpec> file = resolveClusterSpec(path);
  ASSERT_TRUE(static_cast<bool>(file)) << llvm::toString(file.takeError());
  EXPECT_EQ(file->name, "a100-80g");
  EXPECT_EQ(file->nodes, 1);
  llvm::Expected<ClusterSpec> three = resolveClusterSpec(path + ":3");
  ASSERT_TRUE(static_cast<bool>(three)) << llvm::toString(three.takeError());
  EXPECT_EQ(three->nodes, 3);

  std::string missing = dir.file("missing.json");
  EXPECT_EQ(resolveError(missing), missing + ": No such file or directory");
  EXPECT_EQ(resolveError(missing + ":2"),
            missing + ": No such file or directory");
}

TEST(ClusterSpecTest, ResolveErrors) {
  EXPECT_EQ(resolveError("v100"),
            "unknown cluster preset 'v100' (known: a100-80g, h100-80g, h200, "
            "cpu-local; or a FILE.json)");
  EXPECT_EQ(resolveError("a100-80g:0"),
            "--cluster 'a100-80g:0': the node count after ':' must be a "
            "positive integer");
  EXPECT_EQ(resolveError("a100-80g:abc"),
            "--cluster 'a100-80g:abc': the node count after ':' must be a "
            "positive integer");
  EXPECT_EQ(resolveError("a100-80g:"),
            "--cluster 'a100-80g:': the node count after ':' must be a "
            "positive integer");
  // The bound of a spec file's "nodes", before the device count could
  // overflow (2^63 - 1 and 2^61 nodes of 8 devices did).
  EXPECT_EQ(resolveError("a100-80g:70000"),
            "--cluster 'a100-80g:70000': the node count 70000 is more than "
            "the 65536 Loom plans for");
  EXPECT_EQ(resolveError("a100-80g:9223372036854775807"),
            "--cluster 'a100-80g:9223372036854775807': the node count "
            "9223372036854775807 is more than the 65536 Loom plans for");
  EXPECT_EQ(resolveError("a100-80g:2305843009213693952"),
            "--cluster 'a100-80g:2305843009213693952': the node count "
            "2305843009213693952 is more than the 65536 Loom plans for");
  EXPECT_EQ(resolveError("a100-80g:99999999999999999999"),
            "--cluster 'a100-80g:99999999999999999999': the node count "
            "after ':' must be a positive integer");
  auto largest = resolveClusterSpec("a100-80g:65536");
  ASSERT_TRUE(bool(largest)) << llvm::toString(largest.takeError());
  EXPECT_EQ(largest->numDevices(), 65536 * 8);
  EXPECT_EQ(resolveError(":2"),
            "--cluster ':2': expected PRESET[:NODES] or FILE.json[:NODES]");
  EXPECT_EQ(resolveError(""),
            "--cluster '': expected PRESET[:NODES] or FILE.json[:NODES]");
  EXPECT_EQ(resolveError("cpu-local:2"),
            "--cluster 'cpu-local:2': 'cpu-local' has no inter_node link, so "
            "it cannot span 2 nodes");
}

} // namespace
