//===- CudaCommTest.cpp - StagedComm and NcclComm on device buffers -------===//
//
// Run as `mpirun -np 2 LoomCudaCommTest` (ctest: unit/CudaCommTest); both
// ranks share CUDA device 0. First StagedComm over an MpiComm on a 2-device
// grid whose devices sit on swapped world ranks: every collective in every
// dtype for the group of the grid's axis and the group of no axes, split
// all_reduces on two slots and the slots' errors, then send / recv where
// both ranks send (a large and a small message) before either receives,
// then errors. Then, when NCCL is built in, an NcclComm per rank (NCCL
// refuses two ranks of one communicator on one device, so each rank has a
// world of its own): the same collectives and split ones on its 1-device
// grid, sends to itself, errors and synchronize(). Buffers are uploaded
// and downloaded on the comm's stream without waiting in between, so the
// callbacks (a split one's wait included) must keep stream order. Expected
// values are computed by brute force; elements are small integers, exact in
// every dtype (bf16 too).
//
// Exits 77 (skipped) on every rank when there is no CUDA device, 0 when
// every rank passes; otherwise each failing rank prints its mismatches and
// the program exits 1.
//
//===----------------------------------------------------------------------===//

#include "CommTestSupport.h"
#include "MpiComm.h"
#include "StagedComm.h"
#ifdef LOOM_HAVE_NCCL
#include "NcclComm.h"
#endif

#include <algorithm>
#include <cstdio>
#include <cstring>
#include <functional>
#include <memory>
#include <string>
#include <vector>

using loom::cuda_rt::StagedComm;
using loom::cuda_rt::StagedCommConfig;
using loom::rt::MpiComm;
using loom::rt::MpiCommConfig;
using loom::rt::Status;
using namespace loom::rt::commtest;

namespace {

/// A device allocation, freed at the end of the scope.
class DeviceBytes {
public:
  explicit DeviceBytes(size_t bytes) {
    if (cudaMalloc(&pointer, bytes ? bytes : 1) != cudaSuccess)
      pointer = nullptr;
    expect(pointer != nullptr, "cudaMalloc of " + std::to_string(bytes));
  }
  ~DeviceBytes() { cudaFree(pointer); }
  DeviceBytes(const DeviceBytes &) = delete;
  DeviceBytes &operator=(const DeviceBytes &) = delete;
  void *get() const { return pointer; }

private:
  void *pointer = nullptr;
};

/// A device buffer holding `host`, uploaded on `stream` without waiting.
/// `host` must live until the stream has run the copy.
std::unique_ptr<DeviceBytes> upload(const std::vector<unsigned char> &host,
                                    cudaStream_t stream) {
  auto device = std::make_unique<DeviceBytes>(host.size());
  cudaMemcpyAsync(device->get(), host.data(), host.size(),
                  cudaMemcpyHostToDevice, stream);
  return device;
}

/// `bytes` of `device`, once `stream` has run everything before.
std::vector<unsigned char> download(const DeviceBytes &device, size_t bytes,
                                    cudaStream_t stream) {
  std::vector<unsigned char> host(bytes);
  cudaMemcpyAsync(host.data(), device.get(), bytes, cudaMemcpyDeviceToHost,
                  stream);
  expect(cudaStreamSynchronize(stream) == cudaSuccess,
         "cudaStreamSynchronize after a download");
  return host;
}

/// Element `e` of the send buffer of the group's member `m`.
double valueOf(int64_t m, int64_t e) { return static_cast<double>(m * 8 + e); }

/// Every collective of `comm` in every dtype on `group`, in which this rank
/// is member `me` of `n`.
void checkCollectives(const loom_comm *comm,
                      const std::function<std::string()> &lastError,
                      cudaStream_t stream, int32_t group, int64_t me, int64_t n,
                      const std::string &label) {
  const int64_t count = 3;
  for (const Typed &t : kDtypes) {
    std::string where =
        " (" + label + ", group " + std::to_string(group) + ", " + t.name + ")";
    const loom_reduction reductions[] = {LOOM_REDUCE_SUM, LOOM_REDUCE_MAX,
                                         LOOM_REDUCE_MIN};
    const char *names[] = {"sum", "max", "min"};
    for (int k = 0; k < 3; ++k) {
      std::vector<double> mine(count), want(count);
      for (int64_t e = 0; e < count; ++e) {
        mine[e] = valueOf(me, e);
        for (int64_t m = 0; m < n; ++m) {
          double x = valueOf(m, e);
          want[e] = m == 0   ? x
                    : k == 0 ? want[e] + x
                    : k == 1 ? std::max(want[e], x)
                             : std::min(want[e], x);
        }
      }
      std::vector<unsigned char> host = encode(t, mine);
      auto buf = upload(host, stream);
      int32_t status = comm->all_reduce(comm->ctx, group, buf->get(), count,
                                        t.dtype, reductions[k]);
      expect(status == 0, "all_reduce: " + lastError());
      expectValues(decode(t, download(*buf, host.size(), stream)), want,
                   std::string("all_reduce ") + names[k] + where);
    }

    // all_gather: member order.
    {
      std::vector<double> mine(count), want;
      for (int64_t e = 0; e < count; ++e)
        mine[e] = valueOf(me, e);
      for (int64_t m = 0; m < n; ++m)
        for (int64_t e = 0; e < count; ++e)
          want.push_back(valueOf(m, e));
      std::vector<unsigned char> host = encode(t, mine);
      auto send = upload(host, stream);
      DeviceBytes recv(count * n * t.bytes);
      int32_t status = comm->all_gather(comm->ctx, group, send->get(),
                                        recv.get(), count, t.dtype);
      expect(status == 0, "all_gather: " + lastError());
      expectValues(decode(t, download(recv, count * n * t.bytes, stream)), want,
                   "all_gather" + where);
    }

    // reduce_scatter (sum) and all_to_all: block j of the send goes to
    // member j.
    std::vector<double> blocks(count * n);
    for (int64_t e = 0; e < count * n; ++e)
      blocks[e] = valueOf(me, e);
    std::vector<unsigned char> host = encode(t, blocks);
    {
      std::vector<double> want(count, 0.0);
      for (int64_t m = 0; m < n; ++m)
        for (int64_t e = 0; e < count; ++e)
          want[e] += valueOf(m, me * count + e);
      auto send = upload(host, stream);
      DeviceBytes recv(count * t.bytes);
      int32_t status =
          comm->reduce_scatter(comm->ctx, group, send->get(), recv.get(), count,
                               t.dtype, LOOM_REDUCE_SUM);
      expect(status == 0, "reduce_scatter: " + lastError());
      expectValues(decode(t, download(recv, count * t.bytes, stream)), want,
                   "reduce_scatter" + where);
    }
    {
      std::vector<double> want;
      for (int64_t m = 0; m < n; ++m)
        for (int64_t e = 0; e < count; ++e)
          want.push_back(valueOf(m, me * count + e));
      auto send = upload(host, stream);
      DeviceBytes recv(count * n * t.bytes);
      int32_t status = comm->all_to_all(comm->ctx, group, send->get(),
                                        recv.get(), count, t.dtype);
      expect(status == 0, "all_to_all: " + lastError());
      expectValues(decode(t, download(recv, count * n * t.bytes, stream)), want,
                   "all_to_all" + where);
    }
  }
  // An unknown group is a status with a message.
  DeviceBytes x(4);
  expect(comm->all_reduce(comm->ctx, 7, x.get(), 1, LOOM_DTYPE_F32,
                          LOOM_REDUCE_SUM) != 0 &&
             lastError().find("no group 7") != std::string::npos,
         "all_reduce on an unknown group (" + label + "): '" + lastError() +
             "'");
}

/// The split collectives on `group` (this rank member `me` of `n`): two
/// all_reduces (f32 sums) started under slots 0 and 1 before either is
/// waited for, waited for in the other order; then the slot errors, none
/// of which communicates (so every rank fails alike): a start on a slot in
/// flight, a negative slot, a wait on a slot with nothing in flight.
void checkSplit(const loom_comm *comm,
                const std::function<std::string()> &lastError,
                cudaStream_t stream, int32_t group, int64_t me, int64_t n,
                const std::string &label) {
  const Typed &f32 = kDtypes[0];
  const int64_t count = 5;
  std::string where = " (" + label + ", group " + std::to_string(group) + ")";
  std::vector<std::vector<unsigned char>> hosts;
  std::vector<std::unique_ptr<DeviceBytes>> bufs;
  std::vector<std::vector<double>> want(2, std::vector<double>(count, 0.0));
  for (int32_t slot = 0; slot < 2; ++slot) {
    std::vector<double> mine(count);
    for (int64_t e = 0; e < count; ++e) {
      mine[e] = valueOf(me, e) + 100 * slot;
      for (int64_t m = 0; m < n; ++m)
        want[slot][e] += valueOf(m, e) + 100 * slot;
    }
    hosts.push_back(encode(f32, mine));
    bufs.push_back(upload(hosts.back(), stream));
    int32_t status =
        comm->all_reduce_start(comm->ctx, slot, group, bufs.back()->get(),
                               count, LOOM_DTYPE_F32, LOOM_REDUCE_SUM);
    expect(status == 0, "all_reduce_start under slot " + std::to_string(slot) +
                            where + ": " + lastError());
  }
  for (int32_t slot : {1, 0}) {
    int32_t status = comm->wait(comm->ctx, slot);
    expect(status == 0, "wait for slot " + std::to_string(slot) + where + ": " +
                            lastError());
  }
  for (int32_t slot = 0; slot < 2; ++slot)
    expectValues(decode(f32, download(*bufs[slot], count * 4, stream)),
                 want[slot],
                 "all_reduce under slot " + std::to_string(slot) + where);

  DeviceBytes x(16), y(16 * n);
  expect(comm->all_gather_start(comm->ctx, 0, group, x.get(), y.get(), 1,
                                LOOM_DTYPE_F32) == 0,
         "all_gather_start under slot 0" + where + ": " + lastError());
  expect(comm->reduce_scatter_start(comm->ctx, 0, group, y.get(), x.get(), 1,
                                    LOOM_DTYPE_F32, LOOM_REDUCE_SUM) != 0 &&
             lastError().find("slot 0 still has") != std::string::npos,
         "a start on a slot in flight" + where + ": '" + lastError() + "'");
  expect(comm->wait(comm->ctx, 0) == 0,
         "wait for slot 0 after the refused start" + where + ": " +
             lastError());
  expect(comm->all_reduce_start(comm->ctx, -1, group, x.get(), 1,
                                LOOM_DTYPE_F32, LOOM_REDUCE_SUM) != 0 &&
             lastError().find("negative slot -1") != std::string::npos,
         "a start on slot -1" + where + ": '" + lastError() + "'");
  expect(comm->wait(comm->ctx, 5) != 0 &&
             lastError() == "wait: nothing is in flight under slot 5",
         "a wait on slot 5" + where + ": '" + lastError() + "'");
  expect(comm->wait(comm->ctx, 0) != 0 &&
             lastError() == "wait: nothing is in flight under slot 0",
         "a second wait on slot 0" + where + ": '" + lastError() + "'");
}

/// Sends `messages` (f32 values, one tag each) to `peer`, overwrites the
/// sent buffers (the sends must hold copies), then receives as many from
/// `peer` in the same order, expecting `peer`'s values.
void checkSendRecv(const loom_comm *comm,
                   const std::function<std::string()> &lastError,
                   cudaStream_t stream, int peer,
                   const std::vector<int64_t> &sizes, const std::string &label,
                   const std::function<float(int, int64_t, int64_t)> &value) {
  const Typed &f32 = kDtypes[0];
  std::vector<std::vector<unsigned char>> hosts;
  std::vector<std::unique_ptr<DeviceBytes>> sent;
  for (size_t k = 0; k < sizes.size(); ++k) {
    std::vector<double> values(sizes[k]);
    for (int64_t e = 0; e < sizes[k]; ++e)
      values[e] = value(worldRank, static_cast<int64_t>(k), e);
    hosts.push_back(encode(f32, values));
    sent.push_back(upload(hosts.back(), stream));
    int32_t status = comm->send(comm->ctx, peer, static_cast<int32_t>(k + 1),
                                sent.back()->get(), sizes[k], LOOM_DTYPE_F32);
    expect(status == 0, "send (" + label + "): " + lastError());
    cudaMemsetAsync(sent.back()->get(), 0, sizes[k] * 4, stream);
  }
  for (size_t k = 0; k < sizes.size(); ++k) {
    DeviceBytes got(sizes[k] * 4);
    int32_t status = comm->recv(comm->ctx, peer, static_cast<int32_t>(k + 1),
                                got.get(), sizes[k], LOOM_DTYPE_F32);
    expect(status == 0, "recv (" + label + "): " + lastError());
    std::vector<double> values =
        decode(f32, download(got, sizes[k] * 4, stream));
    bool same = true;
    for (int64_t e = 0; e < sizes[k] && same; ++e)
      same = values[e] == value(peer, static_cast<int64_t>(k), e);
    expect(same, "message " + std::to_string(k) + " from world rank " +
                     std::to_string(peer) + " (" + label + ")");
  }
}

/// StagedComm over an MpiComm: a 2-device grid on world ranks {1, 0}, the
/// groups [0] and [].
void checkStaged(cudaStream_t stream) {
  MpiCommConfig config;
  config.gridShape = {2};
  config.gridRanks = {1, 0};
  config.groups = {{0}, {}};
  Status created;
  std::unique_ptr<MpiComm> mpi = MpiComm::create(config, created);
  expect(mpi != nullptr, "MpiComm::create: " + created.message());
  if (!mpi)
    return;
  StagedCommConfig staged;
  staged.host = mpi->comm();
  staged.hostError = [&mpi] { return mpi->lastError(); };
  staged.gridShape = config.gridShape;
  staged.groups = config.groups;
  std::unique_ptr<StagedComm> comm =
      StagedComm::create(staged, stream, created);
  expect(comm != nullptr, "StagedComm::create: " + created.message());
  if (!comm)
    return;
  const loom_comm *table = comm->comm();
  auto lastError = [&comm] { return comm->lastError(); };
  int64_t device = worldRank == 1 ? 0 : 1;
  expect(table->grid_coordinate(table->ctx, 0) == device &&
             table->grid_coordinate(table->ctx, 1) == -1,
         "grid_coordinate (staged)");
  checkCollectives(table, lastError, stream, 0, device, 2, "staged");
  checkCollectives(table, lastError, stream, 1, 0, 1, "staged");
  checkSplit(table, lastError, stream, 0, device, 2, "staged");
  checkSplit(table, lastError, stream, 1, 0, 1, "staged");

  // Both ranks send before either receives: a message past MPI's eager
  // limit, then a small one.
  checkSendRecv(table, lastError, stream, 1 - worldRank, {1 << 20, 5}, "staged",
                [](int rank, int64_t k, int64_t e) {
                  return static_cast<float>(rank * 1000 + k * 100 + e % 64);
                });

  DeviceBytes x(4);
  expect(table->send(table->ctx, 1 - worldRank, 40000, x.get(), 1,
                     LOOM_DTYPE_F32) != 0 &&
             comm->lastError().find("tag 40000 is outside") !=
                 std::string::npos,
         "a tag past 32767 (staged): '" + comm->lastError() + "'");
  expect(comm->synchronize(0) == "", "synchronize (staged)");
}

#ifdef LOOM_HAVE_NCCL
/// An NcclComm whose world is this rank alone: a 1-device grid, the groups
/// [0] and [].
void checkNccl(cudaStream_t stream) {
  using loom::cuda_rt::NcclComm;
  using loom::cuda_rt::NcclCommConfig;
  MPI_Comm alone = MPI_COMM_NULL;
  MPI_Comm_split(MPI_COMM_WORLD, worldRank, 0, &alone);
  NcclCommConfig config;
  config.world = alone;
  config.gridShape = {1};
  config.gridRanks = {0};
  config.groups = {{0}, {}};
  config.device = 0;
  Status created;
  std::unique_ptr<NcclComm> comm = NcclComm::create(config, stream, created);
  expect(comm != nullptr, "NcclComm::create: " + created.message());
  if (comm) {
    const loom_comm *table = comm->comm();
    auto lastError = [&comm] { return comm->lastError(); };
    expect(table->grid_coordinate(table->ctx, 0) == 0, "grid_coordinate");
    checkCollectives(table, lastError, stream, 0, 0, 1, "nccl");
    checkCollectives(table, lastError, stream, 1, 0, 1, "nccl");
    checkSplit(table, lastError, stream, 0, 0, 1, "nccl");
    checkSplit(table, lastError, stream, 1, 0, 1, "nccl");
    // To itself, one message at a time: a queued send goes out with the
    // recv after it (two queued sends to itself would wait for a recv the
    // stream only reaches after them).
    auto value = [](int, int64_t k, int64_t e) {
      return static_cast<float>(k * 100 + e % 64);
    };
    checkSendRecv(table, lastError, stream, 0, {1 << 20}, "nccl", value);
    checkSendRecv(table, lastError, stream, 0, {7}, "nccl", value);
    DeviceBytes x(4);
    expect(table->send(table->ctx, 5, 0, x.get(), 1, LOOM_DTYPE_F32) != 0 &&
               comm->lastError().find("send to world rank 5: not a rank") == 0,
           "send to world rank 5: '" + comm->lastError() + "'");
    expect(comm->synchronize(30) == "", "synchronize (nccl)");
  }
  comm.reset();
  MPI_Comm_free(&alone);
}
#endif

} // namespace

int main(int argc, char **argv) {
  MPI_Init(&argc, &argv);
  int worldSize = 0;
  MPI_Comm_rank(MPI_COMM_WORLD, &worldRank);
  MPI_Comm_size(MPI_COMM_WORLD, &worldSize);
  // Every rank skips if any rank lacks a device (none waits for another).
  int devices = 0;
  if (cudaGetDeviceCount(&devices) != cudaSuccess)
    devices = 0;
  MPI_Allreduce(MPI_IN_PLACE, &devices, 1, MPI_INT, MPI_MIN, MPI_COMM_WORLD);
  if (devices == 0) {
    if (worldRank == 0)
      std::printf("SKIP: no CUDA device\n");
    MPI_Finalize();
    return 77;
  }
  if (worldSize != 2) {
    if (worldRank == 0)
      std::fprintf(stderr, "run on 2 ranks (mpirun -np 2), not %d\n",
                   worldSize);
    MPI_Finalize();
    return 1;
  }
  cudaStream_t stream = nullptr;
  if (cudaSetDevice(0) != cudaSuccess ||
      cudaStreamCreate(&stream) != cudaSuccess) {
    std::fprintf(stderr, "rank %d: no stream on device 0\n", worldRank);
    MPI_Abort(MPI_COMM_WORLD, 1);
  }
  checkStaged(stream);
#ifdef LOOM_HAVE_NCCL
  checkNccl(stream);
#else
  if (worldRank == 0)
    std::printf("NCCL is not built in: NcclComm not checked\n");
#endif
  cudaStreamDestroy(stream);
  int total = 0;
  MPI_Allreduce(&failures, &total, 1, MPI_INT, MPI_SUM, MPI_COMM_WORLD);
  if (worldRank == 0)
    std::printf("%s: %d failure(s) over 2 ranks\n", total ? "FAILED" : "PASSED",
                total);
  MPI_Finalize();
  return total ? 1 : 0;
}
