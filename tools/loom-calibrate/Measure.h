//===- Measure.h - Timing GEMMs, memory and MPI collectives -----*- C++ -*-===//
//
// The microbenchmarks behind loom-calibrate. Every rank is one device; local
// kernels run on all ranks at once (so that they share memory bandwidth as
// the ranks of a training job do), and every reported time is the slowest
// rank's median: an SPMD step waits for its slowest device.
//
//===----------------------------------------------------------------------===//

#ifndef LOOM_TOOLS_LOOM_CALIBRATE_MEASURE_H
#define LOOM_TOOLS_LOOM_CALIBRATE_MEASURE_H

#include "loom/CostModel/Collectives.h"

#include "llvm/ADT/STLFunctionalExtras.h"
#include "llvm/ADT/StringRef.h"

#include <mpi.h>

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

namespace loom::calibrate {

struct TimingOptions {
  /// Samples per measurement; the median is reported.
  int samples = 9;
  /// Calls are batched until one sample lasts at least this long, so that
  /// the clock's resolution and the barrier do not count.
  double minSampleSeconds = 2e-4;
};

/// Median seconds of one `run()` executed by every rank of `comm` at once:
/// two warm-up calls, then `samples` batches each started after a barrier
/// and timed as the slowest rank's. All ranks return the same value.
double timeTogether(MPI_Comm comm, llvm::function_ref<void()> run,
                    const TimingOptions &options);

/// Where this rank sits: its node (ranks sharing memory, or consecutive
/// groups of `ranksPerNode` when given) and its index there.
struct Topology {
  int rank = 0, size = 1;
  int nodeIndex = 0, numNodes = 1;
  int localRank = 0, localSize = 1;
  /// The ranks of this node.
  MPI_Comm node = MPI_COMM_NULL;
  /// The ranks with this rank's local index, one per node, by node.
  MPI_Comm across = MPI_COMM_NULL;
  /// False when nodes hold different numbers of ranks.
  bool uniform = true;

  static Topology discover(int ranksPerNode);
  void release();
};

/// Rank 0's verdict on every rank: true when `error` (only rank 0's counts)
/// is empty; rank 0 prints it.
bool agree(const Topology &topology, const std::optional<std::string> &error);

struct GemmShape {
  int64_t m, n, k;
  double flops() const { return 2.0 * m * n * k; }
  /// Bytes of A, B and C in fp32, each counted once.
  double bytes() const { return 4.0 * (m * k + k * n + m * n); }
};

/// Seconds of a row-major C[m,n] = A[m,k]·B[k,n] with cblas_sgemm on one
/// thread, on every rank at once; nullopt on every rank when some rank
/// could not allocate the matrices.
std::optional<double> timeGemm(int64_t m, int64_t n, int64_t k,
                               const TimingOptions &options);

/// Seconds of a triad a[i] = b[i] + s·c[i] over `elements` floats (12 bytes
/// per element moved: two reads and a write, STREAM's count), on every rank
/// at once.
double timeTriad(int64_t elements, const TimingOptions &options);

/// Elements of a triad whose three arrays, over all ranks of a node, are
/// four times the last-level cache (so that it streams from DRAM), using at
/// most an eighth of a rank's share of memory.
int64_t streamingElements(const Topology &topology);

/// Physical memory of a node over its ranks, the least over the nodes.
double memoryPerRank(const Topology &topology);

/// The six collectives, in the order they are measured and printed.
extern const cost::Collective allCollectives[6];

/// Seconds of one `kind` over `comm` of `bytes` bytes (the size the cost
/// model's collectiveCost means; a multiple of 4·size). SendRecv exchanges
/// `bytes` between ranks 2i and 2i+1 of `comm` at once (an odd last rank
/// idles). Every rank of MPI_COMM_WORLD calls it; `comm` may be one of
/// several disjoint communicators running concurrently.
double timeCollective(cost::Collective kind, int64_t bytes, MPI_Comm comm,
                      const TimingOptions &options);

/// `bytes` rounded up to a positive multiple of 4·ranks (whole floats for
/// every rank's share).
int64_t roundMessage(int64_t bytes, int ranks);

/// "12.35 us"-style text of a time.
std::string formatSeconds(double seconds);
/// "8 B", "48 KiB", "2 MiB" (exact multiples only), "3000 B".
std::string formatBytes(int64_t bytes);

} // namespace loom::calibrate

#endif // LOOM_TOOLS_LOOM_CALIBRATE_MEASURE_H
