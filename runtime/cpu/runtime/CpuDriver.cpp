//===- CpuDriver.cpp - The CPU backend as a driver ------------------------===//
//
// Host memory (CpuDevice) and, with MPI initialized, one MpiComm of the
// stage grid's groups; without MPI, a one-rank job without communication.
//
//===----------------------------------------------------------------------===//

#include "CpuDevice.h"
#include "Driver.h"
#include "comm/MpiComm.h"

namespace loom::rt {
namespace {

class CpuRank final : public RankBackend {
public:
  Device &device() override { return host; }
  const loom_comm *comm() const override { return mpi ? mpi->comm() : nullptr; }
  const char *commName() const override { return mpi ? "mpi" : "none"; }
  std::string commDetail() const override {
    return mpi ? mpi->lastError() : "";
  }

  CpuDevice host;
  std::unique_ptr<MpiComm> mpi;
};

class CpuDriver final : public Driver {
public:
  const char *name() const override { return "cpu"; }

  Status createRank(const Artifact &artifact,
                    const loom_session_options &options, int32_t &worldRank,
                    std::unique_ptr<RankBackend> &out) override {
    if (options.comm != LOOM_COMM_AUTO && options.comm != LOOM_COMM_MPI)
      return invalidArgument("the cpu backend talks over MPI only (comm "
                             "kind " +
                             std::to_string(options.comm) + ")");
    auto rank = std::make_unique<CpuRank>();
    int initialized = 0;
    MPI_Initialized(&initialized);
    worldRank = 0;
    if (initialized) {
      int size = 0;
      MPI_Comm_rank(MPI_COMM_WORLD, &worldRank);
      MPI_Comm_size(MPI_COMM_WORLD, &size);
      if (size != artifact.worldSize())
        return invalidArgument(
            "the artifact runs on " + std::to_string(artifact.worldSize()) +
            " ranks, but MPI started " + std::to_string(size));
      Status status;
      rank->mpi =
          MpiComm::create(MpiCommConfig::forStageGrid(
                              worldRank, artifact.gridShape, artifact.groups),
                          status);
      if (!rank->mpi)
        return status;
    }
    out = std::move(rank);
    return Status();
  }
};

} // namespace

Driver &cpuDriver() {
  static CpuDriver driver;
  return driver;
}

} // namespace loom::rt
