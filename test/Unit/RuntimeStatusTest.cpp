//===- RuntimeStatusTest.cpp - Statuses set by the layer that failed ------===//
//
// A step on the CPU backend's Device (CpuDevice) whose compiled function
// fails reports the code of the layer that failed (runtime/common/
// Status.h): a communication callback's failure, which compiled code
// passes on unchanged, is a communication error; a kernel's failure a
// kernel error; a bad rank an invalid argument. The compiled functions are
// stand-ins with the ABI of loom_program.h, and the communicator a table
// whose all_reduce fails as MpiComm's does when MPI fails (MpiCommTest
// checks that MpiComm returns LOOM_ERROR_COMMUNICATION).
//
//===----------------------------------------------------------------------===//

#include "CpuDevice.h"
#include "Session.h"

#include <gtest/gtest.h>

using namespace loom::rt;

namespace {

/// What compiled code does around a collective: calls the callback and
/// returns its status at once.
int32_t allReducingStep(const loom_call_frame *frame) {
  const loom_comm *comm = frame->comm;
  return comm->all_reduce(comm->ctx, 0, frame->results[0], 1, LOOM_DTYPE_F32,
                          LOOM_REDUCE_SUM);
}

/// A kernel's failure: loom_cpu kernels return 1.
int32_t failingKernelStep(const loom_call_frame *) { return 1; }

int32_t failingAllReduce(void *, int32_t, void *, int64_t, loom_dtype,
                         loom_reduction) {
  return LOOM_ERROR_COMMUNICATION;
}

/// One train_step of one rank: tokens and labels of 1 x 4, the loss.
Artifact oneRank(EntryFn entry) {
  Artifact artifact;
  artifact.batchRows = 1;
  artifact.seqLen = 4;
  Function fn;
  fn.name = "train_step";
  fn.entry = entry;
  for (const char *name : {"tokens", "labels"}) {
    TensorSpec data;
    data.role = "data";
    data.name = name;
    data.dtype = LOOM_DTYPE_I32;
    data.shape = data.globalShape = {1, 4};
    fn.args.push_back(data);
  }
  TensorSpec loss;
  loss.role = "loss";
  loss.name = "loss";
  fn.results.push_back(loss);
  artifact.functions.push_back(fn);
  return artifact;
}

/// Runs one step of `artifact` over `comm`: its status.
Status stepOf(const Artifact &artifact, const loom_comm *comm) {
  CpuDevice device;
  Session session(artifact, device, 0, comm);
  LOOM_RETURN_IF_ERROR(session.init());
  int32_t tokens[4] = {1, 2, 3, 4};
  LOOM_RETURN_IF_ERROR(session.setBatch(tokens, tokens));
  double loss = 0;
  return session.step(1, loss);
}

TEST(RuntimeStatusTest, ACommunicatorFailureIsACommunicationError) {
  loom_comm comm{};
  comm.all_reduce = failingAllReduce;
  Status status = stepOf(oneRank(allReducingStep), &comm);
  EXPECT_EQ(status.code(), LOOM_ERROR_COMMUNICATION) << status.message();
  EXPECT_NE(status.message().find("train_step"), std::string::npos)
      << status.message();
}

TEST(RuntimeStatusTest, AKernelFailureIsAKernelError) {
  loom_comm comm{};
  comm.all_reduce = failingAllReduce;
  Status status = stepOf(oneRank(failingKernelStep), &comm);
  EXPECT_EQ(status.code(), LOOM_ERROR_KERNEL) << status.message();
}

TEST(RuntimeStatusTest, ARankOutsideTheJobIsAnInvalidArgument) {
  Artifact artifact = oneRank(failingKernelStep);
  CpuDevice device;
  Session session(artifact, device, 3, nullptr);
  Status status = session.init();
  EXPECT_EQ(status.code(), LOOM_ERROR_INVALID_ARGUMENT);
  EXPECT_EQ(status.message(), "rank 3 is outside the job's 1 ranks");
}

TEST(RuntimeStatusTest, ContextKeepsTheCode) {
  Status status = communicationError("MPI_Isend failed").withContext("rank 1");
  EXPECT_EQ(status.code(), LOOM_ERROR_COMMUNICATION);
  EXPECT_EQ(status.message(), "rank 1: MPI_Isend failed");
  EXPECT_TRUE(Status().withContext("rank 1").ok());
}

TEST(RuntimeStatusTest, AForeignErrorNamesItsFileAndLine) {
  Status status =
      LOOM_FOREIGN_STATUS(LOOM_ERROR_KERNEL, "cudaMalloc", "out of memory");
  EXPECT_EQ(status.code(), LOOM_ERROR_KERNEL);
  EXPECT_EQ(status.message().rfind("cudaMalloc failed: out of memory "
                                   "(RuntimeStatusTest.cpp:",
                                   0),
            0u)
      << status.message();
}

} // namespace
