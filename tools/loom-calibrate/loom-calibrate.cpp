//===- loom-calibrate.cpp - Measure this machine, write a cluster spec ----===//
//
//   mpirun -np N loom-calibrate -o SPEC.json [--name NAME] [--quick]
//                               [--ranks-per-node R]
//   mpirun -np N loom-calibrate --check SPEC [--sizes LIST] [--bytes LIST]
//
// Every MPI rank is one device (a CPU core). Measures single-threaded
// OpenBLAS GEMMs, a memory-bound triad and MPI collectives, fits the cost
// model's parameters (docs/cluster-spec.md, "Calibrating") and writes them
// as a cluster spec; or, with --check, prints the times a spec predicts next
// to measured ones. Errors: one line on stderr, exit 1, no output file.
//
//===----------------------------------------------------------------------===//

#include "Fit.h"
#include "Measure.h"

#include "loom/CostModel/ClusterSpec.h"
#include "loom/CostModel/Collectives.h"
#include "loom/CostModel/OpCost.h"
#include "loom/Support/AtomicFile.h"

#include "llvm/ADT/StringExtras.h"
#include "llvm/Support/CommandLine.h"
#include "llvm/Support/FileSystem.h"
#include "llvm/Support/FormatVariadic.h"
#include "llvm/Support/InitLLVM.h"
#include "llvm/Support/Path.h"
#include "llvm/Support/WithColor.h"
#include "llvm/TargetParser/Host.h"

#include <cblas.h>
#include <mpi.h>

#include <cmath>
#include <unistd.h>

using namespace llvm;
using namespace loom;
using namespace loom::calibrate;
using cost::Collective;

namespace {
cl::OptionCategory category("loom-calibrate options");

cl::opt<std::string> outputPath("o", cl::cat(category), cl::value_desc("file"),
                                cl::desc("Write the measured cluster spec "
                                         "here (JSON, docs/cluster-spec.md)"));
cl::opt<std::string> specName("name", cl::init("cpu-calibrated"),
                              cl::cat(category),
                              cl::desc("The spec's \"name\" (default "
                                       "cpu-calibrated)"));
cl::opt<bool> quick("quick", cl::cat(category),
                    cl::desc("Fewer sizes and samples: seconds instead of "
                             "a minute, noisier numbers"));
cl::opt<int> ranksPerNode(
    "ranks-per-node", cl::init(0), cl::cat(category),
    cl::desc("Treat each R consecutive ranks as one node instead of the "
             "ranks that share memory (one host standing in for several "
             "nodes, e.g. one per socket)"));
cl::opt<std::string> checkSpec(
    "check", cl::cat(category), cl::value_desc("spec"),
    cl::desc("Instead of writing a spec, print the times SPEC (FILE.json or "
             "a preset) predicts next to measured ones"));
cl::opt<std::string> gemmSizes(
    "sizes", cl::cat(category), cl::value_desc("list"),
    cl::desc("With --check: GEMM shapes, comma-separated N (square) or "
             "MxNxK (default 48,160,320,640,896,200x700x300,1500x100x400)"));
cl::opt<std::string> messageBytes(
    "bytes", cl::cat(category), cl::value_desc("list"),
    cl::desc("With --check: message sizes of the collectives in bytes, "
             "comma-separated (default 24,3000,100000,3000000)"));

struct GemmShape {
  int64_t m, n, k;
  double flops() const { return 2.0 * m * n * k; }
};

const Collective allCollectives[] = {
    Collective::AllReduce, Collective::AllGather, Collective::ReduceScatter,
    Collective::AllToAll,  Collective::Broadcast, Collective::SendRecv};

/// The collectives whose ring formulas the link's α and β are fitted to.
bool fitsLink(Collective kind) {
  return kind != Collective::AllToAll && kind != Collective::Broadcast;
}

//===----------------------------------------------------------------------===//
// Ranks agreeing on errors
//===----------------------------------------------------------------------===//

/// Rank 0's verdict, on every rank. Only rank 0 prints errors.
bool agree(const Topology &topology, std::optional<std::string> error) {
  int ok = !error;
  MPI_Bcast(&ok, 1, MPI_INT, 0, MPI_COMM_WORLD);
  if (topology.rank == 0 && error)
    WithColor::error(errs(), "loom-calibrate") << *error << "\n";
  return ok;
}

//===----------------------------------------------------------------------===//
// Formatting
//===----------------------------------------------------------------------===//

std::string seconds(double s) {
  if (s < 1e-6)
    return formatv("{0:F1} ns", s * 1e9).str();
  if (s < 1e-3)
    return formatv("{0:F2} us", s * 1e6).str();
  if (s < 1)
    return formatv("{0:F2} ms", s * 1e3).str();
  return formatv("{0:F2} s", s).str();
}

std::string bytesText(int64_t bytes) {
  if (bytes >= (1 << 20) && bytes % (1 << 20) == 0)
    return formatv("{0} MiB", bytes >> 20).str();
  if (bytes >= 1024 && bytes % 1024 == 0)
    return formatv("{0} KiB", bytes >> 10).str();
  return formatv("{0} B", bytes).str();
}

std::string shapeText(const GemmShape &shape) {
  return formatv("{0}x{1}x{2}", shape.m, shape.n, shape.k).str();
}

//===----------------------------------------------------------------------===//
// Sizes
//===----------------------------------------------------------------------===//

Expected<std::vector<GemmShape>> parseShapes(StringRef text) {
  std::vector<GemmShape> shapes;
  SmallVector<StringRef> items, dims;
  text.split(items, ',');
  for (StringRef item : items) {
    dims.clear();
    item.trim().split(dims, 'x');
    SmallVector<int64_t, 3> values;
    for (StringRef dim : dims) {
      int64_t value;
      if (dim.getAsInteger(10, value) || value <= 0 || value > 65536)
        return createStringError(inconvertibleErrorCode(),
                                 "--sizes: '" + item +
                                     "' is not N or MxNxK with dimensions "
                                     "in 1..65536");
      values.push_back(value);
    }
    if (values.size() == 1)
      shapes.push_back({values[0], values[0], values[0]});
    else if (values.size() == 3)
      shapes.push_back({values[0], values[1], values[2]});
    else
      return createStringError(inconvertibleErrorCode(),
                               "--sizes: '" + item +
                                   "' is not N or MxNxK with dimensions in "
                                   "1..65536");
  }
  return shapes;
}

Expected<std::vector<int64_t>> parseBytes(StringRef text) {
  std::vector<int64_t> sizes;
  SmallVector<StringRef> items;
  text.split(items, ',');
  for (StringRef item : items) {
    int64_t value;
    if (item.trim().getAsInteger(10, value) || value <= 0 ||
        value > (int64_t(1) << 30))
      return createStringError(inconvertibleErrorCode(),
                               "--bytes: '" + item +
                                   "' is not a byte count in 1..2^30");
    sizes.push_back(value);
  }
  return sizes;
}

/// Elements of a triad whose three arrays, over all ranks of a node, are
/// four times the last-level cache (so it streams from DRAM), but use at
/// most an eighth of the rank's share of memory.
int64_t streamingElements(const Topology &topology) {
  long cache = sysconf(_SC_LEVEL3_CACHE_SIZE);
  if (cache <= 0)
    cache = 64 << 20;
  double elements = 4.0 * cache / (12.0 * topology.localSize);
  long pages = sysconf(_SC_PHYS_PAGES), pageSize = sysconf(_SC_PAGE_SIZE);
  if (pages > 0 && pageSize > 0)
    elements = std::min(elements,
                        double(pages) * pageSize / topology.localSize / 8 / 12);
  return std::max<int64_t>(int64_t(1) << 22, int64_t(elements));
}

/// The node's memory per rank, the smallest over nodes.
double memoryPerRank(const Topology &topology) {
  long pages = sysconf(_SC_PHYS_PAGES), pageSize = sysconf(_SC_PAGE_SIZE);
  double mine = std::floor(double(pages) * pageSize / topology.localSize);
  double least;
  MPI_Allreduce(&mine, &least, 1, MPI_DOUBLE, MPI_MIN, MPI_COMM_WORLD);
  return least;
}

/// `value` to 4 significant digits: the measurements' noise is larger.
double significant(double value) {
  std::string text = formatv("{0:E3}", value).str();
  return std::strtod(text.c_str(), nullptr);
}

/// The α and β coefficients of `kind` over `ranks` in the cost model's ring
/// formula (ringCost is linear in α and 1/B).
Sample ringSample(Collective kind, int64_t bytes, int ranks, double t) {
  int64_t p = kind == Collective::SendRecv ? 2 : ranks;
  double n = double(bytes);
  double beta = cost::ringCost(kind, n, p, {"", 1, 0}).seconds;
  double alpha = cost::ringCost(kind, n, p, {"", 1, 1}).seconds - beta;
  return {alpha, beta, t};
}

//===----------------------------------------------------------------------===//
// Calibration
//===----------------------------------------------------------------------===//

struct LinkFit {
  double latency = 0, bandwidth = 0, relativeError = 0;
};

std::optional<LinkFit> toLink(std::optional<Fit> fit) {
  if (!fit)
    return std::nullopt;
  return LinkFit{fit->theta0, 1 / fit->theta1, fit->relativeError};
}

/// Measures the collectives over `comm` at `sizes`; fits one α–β pair to the
/// ring formulas of all of them (the link) and one per collective (shown).
std::optional<LinkFit>
measureLink(MPI_Comm comm, int ranks, ArrayRef<int64_t> sizes,
            const TimingOptions &timing,
            std::vector<std::pair<Collective, std::optional<LinkFit>>> &each) {
  std::vector<Sample> joint;
  for (Collective kind : allCollectives) {
    std::vector<Sample> samples;
    for (int64_t size : sizes) {
      int64_t bytes = roundMessage(size, ranks);
      double t = timeCollective(kind, bytes, comm, timing);
      samples.push_back(ringSample(kind, bytes, ranks, t));
    }
    each.push_back({kind, toLink(fitNonNegative(samples))});
    if (fitsLink(kind))
      llvm::append_range(joint, samples);
  }
  return toLink(fitNonNegative(joint));
}

void printLink(raw_ostream &os, const LinkFit &link) {
  os << formatv("alpha {0}, bandwidth {1:F3} GB/s per direction (fit error "
                "{2:F1}%)\n",
                seconds(link.latency), link.bandwidth / 1e9,
                100 * link.relativeError);
}

/// Checks that `path` can be written before minutes of measuring.
std::optional<std::string> checkWritable(StringRef path) {
  SmallString<128> directory = sys::path::parent_path(path);
  if (directory.empty())
    directory = ".";
  if (sys::fs::is_directory(path))
    return (path + ": is a directory").str();
  if (!sys::fs::is_directory(directory))
    return (path + ": directory '" + directory + "' does not exist").str();
  if (std::error_code error =
          sys::fs::access(directory, sys::fs::AccessMode::Write))
    return (path + ": " + error.message()).str();
  return std::nullopt;
}

int calibrateMode(const Topology &topology) {
  bool root = topology.rank == 0;
  if (!agree(topology, root ? checkWritable(outputPath) : std::nullopt))
    return 1;
  TimingOptions timing;
  if (quick)
    timing = {5, 1e-4};
  raw_ostream &out = root ? outs() : nulls();
  out << formatv("loom-calibrate: {0} ranks, {1} node(s) of {2}; {3}\n",
                 topology.size, topology.numNodes, topology.localSize,
                 StringRef(openblas_get_config()).trim());
  out.flush();

  // GEMM: t = L + (W + h)/rate, fitted as t = a + b·W.
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
  std::vector<Sample> gemm;
  for (const GemmShape &shape : shapes)
    gemm.push_back(
        {1, shape.flops(), timeGemm(shape.m, shape.n, shape.k, timing)});

  // Kernel launch: the intercept of triads small enough for L1/L2.
  std::vector<Sample> small, large;
  for (int64_t n : {16, 64, 256, 1024, 4096})
    small.push_back({1, 12.0 * n, timeTriad(n, timing)});
  // Memory: triads streaming from DRAM, slope with the launch fixed.
  int64_t streaming = streamingElements(topology);
  for (double scale :
       quick ? std::vector<double>{1, 1.5} : std::vector<double>{1, 1.5, 2}) {
    int64_t n = int64_t(scale * streaming);
    large.push_back({1, 12.0 * n, timeTriad(n, timing)});
  }

  std::vector<int64_t> sizes;
  for (int64_t bytes = 8; bytes <= (quick ? (1 << 21) : (1 << 23));
       bytes *= quick ? 16 : 4)
    sizes.push_back(bytes);
  std::vector<std::pair<Collective, std::optional<LinkFit>>> intraEach,
      interEach;
  std::optional<LinkFit> intra;
  if (topology.localSize > 1)
    intra = measureLink(topology.node, topology.localSize, sizes, timing,
                        intraEach);
  std::optional<LinkFit> inter;
  if (topology.numNodes > 1) {
    std::vector<Sample> samples;
    for (int64_t bytes : sizes)
      samples.push_back(ringSample(Collective::SendRecv, bytes, 2,
                                   timeCollective(Collective::SendRecv, bytes,
                                                  topology.across, timing)));
    inter = toLink(fitNonNegative(samples));
  }
  double memory = memoryPerRank(topology);
  if (!root)
    return agree(topology, std::nullopt) ? 0 : 1;

  // Everything below is rank 0's: the fits and the file.
  std::optional<Fit> launch = fitNonNegative(small);
  double launchOverhead = launch ? launch->theta0 : 0;
  std::optional<Fit> gemmFit = fitNonNegative(gemm);
  std::optional<Fit> memoryFit = fitSlope(large, launchOverhead);
  std::optional<std::string> error;
  if (!gemmFit)
    error = "GEMM times do not grow with the work; nothing to fit (another "
            "process busy on this machine?)";
  else if (!memoryFit)
    error = "triad times do not grow with the size; nothing to fit";
  else if (!intra)
    error = "the collectives' times do not grow with the message size; "
            "nothing to fit";
  else if (topology.numNodes > 1 && !inter)
    error = "the inter-node send/recv times do not grow with the message "
            "size; nothing to fit";
  if (error)
    return agree(topology, error) ? 0 : 1;

  // A CPU's datasheet peak is out of reach from here: the rates OpenBLAS and
  // the triad sustain are the peaks, at efficiency 1 (docs/cluster-spec.md).
  double gemmRate = significant(1 / gemmFit->theta1);
  double memoryRate = significant(1 / memoryFit->theta1);
  launchOverhead = significant(launchOverhead);
  cost::ClusterSpec spec;
  spec.name = specName;
  spec.nodes = topology.numNodes;
  spec.devicesPerNode = topology.localSize;
  cost::DeviceSpec &device = spec.device;
  device.name = "CPU core (" + sys::getHostCPUName().str() + ")";
  device.peakFlopsFP32 = device.peakFlopsTF32 = device.peakFlopsBF16 =
      device.peakFlopsFP16 = gemmRate;
  device.gemmEfficiency = 1;
  device.gemmHalfWork = significant(
      std::max(0.0, (gemmFit->theta0 - launchOverhead) / gemmFit->theta1));
  device.memoryBytes = memory;
  device.memoryBandwidth = memoryRate;
  device.memoryEfficiency = 1;
  device.launchOverhead = launchOverhead;
  spec.intraNode = {"shared memory (MPI, measured)",
                    significant(intra->bandwidth), significant(intra->latency)};
  if (inter) {
    // The pairs of a node ran at once: their sum is the node's bandwidth;
    // how many NICs carry it is not visible from here.
    spec.nicsPerNode = 1;
    spec.nicBandwidth = significant(inter->bandwidth * topology.localSize);
    spec.interNodeLatency = significant(inter->latency);
    spec.interNodeName = "network (MPI, measured)";
  }

  out << formatv("GEMM (cblas_sgemm, 1 thread per rank): {0:F2} GFLOP/s, "
                 "half-work {1:F3} MFLOP (fit error {2:F1}%)\n",
                 gemmRate / 1e9, device.gemmHalfWork / 1e6,
                 100 * gemmFit->relativeError);
  out << "kernel launch (small-triad intercept): " << seconds(launchOverhead)
      << "\n";
  out << formatv("memory (triad, all ranks at once): {0:F2} GB/s per rank "
                 "(fit error {1:F1}%)\n",
                 memoryRate / 1e9, 100 * memoryFit->relativeError);
  out << formatv("intra-node link ({0} ranks; ring fit of all-reduce, "
                 "all-gather, reduce-scatter, send/recv): ",
                 topology.localSize);
  printLink(out, *intra);
  for (auto &[kind, fit] : intraEach) {
    out << formatv("  {0,-15} ", stringifyCollective(kind));
    if (fit)
      printLink(out, *fit);
    else
      out << "no fit\n";
  }
  if (inter) {
    out << "inter-node link (one rank pair): ";
    printLink(out, *inter);
  }

  // The spec must read back, or the fit produced something invalid.
  std::string text = cost::printClusterSpec(spec);
  Expected<cost::ClusterSpec> reread = cost::parseClusterSpec(text, outputPath);
  if (!reread)
    error = "the fitted spec is invalid: " + toString(reread.takeError());
  else if (Error written = writeFileAtomically(
               outputPath, [&](raw_ostream &os) { os << text; }))
    error = toString(std::move(written));
  if (!error)
    out << "wrote " << outputPath << "\n";
  return agree(topology, error) ? 0 : 1;
}

//===----------------------------------------------------------------------===//
// --check
//===----------------------------------------------------------------------===//

void printRow(raw_ostream &os, StringRef what, StringRef size, double predicted,
              double measured) {
  os << formatv("{0,-28} {1,-14} {2,12} {3,12} {4,9:F2}\n", what, size,
                seconds(predicted), seconds(measured), predicted / measured);
}

int checkMode(const Topology &topology) {
  bool root = topology.rank == 0;
  std::optional<cost::ClusterSpec> spec;
  std::optional<std::string> error;
  if (root) {
    Expected<cost::ClusterSpec> resolved = cost::resolveClusterSpec(checkSpec);
    if (resolved)
      spec = *resolved;
    else
      error = toString(resolved.takeError());
  }
  Expected<std::vector<GemmShape>> shapes = parseShapes(
      gemmSizes.empty() ? "48,160,320,640,896,200x700x300,1500x100x400"
                        : StringRef(gemmSizes));
  Expected<std::vector<int64_t>> sizes =
      parseBytes(messageBytes.empty() ? "24,3000,100000,3000000"
                                      : StringRef(messageBytes));
  if (!error && !shapes)
    error = toString(shapes.takeError());
  if (!error && !sizes)
    error = toString(sizes.takeError());
  if (!agree(topology, error))
    return 1;
  consumeError(shapes.takeError());
  consumeError(sizes.takeError());

  TimingOptions timing;
  raw_ostream &out = root ? outs() : nulls();
  out << formatv("{0,-28} {1,-14} {2,12} {3,12} {4,9}\n", "what", "size",
                 "predicted", "measured", "pred/meas");
  for (const GemmShape &shape : *shapes) {
    double measured = timeGemm(shape.m, shape.n, shape.k, timing);
    if (!root)
      continue;
    cost::OpWork work{
        cost::OpClass::Gemm, shape.flops(), shape.flops(),
        4.0 * (shape.m * shape.k + shape.k * shape.n + shape.m * shape.n),
        cost::MathMode::FP32};
    printRow(out, "gemm fp32", shapeText(shape),
             cost::opTime(work, spec->device), measured);
  }
  for (int64_t n :
       {int64_t(1000), int64_t(100000), streamingElements(topology)}) {
    double measured = timeTriad(n, timing);
    if (!root)
      continue;
    cost::OpWork work{cost::OpClass::Bandwidth, 2.0 * n, 2.0 * n, 12.0 * n,
                      cost::MathMode::FP32};
    printRow(out, "triad", bytesText(12 * n), cost::opTime(work, spec->device),
             measured);
  }
  int p = topology.localSize;
  for (Collective kind : allCollectives) {
    if (p < 2)
      break;
    for (int64_t size : *sizes) {
      int64_t bytes = roundMessage(size, p);
      double measured = timeCollective(kind, bytes, topology.node, timing);
      if (!root)
        continue;
      cost::CollectiveCost predicted =
          kind == Collective::SendRecv
              ? cost::ringCost(kind, bytes, 2, spec->intraNode)
              : cost::collectiveCost(kind, bytes, {p, p}, *spec);
      printRow(out,
               formatv("{0} ({1})", stringifyCollective(kind),
                       stringifyAlgorithm(predicted.algorithm))
                   .str(),
               bytesText(bytes), predicted.seconds, measured);
    }
  }
  if (topology.numNodes > 1)
    for (int64_t size : *sizes) {
      int64_t bytes = roundMessage(size, 1);
      double measured =
          timeCollective(Collective::SendRecv, bytes, topology.across, timing);
      if (root)
        printRow(out, "send/recv across nodes", bytesText(bytes),
                 cost::ringCost(Collective::SendRecv, bytes, 2,
                                spec->interNodePerDevice())
                     .seconds,
                 measured);
    }
  return 0;
}

/// Flag combinations that make no sense, before MPI starts.
std::optional<std::string> checkFlags() {
  if (!checkSpec.empty() && !outputPath.empty())
    return "-o and --check exclude each other";
  if (checkSpec.empty() && outputPath.empty())
    return "give -o FILE (calibrate) or --check SPEC";
  if (checkSpec.empty() && (!gemmSizes.empty() || !messageBytes.empty()))
    return "--sizes and --bytes need --check";
  if (ranksPerNode < 0)
    return "--ranks-per-node must be positive";
  return std::nullopt;
}

/// Rank layouts loom-calibrate cannot describe as a cluster spec.
std::optional<std::string> topologyError(const Topology &topology) {
  if (!topology.uniform)
    return "nodes hold different numbers of ranks";
  if (topology.localSize < 2 && checkSpec.empty())
    return "needs at least 2 ranks per node to measure the intra-node link "
           "(mpirun -np 2 or more)";
  return std::nullopt;
}

} // namespace

int main(int argc, char **argv) {
  InitLLVM init(argc, argv);
  cl::HideUnrelatedOptions(category);
  // Flag errors are reported before MPI starts, once per process: run
  // without mpirun, that is once.
  if (!cl::ParseCommandLineOptions(
          argc, argv,
          "Measures this machine (every MPI rank one device) and writes a "
          "Loom cluster spec\n\n"
          "  mpirun -np N loom-calibrate -o SPEC.json [--name NAME] "
          "[--quick]\n"
          "  mpirun -np N loom-calibrate --check SPEC [--sizes LIST] "
          "[--bytes LIST]\n",
          &errs()))
    return 1;
  if (std::optional<std::string> error = checkFlags()) {
    WithColor::error(errs(), "loom-calibrate") << *error << "\n";
    return 1;
  }

  MPI_Init(&argc, &argv);
  openblas_set_num_threads(1); // one rank, one core
  Topology topology = Topology::discover(ranksPerNode);
  int status =
      agree(topology, topologyError(topology))
          ? (checkSpec.empty() ? calibrateMode(topology) : checkMode(topology))
          : 1;
  topology.release();
  MPI_Finalize();
  return status;
}
