//===- CudaDriver.cpp - The CUDA backend as a driver ----------------------===//
//
// libloom_cuda_driver.so: what libloom_runtime (loom_runtime.h) opens for a
// session of the cuda backend. One rank: its GPU (CudaDevice: one stream,
// a pool of allocations) and how it reaches the others, NCCL (NcclComm,
// with a watchdog) or MPI through host memory (StagedComm over an MpiComm).
// Without MPI, the rank of a one-rank job on `options.device`.
//
//===----------------------------------------------------------------------===//

#include "CudaDevice.h"
#include "Driver.h"
#include "Session.h"
#include "StagedComm.h"
#ifdef LOOM_HAVE_NCCL
#include "NcclComm.h"
#endif

#include <cuda_runtime.h>
#include <mpi.h>

#include <algorithm>

namespace loom::cuda_rt {
namespace {

using rt::Status;

/// One rank. Members go in reverse order: the communicators (which drain
/// their transfers on the stream) before the device and its stream.
class CudaRank final : public rt::RankBackend {
public:
  rt::Device &device() override { return gpu; }
  const loom_comm *comm() const override { return table; }
  const char *commName() const override { return name; }
  std::string commDetail() const override {
#ifdef LOOM_HAVE_NCCL
    if (nccl && !nccl->lastError().empty())
      return nccl->lastError();
#endif
    if (staged && !staged->lastError().empty())
      return staged->lastError();
    return "";
  }
  Status prepare(const rt::Session &session) override {
    // The kernels' scratch: 64 MiB covers all but a bf16 embedding_grad,
    // which accumulates its table in f32 there (4 * V * D bytes: 154 MB
    // for GPT-2's 50257 x 768); the table is a parameter, so 4 bytes per
    // element of the largest one covers it.
    int64_t scratchBytes = int64_t(64) << 20;
    for (const auto &entry : session.state)
      scratchBytes = std::max(scratchBytes, 4 * entry->spec.numElements());
    return gpu.createContext(scratchBytes);
  }

  CudaDevice gpu;
  std::unique_ptr<rt::MpiComm> hostComm;
  std::unique_ptr<StagedComm> staged;
#ifdef LOOM_HAVE_NCCL
  std::unique_ptr<NcclComm> nccl;
#endif
  const loom_comm *table = nullptr;
  const char *name = "none";
};

/// Picks this rank's GPU: `device`, or when it is negative the rank's
/// index among the ranks of its node modulo the node's GPUs; and tells
/// whether another rank of the node drives the same one (NCCL refuses
/// that). Collective over MPI_COMM_WORLD, also when it fails: "" or why.
std::string pickDevice(int &device, bool &shared) {
  MPI_Comm node = MPI_COMM_NULL;
  if (MPI_Comm_split_type(MPI_COMM_WORLD, MPI_COMM_TYPE_SHARED, 0,
                          MPI_INFO_NULL, &node) != MPI_SUCCESS)
    return "MPI_Comm_split_type failed";
  int local = 0, size = 0;
  MPI_Comm_rank(node, &local);
  MPI_Comm_size(node, &size);
  std::string error;
  if (device < 0) {
    int count = 0;
    if (cudaGetDeviceCount(&count) != cudaSuccess || count == 0)
      error = "no CUDA device on this node";
    else
      device = local % count;
  }
  std::vector<int> devices(size);
  MPI_Allgather(&device, 1, MPI_INT, devices.data(), 1, MPI_INT, node);
  MPI_Comm_free(&node);
  shared = std::count(devices.begin(), devices.end(), device) > 1;
  return error;
}

class CudaDriver final : public rt::Driver {
public:
  const char *name() const override { return "cuda"; }

  Status createRank(const rt::Artifact &artifact,
                    const loom_session_options &options, int32_t &worldRank,
                    std::unique_ptr<rt::RankBackend> &out) override {
    int initialized = 0;
    MPI_Initialized(&initialized);
    worldRank = 0;
    auto rank = std::make_unique<CudaRank>();
    if (!initialized) {
      if (artifact.worldSize() != 1)
        return rt::invalidArgument(
            "the artifact runs on " + std::to_string(artifact.worldSize()) +
            " ranks: start them with MPI (MPI_Init before the session)");
      LOOM_RETURN_IF_ERROR(rank->gpu.init(std::max(options.device, 0)));
      out = std::move(rank);
      return Status();
    }
    LOOM_RETURN_IF_ERROR(createMpiRank(artifact, options, *rank, worldRank));
    out = std::move(rank);
    return Status();
  }

private:
  Status createMpiRank(const rt::Artifact &a,
                       const loom_session_options &options, CudaRank &rank,
                       int32_t &worldRank) {
    int size = 0;
    MPI_Comm_rank(MPI_COMM_WORLD, &worldRank);
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    if (size != a.worldSize())
      return rt::invalidArgument(
          "the artifact runs on " + std::to_string(a.worldSize()) +
          " ranks, but MPI started " + std::to_string(size));
    int device = options.device;
    bool shared = false;
    std::string message = pickDevice(device, shared);
    Status status =
        message.empty() ? rank.gpu.init(device) : rt::invalidArgument(message);

    // Every rank takes the same path: the choice is collective, and so is
    // a rank's failure to set up its GPU (the others would wait for it in
    // the collective setup below).
    int anywhere[2] = {shared ? 1 : 0, status.ok() ? 0 : 1};
    MPI_Allreduce(MPI_IN_PLACE, anywhere, 2, MPI_INT, MPI_MAX, MPI_COMM_WORLD);
    LOOM_RETURN_IF_ERROR(status);
    if (anywhere[1])
      return rt::invalidArgument("another rank could not set up its GPU");
    bool sharedAnywhere = anywhere[0] != 0;
#ifdef LOOM_HAVE_NCCL
    bool haveNccl = true;
#else
    bool haveNccl = false;
#endif
    loom_comm_kind comm = options.comm;
    if (comm == LOOM_COMM_MPI)
      return rt::invalidArgument("the cuda backend talks over nccl or "
                                 "staged (MPI through host memory)");
    if (comm == LOOM_COMM_AUTO)
      comm = haveNccl && !sharedAnywhere ? LOOM_COMM_NCCL : LOOM_COMM_STAGED;
    if (comm == LOOM_COMM_NCCL && !haveNccl)
      return rt::unavailable("this CUDA driver was built without NCCL");
    if (comm == LOOM_COMM_NCCL && sharedAnywhere)
      return rt::invalidArgument("ranks share a GPU, which NCCL refuses: use "
                                 "the staged backend (or one GPU per rank)");
    if (comm == LOOM_COMM_NCCL)
      if (std::string order = rt::transfersInOrder(a); !order.empty())
        return rt::invalidArgument(order +
                                   ": NCCL transfers match in order; use the "
                                   "staged backend for this schedule");

    rt::MpiCommConfig config =
        rt::MpiCommConfig::forStageGrid(worldRank, a.gridShape, a.groups);
    cudaStream_t stream = rank.gpu.stream();
    if (comm == LOOM_COMM_STAGED) {
      Status created;
      rank.hostComm = rt::MpiComm::create(config, created);
      if (!rank.hostComm)
        return created;
      StagedCommConfig staged;
      staged.host = rank.hostComm->comm();
      rt::MpiComm *host = rank.hostComm.get();
      staged.hostError = [host] { return host->lastError(); };
      staged.gridShape = config.gridShape;
      staged.groups = config.groups;
      rank.staged = StagedComm::create(staged, stream, created);
      if (!rank.staged)
        return created;
      rank.table = rank.staged->comm();
      rank.name = "staged";
    }
#ifdef LOOM_HAVE_NCCL
    if (comm == LOOM_COMM_NCCL) {
      NcclCommConfig nccl;
      static_cast<rt::MpiCommConfig &>(nccl) = config;
      nccl.device = device;
      Status created;
      rank.nccl = NcclComm::create(nccl, stream, created);
      if (!rank.nccl)
        return created;
      NcclComm *channel = rank.nccl.get();
      double timeout = options.timeout_seconds;
      // The watchdog's verdict is the communicator's.
      rank.gpu.setWaiter([channel, timeout] {
        std::string failure = channel->synchronize(timeout);
        return failure.empty() ? Status() : rt::communicationError(failure);
      });
      rank.table = rank.nccl->comm();
      rank.name = "nccl";
    }
#endif
    return Status();
  }
};

} // namespace
} // namespace loom::cuda_rt

extern "C" __attribute__((visibility("default"))) loom::rt::Driver *
loom_driver_v1() {
  static loom::cuda_rt::CudaDriver driver;
  return &driver;
}
