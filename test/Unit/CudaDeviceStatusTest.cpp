//===- CudaDeviceStatusTest.cpp - The CUDA device's statuses --------------===//
//
// The CUDA backend's Device (runtime/cuda/runtime/CudaDevice.h) on the fake
// device (test/FakeCuda) sets the status of what failed under it: a CUDA
// call's failure is a kernel error naming the call, CUDA's text and the
// file and line; a compiled function's failure a kernel error, unless it
// passed on a communication callback's status, which stays a
// communication error. The compiled functions are stand-ins with the ABI
// of a --target=cuda function.
//
//===----------------------------------------------------------------------===//

#include "CudaDevice.h"

#include <gtest/gtest.h>

using namespace loom;

namespace {

int32_t failingKernel(const loom_call_frame *, loom_cuda_context *) {
  return 1;
}

int32_t failingCollective(const loom_call_frame *, loom_cuda_context *) {
  return LOOM_ERROR_COMMUNICATION;
}

rt::Status callOn(cuda_rt::CudaDevice &device, cuda_rt::CudaEntryFn entry) {
  rt::Function fn;
  fn.name = "train_step";
  fn.symbol = reinterpret_cast<void *>(entry);
  loom_call_frame frame{};
  return device.call(fn, frame);
}

TEST(CudaDeviceStatusTest, ACudaFailureIsAKernelErrorWithItsLine) {
  cuda_rt::CudaDevice device;
  rt::Status status = device.init(99);
  EXPECT_EQ(status.code(), LOOM_ERROR_KERNEL);
  EXPECT_EQ(status.message().rfind("cudaSetDevice(99) failed: ", 0), 0u)
      << status.message();
  EXPECT_NE(status.message().find("(CudaDevice.cu:"), std::string::npos)
      << status.message();
}

TEST(CudaDeviceStatusTest, AFailedFunctionIsTheLayerItsStatusNames) {
  cuda_rt::CudaDevice device;
  ASSERT_TRUE(device.init(0).ok());
  ASSERT_TRUE(device.createContext(1 << 20).ok());
  EXPECT_EQ(callOn(device, failingKernel).code(), LOOM_ERROR_KERNEL);
  EXPECT_EQ(callOn(device, failingCollective).code(), LOOM_ERROR_COMMUNICATION);
}

} // namespace
