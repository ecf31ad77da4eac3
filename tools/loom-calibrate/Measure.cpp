//===- Measure.cpp - Timing GEMMs, memory and MPI collectives -------------===//

#include "Measure.h"

#include "llvm/ADT/STLExtras.h"
#include "llvm/Support/FormatVariadic.h"
#include "llvm/Support/WithColor.h"

#include <cblas.h>

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <functional>
#include <memory>
#include <unistd.h>

namespace loom::calibrate {

namespace {

/// Values in [-1, 1) from a fixed linear congruential generator: never
/// zeros, which some kernels process faster than real data.
void fillRandom(float *values, size_t count, uint32_t seed) {
  uint32_t state = seed * 2654435761u + 1;
  for (size_t i = 0; i < count; ++i) {
    state = state * 1664525u + 1013904223u;
    values[i] = static_cast<float>(state >> 8) / float(1 << 23) - 1.0f;
  }
}

std::vector<float> randomFloats(size_t count, uint32_t seed) {
  std::vector<float> values(count);
  fillRandom(values.data(), count, seed);
  return values;
}

double slowest(MPI_Comm comm, double seconds) {
  double result;
  MPI_Allreduce(&seconds, &result, 1, MPI_DOUBLE, MPI_MAX, comm);
  return result;
}

double median(std::vector<double> values) {
  llvm::sort(values);
  size_t middle = values.size() / 2;
  return values.size() % 2 ? values[middle]
                           : (values[middle - 1] + values[middle]) / 2;
}

} // namespace

double timeTogether(MPI_Comm comm, llvm::function_ref<void()> run,
                    const TimingOptions &options) {
  run();
  run();
  MPI_Barrier(comm);
  double start = MPI_Wtime();
  run();
  double once = slowest(comm, MPI_Wtime() - start);
  // The same batch on every rank: `once` is already the slowest rank's.
  int batch = static_cast<int>(std::clamp(
      std::ceil(options.minSampleSeconds / std::max(once, 1e-9)), 1.0, 1e6));
  std::vector<double> samples;
  for (int sample = 0; sample < options.samples; ++sample) {
    MPI_Barrier(comm);
    start = MPI_Wtime();
    for (int i = 0; i < batch; ++i)
      run();
    samples.push_back(slowest(comm, (MPI_Wtime() - start) / batch));
  }
  return median(std::move(samples));
}

//===----------------------------------------------------------------------===//
// Topology
//===----------------------------------------------------------------------===//

Topology Topology::discover(int ranksPerNode) {
  Topology topology;
  MPI_Comm_rank(MPI_COMM_WORLD, &topology.rank);
  MPI_Comm_size(MPI_COMM_WORLD, &topology.size);
  if (ranksPerNode > 0)
    MPI_Comm_split(MPI_COMM_WORLD, topology.rank / ranksPerNode, topology.rank,
                   &topology.node);
  else
    MPI_Comm_split_type(MPI_COMM_WORLD, MPI_COMM_TYPE_SHARED, topology.rank,
                        MPI_INFO_NULL, &topology.node);
  MPI_Comm_rank(topology.node, &topology.localRank);
  MPI_Comm_size(topology.node, &topology.localSize);

  // Number the nodes by their first rank: the leaders' order.
  MPI_Comm leaders;
  MPI_Comm_split(MPI_COMM_WORLD, topology.localRank == 0 ? 0 : MPI_UNDEFINED,
                 topology.rank, &leaders);
  if (leaders != MPI_COMM_NULL) {
    MPI_Comm_rank(leaders, &topology.nodeIndex);
    MPI_Comm_size(leaders, &topology.numNodes);
    MPI_Comm_free(&leaders);
  }
  int numbers[2] = {topology.nodeIndex, topology.numNodes};
  MPI_Bcast(numbers, 2, MPI_INT, 0, topology.node);
  topology.nodeIndex = numbers[0];
  topology.numNodes = numbers[1];

  int sizes[2] = {topology.localSize, -topology.localSize}, extremes[2];
  MPI_Allreduce(sizes, extremes, 2, MPI_INT, MPI_MAX, MPI_COMM_WORLD);
  topology.uniform = extremes[0] == -extremes[1];

  MPI_Comm_split(MPI_COMM_WORLD, topology.localRank, topology.nodeIndex,
                 &topology.across);
  return topology;
}

bool agree(const Topology &topology, const std::optional<std::string> &error) {
  int ok = !error;
  MPI_Bcast(&ok, 1, MPI_INT, 0, MPI_COMM_WORLD);
  if (topology.rank == 0 && error)
    llvm::WithColor::error(llvm::errs(), "loom-calibrate") << *error << "\n";
  return ok;
}

void Topology::release() {
  if (node != MPI_COMM_NULL)
    MPI_Comm_free(&node);
  if (across != MPI_COMM_NULL)
    MPI_Comm_free(&across);
}

//===----------------------------------------------------------------------===//
// Local kernels
//===----------------------------------------------------------------------===//

std::optional<double> timeGemm(int64_t m, int64_t n, int64_t k,
                               const TimingOptions &options) {
  // A failed allocation is a result every rank agrees on, not the
  // out-of-memory abort std::vector's would be (and no rank waits in a
  // collective for one that died).
  struct Free {
    void operator()(float *p) const { std::free(p); }
  };
  std::unique_ptr<float[], Free> a, b, c;
  auto allocate = [](int64_t count, uint32_t seed) {
    std::unique_ptr<float[], Free> buffer(
        static_cast<float *>(std::malloc(size_t(count) * sizeof(float))));
    if (buffer)
      fillRandom(buffer.get(), size_t(count), seed);
    return buffer;
  };
  a = allocate(m * k, 1);
  b = allocate(k * n, 2);
  c = allocate(m * n, 3);
  int allocated = a && b && c;
  MPI_Allreduce(MPI_IN_PLACE, &allocated, 1, MPI_INT, MPI_MIN, MPI_COMM_WORLD);
  if (!allocated)
    return std::nullopt;
  return timeTogether(
      MPI_COMM_WORLD,
      [&] {
        cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, m, n, k, 1.0f,
                    a.get(), k, b.get(), n, 0.0f, c.get(), n);
      },
      options);
}

namespace {

/// Out of line, so that every call is a real call (a CPU "kernel launch").
[[gnu::noinline]] void triad(float *a, const float *b, const float *c,
                             float scalar, int64_t n) {
  for (int64_t i = 0; i < n; ++i)
    a[i] = b[i] + scalar * c[i];
}

} // namespace

double timeTriad(int64_t elements, const TimingOptions &options) {
  std::vector<float> a = randomFloats(elements, 4),
                     b = randomFloats(elements, 5),
                     c = randomFloats(elements, 6);
  return timeTogether(
      MPI_COMM_WORLD,
      [&] { triad(a.data(), b.data(), c.data(), 0.5f, elements); }, options);
}

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

double memoryPerRank(const Topology &topology) {
  long pages = sysconf(_SC_PHYS_PAGES), pageSize = sysconf(_SC_PAGE_SIZE);
  double mine = std::floor(double(pages) * pageSize / topology.localSize);
  double least;
  MPI_Allreduce(&mine, &least, 1, MPI_DOUBLE, MPI_MIN, MPI_COMM_WORLD);
  return least;
}

//===----------------------------------------------------------------------===//
// Collectives
//===----------------------------------------------------------------------===//

const cost::Collective allCollectives[6] = {
    cost::Collective::AllReduce,     cost::Collective::AllGather,
    cost::Collective::ReduceScatter, cost::Collective::AllToAll,
    cost::Collective::Broadcast,     cost::Collective::SendRecv};

int64_t roundMessage(int64_t bytes, int ranks) {
  int64_t unit = 4 * int64_t(ranks);
  return std::max<int64_t>(1, (bytes + unit - 1) / unit) * unit;
}

double timeCollective(cost::Collective kind, int64_t bytes, MPI_Comm comm,
                      const TimingOptions &options) {
  int rank, size;
  MPI_Comm_rank(comm, &rank);
  MPI_Comm_size(comm, &size);
  int floats = static_cast<int>(bytes / 4), share = floats / size;
  std::vector<float> send = randomFloats(floats, 7 + rank), receive(floats);
  int partner = rank ^ 1;
  std::function<void()> run;
  using cost::Collective;
  switch (kind) {
  case Collective::AllReduce:
    run = [&] {
      MPI_Allreduce(send.data(), receive.data(), floats, MPI_FLOAT, MPI_SUM,
                    comm);
    };
    break;
  case Collective::AllGather:
    run = [&] {
      MPI_Allgather(send.data(), share, MPI_FLOAT, receive.data(), share,
                    MPI_FLOAT, comm);
    };
    break;
  case Collective::ReduceScatter:
    run = [&] {
      MPI_Reduce_scatter_block(send.data(), receive.data(), share, MPI_FLOAT,
                               MPI_SUM, comm);
    };
    break;
  case Collective::AllToAll:
    run = [&] {
      MPI_Alltoall(send.data(), share, MPI_FLOAT, receive.data(), share,
                   MPI_FLOAT, comm);
    };
    break;
  case Collective::Broadcast:
    run = [&] { MPI_Bcast(send.data(), floats, MPI_FLOAT, 0, comm); };
    break;
  case Collective::SendRecv:
    run = [&] {
      if (partner < size)
        MPI_Sendrecv(send.data(), floats, MPI_FLOAT, partner, 0, receive.data(),
                     floats, MPI_FLOAT, partner, 0, comm, MPI_STATUS_IGNORE);
    };
    break;
  }
  return timeTogether(MPI_COMM_WORLD, run, options);
}

//===----------------------------------------------------------------------===//
// Formatting
//===----------------------------------------------------------------------===//

std::string formatSeconds(double s) {
  if (s < 1e-6)
    return llvm::formatv("{0:F1} ns", s * 1e9).str();
  if (s < 1e-3)
    return llvm::formatv("{0:F2} us", s * 1e6).str();
  if (s < 1)
    return llvm::formatv("{0:F2} ms", s * 1e3).str();
  return llvm::formatv("{0:F2} s", s).str();
}

std::string formatBytes(int64_t bytes) {
  if (bytes >= (1 << 20) && bytes % (1 << 20) == 0)
    return llvm::formatv("{0} MiB", bytes >> 20).str();
  if (bytes >= 1024 && bytes % 1024 == 0)
    return llvm::formatv("{0} KiB", bytes >> 10).str();
  return llvm::formatv("{0} B", bytes).str();
}

} // namespace loom::calibrate
