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

#include "Modes.h"

#include "llvm/Support/CommandLine.h"
#include "llvm/Support/FormatVariadic.h"
#include "llvm/Support/InitLLVM.h"
#include "llvm/Support/WithColor.h"

#include <cblas.h>
#include <mpi.h>

using namespace llvm;
using namespace loom::calibrate;

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
                    cl::desc("Fewer sizes and samples: faster, noisier"));
cl::opt<int> ranksPerNode(
    "ranks-per-node", cl::init(0), cl::cat(category),
    cl::desc("Treat each R consecutive ranks as one node instead of the "
             "ranks that share memory (one host standing in for several "
             "nodes, e.g. one per socket); R >= 1 must divide the ranks"));
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

/// Flag combinations that make no sense, before MPI starts.
std::optional<std::string> checkFlags() {
  if (!checkSpec.empty() && !outputPath.empty())
    return "-o and --check exclude each other";
  if (checkSpec.empty() && outputPath.empty())
    return "give -o FILE (calibrate) or --check SPEC";
  if (checkSpec.empty() && (!gemmSizes.empty() || !messageBytes.empty()))
    return "--sizes and --bytes need --check";
  return std::nullopt;
}

/// --ranks-per-node against the ranks mpirun started (every rank computes
/// the same answer).
std::optional<std::string> ranksPerNodeError(int numRanks) {
  if (!ranksPerNode.getNumOccurrences())
    return std::nullopt;
  if (ranksPerNode < 1)
    return formatv("--ranks-per-node {0}: must be at least 1",
                   ranksPerNode.getValue())
        .str();
  if (numRanks % ranksPerNode != 0)
    return formatv("--ranks-per-node {0} does not divide the {1} ranks "
                   "(mpirun -np) into whole nodes",
                   ranksPerNode.getValue(), numRanks)
        .str();
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
  int rank = 0, numRanks = 1;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  MPI_Comm_size(MPI_COMM_WORLD, &numRanks);
  // Needs the rank count; printed once, by rank 0.
  if (std::optional<std::string> error = ranksPerNodeError(numRanks)) {
    if (rank == 0)
      WithColor::error(errs(), "loom-calibrate") << *error << "\n";
    MPI_Finalize();
    return 1;
  }
  openblas_set_num_threads(1); // one rank, one core
  Topology topology =
      Topology::discover(ranksPerNode.getNumOccurrences() ? ranksPerNode : 0);
  int status = 1;
  if (agree(topology, topologyError(topology)))
    status = checkSpec.empty()
                 ? runCalibration(topology, {outputPath, specName, quick})
                 : runCheck(topology, {checkSpec, gemmSizes, messageBytes});
  topology.release();
  MPI_Finalize();
  return status;
}
