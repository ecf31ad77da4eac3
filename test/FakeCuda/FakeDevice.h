//===- FakeDevice.h - The fake device's state ------------------*- C++ -*-===//
//
// What FakeCudart.cpp, FakeCublasLt.cpp and FakeCudnn.cpp share: the live
// allocations, the counters and the violation log (FakeCuda.h says what the
// fake device is). One mutex guards it all: the runtime's watchdog and the
// tests' loopback communicators call in from other threads.
//
//===----------------------------------------------------------------------===//

#ifndef LOOM_TEST_FAKECUDA_FAKEDEVICE_H
#define LOOM_TEST_FAKECUDA_FAKEDEVICE_H

#include "FakeCuda.h"

#include <cuda_runtime_api.h>

#include <cstddef>
#include <cstdint>
#include <map>
#include <mutex>
#include <string>
#include <vector>

namespace loom::fake {

/// The device: allocations, counters, the launch and GEMM logs.
struct Device {
  std::mutex mutex;
  /// Live allocations by first byte: one past their last byte.
  std::map<uintptr_t, uintptr_t> allocations;
  loom_fake_cuda_stats stats = {};
  std::map<std::string, int64_t> launchesByKernel;
  std::vector<loom_fake_cuda_gemm> gemms;
  /// cudnnBackendExecute calls by engine name.
  std::map<std::string, int64_t> cudnnExecutions;
  std::string lastViolation;
};

Device &device();

/// Records a violation (printf-style), prints it to stderr; returns false.
/// The caller holds the device's mutex.
bool violation(const char *format, ...) __attribute__((format(printf, 1, 2)));

/// Whether [pointer, pointer + bytes) lies inside one live allocation; a
/// violation naming `what` and `call` otherwise. Empty ranges pass. The
/// caller holds the device's mutex.
bool inside(const void *pointer, uint64_t bytes, const char *call,
            const char *what);

/// Whether `stream` is the legacy or per-thread default stream or a live
/// one of cudaStreamCreate*. The caller holds the device's mutex.
bool liveStream(cudaStream_t stream);

/// Whether `pointer` is inside a live allocation (a device pointer). The
/// caller holds the device's mutex.
bool isDevicePointer(const void *pointer);

} // namespace loom::fake

#endif // LOOM_TEST_FAKECUDA_FAKEDEVICE_H
