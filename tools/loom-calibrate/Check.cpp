//===- Check.cpp - Predicted against measured times -----------------------===//
//
// Times GEMMs, triads and collectives at sizes of the user's choosing and
// prints them next to what the cost model predicts from a spec: opTime for
// the kernels, collectiveCost (the cheapest form) for the collectives,
// ringCost for point-to-point messages.
//
//===----------------------------------------------------------------------===//

#include "Modes.h"

#include "loom/CostModel/ClusterSpec.h"
#include "loom/CostModel/OpCost.h"

#include "llvm/Support/FormatVariadic.h"
#include "llvm/Support/WithColor.h"

using namespace llvm;
using loom::cost::Collective;

namespace loom::calibrate {

namespace {

Error shapeError(StringRef item) {
  return createStringError(inconvertibleErrorCode(),
                           "--sizes: '" + item +
                               "' is not N or MxNxK with dimensions in "
                               "1..1048576");
}

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
      if (dim.getAsInteger(10, value) || value <= 0 ||
          value > (int64_t(1) << 20))
        return shapeError(item);
      values.push_back(value);
    }
    if (values.size() == 1)
      shapes.push_back({values[0], values[0], values[0]});
    else if (values.size() == 3)
      shapes.push_back({values[0], values[1], values[2]});
    else
      return shapeError(item);
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

void printRow(raw_ostream &os, StringRef what, StringRef size, double predicted,
              double measured) {
  os << formatv("{0,-28} {1,-14} {2,12} {3,12} {4,9:F2}\n", what, size,
                formatSeconds(predicted), formatSeconds(measured),
                predicted / measured);
}

/// The spec and the sizes, or the first error (rank 0 decides).
struct CheckInputs {
  std::optional<cost::ClusterSpec> spec; // rank 0 only
  std::vector<GemmShape> shapes;
  std::vector<int64_t> bytes;
};

/// `memory`: the bytes of memory each rank has (memoryPerRank).
std::optional<std::string> readInputs(const Topology &topology,
                                      const CheckOptions &options,
                                      double memory, CheckInputs &inputs) {
  if (topology.rank == 0) {
    Expected<cost::ClusterSpec> spec = cost::resolveClusterSpec(options.spec);
    if (!spec)
      return toString(spec.takeError());
    inputs.spec = *spec;
  }
  Expected<std::vector<GemmShape>> shapes = parseShapes(
      options.shapes.empty() ? "48,160,320,640,896,200x700x300,1500x100x400"
                             : StringRef(options.shapes));
  if (!shapes)
    return toString(shapes.takeError());
  // Every rank of a node holds its three matrices at once: half of a
  // rank's share of memory leaves the rest of the machine room to run.
  for (const GemmShape &shape : *shapes)
    if (shape.bytes() > memory / 2)
      return formatv("--sizes {0}x{1}x{2}: its three fp32 matrices take "
                     "{3:f2} GiB on each rank, more than half of the {4:f2} "
                     "GiB of memory a rank has here",
                     shape.m, shape.n, shape.k, shape.bytes() / (1 << 30),
                     memory / (1 << 30))
          .str();
  inputs.shapes = std::move(*shapes);
  Expected<std::vector<int64_t>> bytes =
      parseBytes(options.bytes.empty() ? "24,3000,100000,3000000"
                                       : StringRef(options.bytes));
  if (!bytes)
    return toString(bytes.takeError());
  inputs.bytes = std::move(*bytes);
  return std::nullopt;
}

} // namespace

int runCheck(const Topology &topology, const CheckOptions &options) {
  CheckInputs inputs;
  // Every rank parses the same sizes; only rank 0's errors are printed.
  double memory = memoryPerRank(topology);
  if (!agree(topology, readInputs(topology, options, memory, inputs)))
    return 1;
  bool root = topology.rank == 0;
  const cost::ClusterSpec *spec = root ? &*inputs.spec : nullptr;
  raw_ostream &out = root ? outs() : nulls();
  TimingOptions timing;
  out << formatv("{0,-28} {1,-14} {2,12} {3,12} {4,9}\n", "what", "size",
                 "predicted", "measured", "pred/meas");

  for (const GemmShape &shape : inputs.shapes) {
    std::optional<double> time = timeGemm(shape.m, shape.n, shape.k, timing);
    if (!time) {
      if (root)
        WithColor::error(errs(), "loom-calibrate")
            << formatv("--sizes {0}x{1}x{2}: cannot allocate its three fp32 "
                       "matrices ({3:f2} GiB) on every rank\n",
                       shape.m, shape.n, shape.k, shape.bytes() / (1 << 30));
      return 1;
    }
    double measured = *time;
    if (root)
      printRow(out, "gemm fp32",
               formatv("{0}x{1}x{2}", shape.m, shape.n, shape.k).str(),
               cost::opTime({cost::OpClass::Gemm, shape.flops(), shape.flops(),
                             shape.bytes(), cost::MathMode::FP32},
                            spec->device),
               measured);
  }
  for (int64_t n :
       {int64_t(1000), int64_t(100000), streamingElements(topology)}) {
    double measured = timeTriad(n, timing);
    if (root)
      printRow(out, "triad", formatBytes(12 * n),
               cost::opTime({cost::OpClass::Bandwidth, 2.0 * n, 2.0 * n,
                             12.0 * n, cost::MathMode::FP32},
                            spec->device),
               measured);
  }

  int p = topology.localSize;
  for (Collective kind : allCollectives) {
    if (p < 2)
      break;
    for (int64_t size : inputs.bytes) {
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
               formatBytes(bytes), predicted.seconds, measured);
    }
  }
  if (topology.numNodes > 1)
    for (int64_t size : inputs.bytes) {
      int64_t bytes = roundMessage(size, 1);
      double measured =
          timeCollective(Collective::SendRecv, bytes, topology.across, timing);
      if (root)
        printRow(out, "send/recv across nodes", formatBytes(bytes),
                 cost::ringCost(Collective::SendRecv, bytes, 2,
                                spec->interNodePerDevice())
                     .seconds,
                 measured);
    }
  return 0;
}

} // namespace loom::calibrate
