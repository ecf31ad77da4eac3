//===- Calibrate.cpp - Measure, fit and write a cluster spec --------------===//
//
// The models fitted (each the cost model's own formula, ClusterSpec.h,
// OpCost.cpp, Collectives.cpp):
//   GEMM of W FLOPs        t = L + (W + h) / rate        line in W
//   triad of b bytes       t = L + b / bandwidth         small: L; large: 1/bw
//   collective of n bytes  t = c_α(p)·α + c_β(p)·n / B   ring formulas
// A CPU's datasheet peak is out of reach from here, so the rates OpenBLAS
// and the triad sustain are written as the peaks, at efficiency 1.
//
//===----------------------------------------------------------------------===//

#include "Fit.h"
#include "Modes.h"

#include "loom/CostModel/ClusterSpec.h"
#include "loom/Support/AtomicFile.h"

#include "llvm/ADT/STLExtras.h"
#include "llvm/Support/FileSystem.h"
#include "llvm/Support/FormatVariadic.h"
#include "llvm/Support/Path.h"
#include "llvm/TargetParser/Host.h"

#include <cblas.h>

#include <cmath>

using namespace llvm;
using loom::cost::Collective;

namespace loom::calibrate {

namespace {

/// What every rank measures (the same numbers on every rank).
struct Measurements {
  std::vector<Sample> gemm, smallTriads, largeTriads;
  /// Per collective over the ranks of a node, in allCollectives' order.
  std::vector<std::vector<Sample>> intra;
  /// Send/recv between the nodes of a pair, all local ranks at once.
  std::vector<Sample> inter;
  double memoryPerRank = 0;
};

struct LinkFit {
  double latency = 0, bandwidth = 0, relativeError = 0;
};

/// What rank 0 fits, and the spec made of it.
struct Calibration {
  cost::ClusterSpec spec;
  Fit gemm, memory;
  LinkFit intra;
  std::vector<std::optional<LinkFit>> intraEach;
  std::optional<LinkFit> inter;
};

/// The α and β coefficients of `kind` over `ranks` in the cost model's ring
/// formula (ringCost is linear in α and 1/B).
Sample ringSample(Collective kind, int64_t bytes, int ranks, double t) {
  int64_t p = kind == Collective::SendRecv ? 2 : ranks;
  double n = double(bytes);
  double beta = cost::ringCost(kind, n, p, {"", 1, 0}).seconds;
  double alpha = cost::ringCost(kind, n, p, {"", 1, 1}).seconds - beta;
  return {alpha, beta, t};
}

Measurements measure(const Topology &topology, bool quick) {
  TimingOptions timing;
  if (quick)
    timing = {5, 1e-4};
  Measurements result;
  std::vector<GemmShape> shapes =
      quick ? std::vector<GemmShape>{{32, 32, 32},    {64, 64, 64},
                                     {128, 128, 128}, {256, 256, 256},
                                     {512, 512, 512}, {256, 64, 512}}
            : std::vector<GemmShape>{
                  {32, 32, 32},    {64, 64, 64},    {128, 128, 128},
                  {192, 192, 192}, {256, 256, 256}, {384, 384, 384},
                  {512, 512, 512}, {768, 768, 768}, {1024, 1024, 1024},
                  {1024, 256, 64}, {64, 512, 1024}, {256, 1024, 256},
                  {2048, 128, 256}};
  // These shapes take at most 12 MiB; one that cannot be allocated is
  // left out of the fit (every rank agrees on which).
  for (const GemmShape &shape : shapes)
    if (std::optional<double> time =
            timeGemm(shape.m, shape.n, shape.k, timing))
      result.gemm.push_back({1, shape.flops(), *time});

  // Small triads stay in L1/L2: their intercept is the launch overhead.
  for (int64_t n : {16, 64, 256, 1024, 4096})
    result.smallTriads.push_back({1, 12.0 * n, timeTriad(n, timing)});
  int64_t streaming = streamingElements(topology);
  for (double scale :
       quick ? std::vector<double>{1, 1.5} : std::vector<double>{1, 1.5, 2}) {
    int64_t n = int64_t(scale * streaming);
    result.largeTriads.push_back({1, 12.0 * n, timeTriad(n, timing)});
  }

  std::vector<int64_t> sizes; // 8 B to 8 MiB (2 MiB quick)
  for (int64_t bytes = 8; bytes <= (quick ? (1 << 21) : (1 << 23));
       bytes *= quick ? 16 : 4)
    sizes.push_back(bytes);
  for (Collective kind : allCollectives) {
    std::vector<Sample> &samples = result.intra.emplace_back();
    for (int64_t size : sizes) {
      int64_t bytes = roundMessage(size, topology.localSize);
      double t = timeCollective(kind, bytes, topology.node, timing);
      samples.push_back(ringSample(kind, bytes, topology.localSize, t));
    }
  }
  if (topology.numNodes > 1)
    for (int64_t bytes : sizes)
      result.inter.push_back(
          ringSample(Collective::SendRecv, bytes, 2,
                     timeCollective(Collective::SendRecv, bytes,
                                    topology.across, timing)));
  result.memoryPerRank = memoryPerRank(topology);
  return result;
}

std::optional<LinkFit> fitLink(ArrayRef<Sample> samples) {
  std::optional<Fit> fit = fitNonNegative(samples);
  if (!fit)
    return std::nullopt;
  return LinkFit{fit->theta0, 1 / fit->theta1, fit->relativeError};
}

/// The collectives whose ring formulas the link's α and β are fitted to;
/// MPI's all-to-all and broadcast follow other algorithms.
bool fitsLink(Collective kind) {
  return kind != Collective::AllToAll && kind != Collective::Broadcast;
}

/// `value` to 4 significant digits: the measurements' noise is larger.
double significant(double value) {
  std::string text = formatv("{0:E3}", value).str();
  return std::strtod(text.c_str(), nullptr);
}

Error fitError(const Twine &what) {
  return createStringError(inconvertibleErrorCode(),
                           what + " do not grow with the size; nothing to "
                                  "fit (another process busy here?)");
}

Expected<Calibration> fit(const Measurements &measured,
                          const Topology &topology,
                          const CalibrateOptions &options) {
  Calibration result;
  std::optional<Fit> launch = fitNonNegative(measured.smallTriads);
  double launchOverhead = significant(launch ? launch->theta0 : 0);
  std::optional<Fit> gemm = fitNonNegative(measured.gemm);
  if (!gemm)
    return fitError("GEMM times");
  std::optional<Fit> memory = fitSlope(measured.largeTriads, launchOverhead);
  if (!memory)
    return fitError("triad times");
  // The links' α and β come from the time left after the reduction
  // arithmetic, which the cost model charges to the device's memory
  // (cost::reductionTime). x1 is the ring's (p-1)/p·n bytes over the link,
  // twice for an all-reduce. At most half a sample is taken away, so noise
  // cannot make a time negative.
  cost::DeviceSpec measuredMemory;
  measuredMemory.memoryBandwidth = 1 / memory->theta1;
  measuredMemory.memoryEfficiency = 1;
  const int64_t p = topology.localSize;
  std::vector<Sample> joint;
  for (auto [kind, measuredSamples] :
       llvm::zip(allCollectives, measured.intra)) {
    std::vector<Sample> samples = measuredSamples;
    if (p > 1)
      for (Sample &sample : samples) {
        double share =
            kind == Collective::AllReduce ? sample.x1 / 2 : sample.x1;
        double n = share * double(p) / double(p - 1);
        sample.t -= std::min(0.5 * sample.t,
                             cost::reductionTime(kind, n, p, measuredMemory));
      }
    result.intraEach.push_back(fitLink(samples));
    if (fitsLink(kind))
      llvm::append_range(joint, samples);
  }
  std::optional<LinkFit> intra = fitLink(joint);
  if (!intra)
    return fitError("collective times");
  if (topology.numNodes > 1) {
    result.inter = fitLink(measured.inter);
    if (!result.inter)
      return fitError("inter-node send/recv times");
  }
  result.gemm = *gemm;
  result.memory = *memory;
  result.intra = *intra;

  cost::ClusterSpec &spec = result.spec;
  spec.name = options.name;
  spec.nodes = topology.numNodes;
  spec.devicesPerNode = topology.localSize;
  cost::DeviceSpec &device = spec.device;
  device.name = "CPU core (" + sys::getHostCPUName().str() + ")";
  // bf16/fp16/tf32 run in fp32 on the CPU backend.
  device.peakFlopsFP32 = device.peakFlopsTF32 = device.peakFlopsBF16 =
      device.peakFlopsFP16 = significant(1 / gemm->theta1);
  device.gemmEfficiency = 1;
  // Attention is not measured: the GEMMs' rate.
  device.attentionEfficiency = 1;
  // a = L + h/rate.
  device.gemmHalfWork = significant(
      std::max(0.0, (gemm->theta0 - launchOverhead) / gemm->theta1));
  device.memoryBytes = measured.memoryPerRank;
  device.memoryBandwidth = significant(1 / memory->theta1);
  device.memoryEfficiency = 1;
  device.launchOverhead = launchOverhead;
  spec.intraNode = {"shared memory (MPI, measured)",
                    significant(intra->bandwidth), significant(intra->latency)};
  if (result.inter) {
    // The pairs of a node ran at once: their sum is the node's bandwidth;
    // how many NICs carry it is not visible from here.
    spec.nicsPerNode = 1;
    spec.nicBandwidth =
        significant(result.inter->bandwidth * topology.localSize);
    spec.interNodeLatency = significant(result.inter->latency);
    spec.interNodeName = "network (MPI, measured)";
  }
  return result;
}

void printLink(raw_ostream &os, const LinkFit &link) {
  os << formatv("alpha {0}, bandwidth {1:F3} GB/s per direction (fit error "
                "{2:F1}%)\n",
                formatSeconds(link.latency), link.bandwidth / 1e9,
                100 * link.relativeError);
}

void printSummary(raw_ostream &os, const Calibration &calibration,
                  const Topology &topology) {
  const cost::DeviceSpec &device = calibration.spec.device;
  os << formatv("GEMM (cblas_sgemm, 1 thread per rank): {0:F2} GFLOP/s, "
                "half-work {1:F3} MFLOP (fit error {2:F1}%)\n",
                device.peakFlopsFP32 / 1e9, device.gemmHalfWork / 1e6,
                100 * calibration.gemm.relativeError);
  os << "kernel launch (small-triad intercept): "
     << formatSeconds(device.launchOverhead) << "\n";
  os << formatv("memory (triad, all ranks at once): {0:F2} GB/s per rank "
                "(fit error {1:F1}%)\n",
                device.memoryBandwidth / 1e9,
                100 * calibration.memory.relativeError);
  os << formatv("intra-node link ({0} ranks; ring fit of all-reduce, "
                "all-gather, reduce-scatter, send/recv): ",
                topology.localSize);
  printLink(os, calibration.intra);
  for (auto [kind, link] : llvm::zip(allCollectives, calibration.intraEach)) {
    os << formatv("  {0,-15} ", stringifyCollective(kind));
    if (link)
      printLink(os, *link);
    else
      os << "no fit\n";
  }
  if (calibration.inter) {
    os << "inter-node link (one rank pair): ";
    printLink(os, *calibration.inter);
  }
}

/// Checks that `path` can be written before a minute of measuring.
std::optional<std::string> checkWritable(StringRef path) {
  if (Error error = loom::checkOutputFile(path))
    return toString(std::move(error));
  return std::nullopt;
}

/// Rank 0's part: fit, print, check the spec reads back, write it.
std::optional<std::string> fitAndWrite(const Measurements &measured,
                                       const Topology &topology,
                                       const CalibrateOptions &options) {
  Expected<Calibration> calibration = fit(measured, topology, options);
  if (!calibration)
    return toString(calibration.takeError());
  printSummary(outs(), *calibration, topology);
  std::string text = cost::printClusterSpec(calibration->spec);
  Expected<cost::ClusterSpec> reread =
      cost::parseClusterSpec(text, options.outputPath);
  if (!reread)
    return "the fitted spec is invalid: " + toString(reread.takeError());
  if (Error error = writeFileAtomically(options.outputPath,
                                        [&](raw_ostream &os) { os << text; }))
    return toString(std::move(error));
  outs() << "wrote " << options.outputPath << "\n";
  return std::nullopt;
}

} // namespace

int runCalibration(const Topology &topology, const CalibrateOptions &options) {
  bool root = topology.rank == 0;
  if (!agree(topology, root ? checkWritable(options.outputPath) : std::nullopt))
    return 1;
  if (root) {
    outs() << formatv("loom-calibrate: {0} ranks, {1} node(s) of {2}; {3}\n",
                      topology.size, topology.numNodes, topology.localSize,
                      StringRef(openblas_get_config()).trim());
    outs().flush();
  }
  Measurements measured = measure(topology, options.quick);
  return agree(topology,
               root ? fitAndWrite(measured, topology, options) : std::nullopt)
             ? 0
             : 1;
}

} // namespace loom::calibrate
