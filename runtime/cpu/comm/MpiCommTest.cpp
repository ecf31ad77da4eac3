//===- MpiCommTest.cpp - MpiComm's callbacks on 4 ranks -------------------===//
//
// Run as `mpirun -np 4 loom-mpi-comm-test` (ctest: unit/MpiCommTest).
// Every collective callback, in every dtype, on a 2x2 grid whose devices
// sit on permuted world ranks, for the groups [0], [1] and [0, 1]; then two
// 2-device pipeline stages with different group lists and send / recv
// between them; then errors: an unknown group, an MPI error (a send to a
// rank outside the world), and a configuration one rank gets wrong, which
// every rank must report instead of hanging. Expected values are computed
// here by brute force from the grid. Element values are small integers, so
// every dtype (bf16 included) holds them and their sums exactly.
//
// Exits 0 when every rank passes; otherwise each failing rank prints its
// mismatches and the program exits 1.
//
//===----------------------------------------------------------------------===//

#include "MpiComm.h"
#include "CommTestSupport.h"

#include <algorithm>
#include <cstdio>
#include <cstring>
#include <string>
#include <vector>

using loom::rt::MpiComm;
using loom::rt::MpiCommConfig;
using loom::rt::Status;
using namespace loom::rt::commtest;

namespace {

/// The 2x2 grid of the collective checks, on permuted world ranks.
const std::vector<int64_t> kGrid = {2, 2};
const std::vector<int> kGridRanks = {3, 1, 2, 0};
const std::vector<std::vector<int16_t>> kGroups = {{0}, {1}, {0, 1}};

/// The grid devices of `device`'s group for `axes`, in member order (brute
/// force: every device that agrees off `axes`, by its row-major index on
/// `axes`), and `device`'s index among them.
std::vector<int64_t> membersOf(int64_t device, const std::vector<int16_t> &axes,
                               int64_t &index) {
  auto coords = [](int64_t d) {
    return std::vector<int64_t>{d / kGrid[1], d % kGrid[1]};
  };
  std::vector<int64_t> mine = coords(device);
  std::vector<std::pair<int64_t, int64_t>> keyed;
  for (int64_t d = 0; d < 4; ++d) {
    std::vector<int64_t> other = coords(d);
    bool same = true;
    for (int16_t a = 0; a < 2; ++a) {
      bool inGroup = false;
      for (int16_t g : axes)
        inGroup |= g == a;
      same &= inGroup || other[a] == mine[a];
    }
    if (!same)
      continue;
    int64_t key = 0;
    for (int16_t a : axes)
      key = key * kGrid[a] + other[a];
    keyed.push_back({key, d});
  }
  std::vector<int64_t> members(keyed.size());
  for (auto [key, d] : keyed) {
    members[key] = d;
    if (d == device)
      index = key;
  }
  return members;
}

/// Element `e` of device `d`'s send buffer (block j of `count` elements
/// is elements j * count ...).
double valueOf(int64_t d, int64_t e) { return static_cast<double>(d * 8 + e); }

void checkCollectives() {
  MpiCommConfig config;
  config.gridShape = kGrid;
  config.gridRanks = kGridRanks;
  config.groups = kGroups;
  Status created;
  std::unique_ptr<MpiComm> mpi = MpiComm::create(config, created);
  expect(mpi != nullptr, "create: " + created.message());
  if (!mpi)
    return;
  const loom_comm *comm = mpi->comm();
  int64_t device = 0;
  while (kGridRanks[device] != worldRank)
    ++device;
  expect(comm->grid_coordinate(comm->ctx, 0) == device / 2 &&
             comm->grid_coordinate(comm->ctx, 1) == device % 2 &&
             comm->grid_coordinate(comm->ctx, 2) == -1,
         "grid_coordinate");

  const int64_t count = 2;
  for (int32_t group = 0; group < 3; ++group) {
    int64_t index = 0;
    std::vector<int64_t> members = membersOf(device, kGroups[group], index);
    int64_t n = static_cast<int64_t>(members.size());
    for (const Typed &t : kDtypes) {
      std::string where =
          std::string(" on group ") + std::to_string(group) + " in " + t.name;
      // all_reduce: sum, max, min of every member's [d*8, d*8+1].
      const loom_reduction reductions[] = {LOOM_REDUCE_SUM, LOOM_REDUCE_MAX,
                                           LOOM_REDUCE_MIN};
      const char *names[] = {"sum", "max", "min"};
      for (int k = 0; k < 3; ++k) {
        std::vector<double> mine(count), want(count);
        for (int64_t e = 0; e < count; ++e) {
          mine[e] = valueOf(device, e);
          for (int64_t m = 0; m < n; ++m) {
            double x = valueOf(members[m], e);
            want[e] = m == 0   ? x
                      : k == 0 ? want[e] + x
                      : k == 1 ? std::max(want[e], x)
                               : std::min(want[e], x);
          }
        }
        std::vector<unsigned char> buf = encode(t, mine);
        int32_t status = comm->all_reduce(comm->ctx, group, buf.data(), count,
                                          t.dtype, reductions[k]);
        expect(status == 0, "all_reduce: " + mpi->lastError());
        expectValues(decode(t, buf), want,
                     std::string("all_reduce ") + names[k] + where);
      }

      // all_gather: member order.
      {
        std::vector<double> mine(count), want;
        for (int64_t e = 0; e < count; ++e)
          mine[e] = valueOf(device, e);
        for (int64_t m = 0; m < n; ++m)
          for (int64_t e = 0; e < count; ++e)
            want.push_back(valueOf(members[m], e));
        std::vector<unsigned char> send = encode(t, mine),
                                   recv(count * n * t.bytes);
        int32_t status = comm->all_gather(comm->ctx, group, send.data(),
                                          recv.data(), count, t.dtype);
        expect(status == 0, "all_gather: " + mpi->lastError());
        expectValues(decode(t, recv), want, "all_gather" + where);
      }

      // reduce_scatter (sum) and all_to_all: block j of the send goes to
      // member j.
      std::vector<double> blocks(count * n);
      for (int64_t e = 0; e < count * n; ++e)
        blocks[e] = valueOf(device, e);
      {
        std::vector<double> want(count, 0.0);
        for (int64_t m = 0; m < n; ++m)
          for (int64_t e = 0; e < count; ++e)
            want[e] += valueOf(members[m], index * count + e);
        std::vector<unsigned char> send = encode(t, blocks),
                                   recv(count * t.bytes);
        int32_t status =
            comm->reduce_scatter(comm->ctx, group, send.data(), recv.data(),
                                 count, t.dtype, LOOM_REDUCE_SUM);
        expect(status == 0, "reduce_scatter: " + mpi->lastError());
        expectValues(decode(t, recv), want, "reduce_scatter" + where);
      }
      {
        std::vector<double> want;
        for (int64_t m = 0; m < n; ++m)
          for (int64_t e = 0; e < count; ++e)
            want.push_back(valueOf(members[m], index * count + e));
        std::vector<unsigned char> send = encode(t, blocks),
                                   recv(count * n * t.bytes);
        int32_t status = comm->all_to_all(comm->ctx, group, send.data(),
                                          recv.data(), count, t.dtype);
        expect(status == 0, "all_to_all: " + mpi->lastError());
        expectValues(decode(t, recv), want, "all_to_all" + where);
      }
    }
  }

  // Split collectives: three in flight at once on two groups, a blocking
  // one on the third in between, waited for out of order.
  for (const Typed &t : kDtypes) {
    int64_t index0 = 0, index1 = 0, index2 = 0;
    std::vector<int64_t> members0 = membersOf(device, kGroups[0], index0);
    std::vector<int64_t> members1 = membersOf(device, kGroups[1], index1);
    std::vector<int64_t> members2 = membersOf(device, kGroups[2], index2);
    auto n0 = static_cast<int64_t>(members0.size());
    auto n1 = static_cast<int64_t>(members1.size());
    std::vector<double> mine(count), blocks(count * n1), reduced(count, 0.0),
        gathered, scattered(count, 0.0), blocking(count, 0.0);
    for (int64_t e = 0; e < count; ++e) {
      mine[e] = valueOf(device, e);
      for (int64_t m : members0)
        reduced[e] += valueOf(m, e);
      for (int64_t m : members1)
        scattered[e] += valueOf(m, index1 * count + e);
      for (int64_t m : members2)
        blocking[e] += valueOf(m, e);
    }
    for (int64_t m = 0; m < n0; ++m)
      for (int64_t e = 0; e < count; ++e)
        gathered.push_back(valueOf(members0[m], e));
    for (int64_t e = 0; e < count * n1; ++e)
      blocks[e] = valueOf(device, e);
    std::string where = std::string(" (split, ") + t.name + ")";
    std::vector<unsigned char> reduceBuf = encode(t, mine),
                               gatherSend = encode(t, mine),
                               gatherRecv(count * n0 * t.bytes),
                               scatterSend = encode(t, blocks),
                               scatterRecv(count * t.bytes),
                               blockingBuf = encode(t, mine);
    expect(comm->all_reduce_start(comm->ctx, 0, 0, reduceBuf.data(), count,
                                  t.dtype, LOOM_REDUCE_SUM) == 0,
           "all_reduce_start" + where + ": " + mpi->lastError());
    expect(comm->all_gather_start(comm->ctx, 1, 0, gatherSend.data(),
                                  gatherRecv.data(), count, t.dtype) == 0,
           "all_gather_start" + where + ": " + mpi->lastError());
    expect(comm->reduce_scatter_start(comm->ctx, 2, 1, scatterSend.data(),
                                      scatterRecv.data(), count, t.dtype,
                                      LOOM_REDUCE_SUM) == 0,
           "reduce_scatter_start" + where + ": " + mpi->lastError());
    expect(comm->all_reduce(comm->ctx, 2, blockingBuf.data(), count, t.dtype,
                            LOOM_REDUCE_SUM) == 0,
           "all_reduce between starts" + where + ": " + mpi->lastError());
    expectValues(decode(t, blockingBuf), blocking,
                 "all_reduce between starts" + where);
    // A busy slot is refused before anything is posted.
    expect(comm->all_reduce_start(comm->ctx, 1, 0, reduceBuf.data(), count,
                                  t.dtype, LOOM_REDUCE_SUM) != 0 &&
               mpi->lastError() == "MPI_Iallreduce on group 0: slot 1 still "
                                   "has MPI_Iallgather on group 0 in flight",
           "a busy slot: '" + mpi->lastError() + "'");
    for (int32_t slot : {2, 0, 1})
      expect(comm->wait(comm->ctx, slot) == 0,
             "wait for slot " + std::to_string(slot) + where + ": " +
                 mpi->lastError());
    expectValues(decode(t, reduceBuf), reduced, "all_reduce_start" + where);
    expectValues(decode(t, gatherRecv), gathered, "all_gather_start" + where);
    expectValues(decode(t, scatterRecv), scattered,
                 "reduce_scatter_start" + where);
  }
  expect(comm->wait(comm->ctx, 0) != 0 &&
             mpi->lastError() == "wait: nothing is in flight under slot 0",
         "a wait with nothing in flight: '" + mpi->lastError() + "'");

  // Errors become the communicator's status with a message: an MPI
  // failure is a communication error, whatever the caller does with it.
  float x = 1;
  expect(comm->all_reduce(comm->ctx, 7, &x, 1, LOOM_DTYPE_F32,
                          LOOM_REDUCE_SUM) == LOOM_ERROR_COMMUNICATION &&
             mpi->lastError().find("no group 7") != std::string::npos,
         "all_reduce on an unknown group: '" + mpi->lastError() + "'");
  expect(comm->send(comm->ctx, 99, 0, &x, 1, LOOM_DTYPE_F32) ==
                 LOOM_ERROR_COMMUNICATION &&
             mpi->lastError().find("MPI_Isend to world rank 99 failed: ") ==
                 0 &&
             mpi->lastError().find("(MpiComm.cpp:") != std::string::npos,
         "send to world rank 99: '" + mpi->lastError() + "'");
}

/// Two stages of 2 devices each (world ranks {2, 0} and {1, 3}); stage 0
/// lists one group, stage 1 two, so the ranks split different numbers of
/// times. Device k of stage 0 sends to device k of stage 1.
void checkStages() {
  bool first = worldRank == 2 || worldRank == 0;
  MpiCommConfig config;
  config.gridShape = {2};
  config.gridRanks = first ? std::vector<int>{2, 0} : std::vector<int>{1, 3};
  config.groups = first ? std::vector<std::vector<int16_t>>{{0}}
                        : std::vector<std::vector<int16_t>>{{}, {0}};
  Status created;
  std::unique_ptr<MpiComm> mpi = MpiComm::create(config, created);
  expect(mpi != nullptr, "create (stages): " + created.message());
  if (!mpi)
    return;
  const loom_comm *comm = mpi->comm();
  int64_t device = comm->grid_coordinate(comm->ctx, 0);
  int32_t axisGroup = first ? 0 : 1;
  // The stage's all_gather sees only the stage's devices.
  std::vector<int64_t> mine = {worldRank}, all(2);
  int32_t status = comm->all_gather(comm->ctx, axisGroup, mine.data(),
                                    all.data(), 1, LOOM_DTYPE_I64);
  expect(status == 0, "stage all_gather: " + mpi->lastError());
  std::vector<int64_t> want =
      first ? std::vector<int64_t>{2, 0} : std::vector<int64_t>{1, 3};
  expect(all == want, "stage all_gather gathers the stage's world ranks");
  if (!first) {
    // The group of no axes: this device alone.
    double one = 5;
    status = comm->all_reduce(comm->ctx, 0, &one, 1, LOOM_DTYPE_F64,
                              LOOM_REDUCE_SUM);
    expect(status == 0 && one == 5, "all_reduce on the group of no axes");
  }
  int peer = first ? (device == 0 ? 1 : 3) : (device == 0 ? 2 : 0);
  std::vector<float> buf = {static_cast<float>(worldRank), 0.5f, 2.0f};
  if (first) {
    status = comm->send(comm->ctx, peer, 0, buf.data(), 3, LOOM_DTYPE_F32);
    expect(status == 0, "send: " + mpi->lastError());
  } else {
    std::vector<float> got(3);
    status = comm->recv(comm->ctx, peer, 0, got.data(), 3, LOOM_DTYPE_F32);
    expect(status == 0, "recv: " + mpi->lastError());
    expect(got == std::vector<float>{static_cast<float>(peer), 0.5f, 2.0f},
           "recv from world rank " + std::to_string(peer));
  }

  // Both ends send two large messages (past any eager limit) before either
  // receives: sends do not wait for their recv, so this cannot deadlock;
  // the recvs take them by tag, in the other order.
  const int64_t large = 1 << 20;
  std::vector<float> a(large, float(worldRank)), b(large, float(-worldRank));
  status = comm->send(comm->ctx, peer, 7, a.data(), large, LOOM_DTYPE_F32);
  status |= comm->send(comm->ctx, peer, 9, b.data(), large, LOOM_DTYPE_F32);
  a.assign(large, 0.0f); // the sends hold their own copies
  b.assign(large, 0.0f);
  expect(status == 0, "large sends: " + mpi->lastError());
  std::vector<float> got9(large), got7(large);
  status = comm->recv(comm->ctx, peer, 9, got9.data(), large, LOOM_DTYPE_F32);
  status |= comm->recv(comm->ctx, peer, 7, got7.data(), large, LOOM_DTYPE_F32);
  expect(status == 0, "large recvs: " + mpi->lastError());
  expect(got7 == std::vector<float>(large, float(peer)) &&
             got9 == std::vector<float>(large, float(-peer)),
         "tagged recvs from world rank " + std::to_string(peer));
  expect(comm->send(comm->ctx, peer, 40000, buf.data(), 3, LOOM_DTYPE_F32) !=
                 0 &&
             mpi->lastError().find("tag 40000 is outside") != std::string::npos,
         "a tag past 32767: '" + mpi->lastError() + "'");
}

/// World rank 0 is left out of the grid (and rank 1 listed twice): every
/// rank must fail, none hang.
void checkBadConfig() {
  MpiCommConfig config;
  config.gridShape = kGrid;
  config.gridRanks = {1, 1, 2, 3};
  config.groups = kGroups;
  Status created;
  std::unique_ptr<MpiComm> mpi = MpiComm::create(config, created);
  expect(mpi == nullptr, "create with a bad grid succeeds");
  std::string want = worldRank == 0 ? "world rank 0 is not in its stage's grid"
                     : worldRank == 1 ? "world rank 1 is listed twice"
                                      : "another rank's";
  // A bad configuration is the caller's argument, not MPI's failure.
  expect(created.message().find(want) == 0 &&
             created.code() == LOOM_ERROR_INVALID_ARGUMENT,
         "bad grid: '" + created.message() + "', want '" + want + "...'");
}

} // namespace

int main(int argc, char **argv) {
  MPI_Init(&argc, &argv);
  int worldSize = 0;
  MPI_Comm_rank(MPI_COMM_WORLD, &worldRank);
  MPI_Comm_size(MPI_COMM_WORLD, &worldSize);
  if (worldSize != 4) {
    if (worldRank == 0)
      std::fprintf(stderr, "run on 4 ranks (mpirun -np 4), not %d\n",
                   worldSize);
    MPI_Finalize();
    return 1;
  }
  checkCollectives();
  checkStages();
  checkBadConfig();
  int total = 0;
  MPI_Allreduce(&failures, &total, 1, MPI_INT, MPI_SUM, MPI_COMM_WORLD);
  if (worldRank == 0)
    std::printf("%s: %d failure(s) over 4 ranks\n", total ? "FAILED" : "PASSED",
                total);
  MPI_Finalize();
  return total ? 1 : 0;
}
