//===- FakeCudart.cpp - The CUDA runtime of the fake device ---------------===//
//
// The CUDA runtime calls of Loom's CUDA backend, and the registration and
// launch entry points nvcc's host code calls (crt/host_runtime.h), on host
// memory (FakeCuda.h says what is checked). Kernels are registered by the
// fat binaries' constructors with their mangled device names; a launch is
// checked against the limits of a compute capability 9.0 device and
// counted under the kernel's demangled name, but never run.
//
//===----------------------------------------------------------------------===//

#include "FakeDevice.h"

#include <cuda_runtime_api.h>

#include <cstdarg>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <cxxabi.h>
#include <memory>
#include <set>

namespace loom::fake {
namespace {

/// The limits of a compute capability 9.0 device (H100): CUDA
/// programming guide, "Technical Specifications per Compute Capability".
constexpr unsigned kMaxGridX = 2147483647u, kMaxGridYZ = 65535u;
constexpr unsigned kMaxBlockThreads = 1024u, kMaxBlockZ = 64u;
constexpr int kDefaultDynamicShared = 48 * 1024;
constexpr int kMaxDynamicShared = 227 * 1024;

/// A kernel of a registered fat binary.
struct Kernel {
  std::string name; ///< demangled, without its parameter list
  int maxDynamicShared = kDefaultDynamicShared;
};

/// A launch configuration pushed by `<<<...>>>` and popped by the stub.
struct LaunchConfig {
  dim3 grid, block;
  size_t shared = 0;
  cudaStream_t stream = nullptr;
};

struct Runtime {
  std::map<const void *, std::unique_ptr<Kernel>> kernelsByHostFunction;
  std::set<const void *> streams, events, hostAllocations;
  int currentDevice = 0;
};

Runtime &runtime() {
  static Runtime *instance = new Runtime;
  return *instance;
}

thread_local std::vector<LaunchConfig> launchConfigs;
thread_local cudaError_t lastError = cudaSuccess;

/// Removes every occurrence of `part` from `text`.
void erase(std::string &text, const std::string &part) {
  for (size_t at = text.find(part); at != std::string::npos;
       at = text.find(part, at))
    text.erase(at, part.size());
}

/// `mangled`'s demangled name without its return type, parameter list,
/// Loom's namespaces and anonymous namespaces ("rows::layernorm_warp_
/// forward<8>", "binary_forward_kernel<(Binary)0>").
std::string demangle(const char *mangled) {
  int status = 0;
  char *text = abi::__cxa_demangle(mangled, nullptr, nullptr, &status);
  std::string name = status == 0 && text ? text : mangled;
  std::free(text);
  erase(name, "(anonymous namespace)::");
  erase(name, "loom::cuda::");
  if (name.compare(0, 5, "void ") == 0)
    name.erase(0, 5);
  int depth = 0;
  for (size_t i = 0; i < name.size(); ++i) {
    char c = name[i];
    if (c == '<')
      ++depth;
    else if (c == '>')
      --depth;
    else if (c == '(' && depth == 0 && i > 0)
      return name.substr(0, i);
  }
  return name;
}

/// Records `error` as the thread's last error; returns it.
cudaError_t fail(cudaError_t error) {
  lastError = error;
  return error;
}

/// Which ends of a copy are device memory, by kind (cudaMemcpyDefault:
/// by where the pointers are, as unified addressing does).
void endsOf(cudaMemcpyKind kind, const void *dst, const void *src,
            bool &dstDevice, bool &srcDevice) {
  switch (kind) {
  case cudaMemcpyHostToHost:
    dstDevice = srcDevice = false;
    return;
  case cudaMemcpyHostToDevice:
    dstDevice = true;
    srcDevice = false;
    return;
  case cudaMemcpyDeviceToHost:
    dstDevice = false;
    srcDevice = true;
    return;
  case cudaMemcpyDeviceToDevice:
    dstDevice = srcDevice = true;
    return;
  default:
    dstDevice = isDevicePointer(dst);
    srcDevice = isDevicePointer(src);
    return;
  }
}

/// A pitched copy of `height` rows of `width` bytes, checked and done.
cudaError_t copy2D(const char *call, void *dst, size_t dpitch, const void *src,
                   size_t spitch, size_t width, size_t height,
                   cudaMemcpyKind kind, cudaStream_t stream) {
  Device &d = device();
  std::lock_guard<std::mutex> lock(d.mutex);
  ++d.stats.copies;
  if (!liveStream(stream)) {
    violation("%s: stream %p is not a live stream", call, (void *)stream);
    return fail(cudaErrorInvalidResourceHandle);
  }
  if (height > 0 && (dpitch < width || spitch < width)) {
    violation("%s: pitch (dst %zu, src %zu) below the width %zu", call, dpitch,
              spitch, width);
    return fail(cudaErrorInvalidPitchValue);
  }
  bool dstDevice = false, srcDevice = false;
  endsOf(kind, dst, src, dstDevice, srcDevice);
  uint64_t dstExtent = height ? (height - 1) * dpitch + width : 0;
  uint64_t srcExtent = height ? (height - 1) * spitch + width : 0;
  if ((dstDevice && !inside(dst, dstExtent, call, "destination")) ||
      (srcDevice && !inside(src, srcExtent, call, "source")))
    return fail(cudaErrorInvalidValue);
  for (size_t row = 0; row < height; ++row)
    std::memmove(static_cast<char *>(dst) + row * dpitch,
                 static_cast<const char *>(src) + row * spitch, width);
  return cudaSuccess;
}

cudaError_t allocate(const char *call, void **out, size_t size) {
  if (!out)
    return fail(cudaErrorInvalidValue);
  // At least one byte, so that every allocation has a distinct address.
  void *pointer = std::calloc(size ? size : 1, 1);
  if (!pointer)
    return fail(cudaErrorMemoryAllocation);
  Device &d = device();
  std::lock_guard<std::mutex> lock(d.mutex);
  auto begin = reinterpret_cast<uintptr_t>(pointer);
  d.allocations[begin] = begin + size;
  *out = pointer;
  (void)call;
  return cudaSuccess;
}

cudaError_t release(const char *call, void *pointer) {
  if (!pointer)
    return cudaSuccess;
  Device &d = device();
  {
    std::lock_guard<std::mutex> lock(d.mutex);
    auto found = d.allocations.find(reinterpret_cast<uintptr_t>(pointer));
    if (found == d.allocations.end()) {
      violation("%s: %p is not the start of a live allocation", call, pointer);
      return fail(cudaErrorInvalidValue);
    }
    d.allocations.erase(found);
  }
  std::free(pointer);
  return cudaSuccess;
}

/// Checks and records a launch of `handle` (a Kernel).
cudaError_t launch(const void *handle, dim3 grid, dim3 block, size_t shared,
                   cudaStream_t stream) {
  auto *kernel = static_cast<const Kernel *>(handle);
  Device &d = device();
  std::lock_guard<std::mutex> lock(d.mutex);
  bool known = false;
  for (const auto &entry : runtime().kernelsByHostFunction)
    known = known || entry.second.get() == kernel;
  if (!known) {
    violation("launch of an unregistered kernel %p", handle);
    return fail(cudaErrorInvalidDeviceFunction);
  }
  const char *name = kernel->name.c_str();
  uint64_t threads = uint64_t{block.x} * block.y * block.z;
  if (grid.x < 1 || grid.x > kMaxGridX || grid.y < 1 || grid.y > kMaxGridYZ ||
      grid.z < 1 || grid.z > kMaxGridYZ) {
    violation("launch of %s: grid (%u, %u, %u) outside (2^31 - 1, 65535, "
              "65535)",
              name, grid.x, grid.y, grid.z);
    return fail(cudaErrorInvalidConfiguration);
  }
  if (block.x < 1 || block.y < 1 || block.z < 1 || block.z > kMaxBlockZ ||
      threads > kMaxBlockThreads) {
    violation("launch of %s: block (%u, %u, %u) is not 1 to 1024 threads", name,
              block.x, block.y, block.z);
    return fail(cudaErrorInvalidConfiguration);
  }
  if (shared > static_cast<size_t>(kernel->maxDynamicShared)) {
    violation("launch of %s: %zu bytes of dynamic shared memory, over its "
              "limit of %d",
              name, shared, kernel->maxDynamicShared);
    return fail(cudaErrorInvalidValue);
  }
  if (!liveStream(stream)) {
    violation("launch of %s: stream %p is not a live stream", name,
              (void *)stream);
    return fail(cudaErrorInvalidResourceHandle);
  }
  ++d.stats.launches;
  ++d.launchesByKernel[kernel->name];
  return cudaSuccess;
}

/// LOOM_FAKE_CUDA_LOG: the summary, written when the process exits.
struct LogAtExit {
  ~LogAtExit() {
    const char *path = std::getenv("LOOM_FAKE_CUDA_LOG");
    if (!path || !*path)
      return;
    FILE *out = std::fopen(path, "w");
    if (!out)
      return;
    Device &d = device();
    std::lock_guard<std::mutex> lock(d.mutex);
    std::fprintf(out,
                 "fake device: %lld launches, %lld gemms, %lld copies, %lld "
                 "memsets, %lld violations\n",
                 static_cast<long long>(d.stats.launches),
                 static_cast<long long>(d.stats.gemms),
                 static_cast<long long>(d.stats.copies),
                 static_cast<long long>(d.stats.memsets),
                 static_cast<long long>(d.stats.violations));
    for (const auto &[name, count] : d.launchesByKernel)
      std::fprintf(out, "launch %s: %lld\n", name.c_str(),
                   static_cast<long long>(count));
    for (const auto &[engine, count] : d.cudnnExecutions)
      std::fprintf(out, "cudnn %s: %lld\n", engine.c_str(),
                   static_cast<long long>(count));
    if (!d.lastViolation.empty())
      std::fprintf(out, "last violation: %s\n", d.lastViolation.c_str());
    std::fclose(out);
  }
} logAtExit;

} // namespace

Device &device() {
  static Device *instance = new Device;
  return *instance;
}

bool violation(const char *format, ...) {
  char text[512];
  va_list list;
  va_start(list, format);
  std::vsnprintf(text, sizeof text, format, list);
  va_end(list);
  Device &d = device();
  ++d.stats.violations;
  d.lastViolation = text;
  std::fprintf(stderr, "fake CUDA device: %s\n", text);
  return false;
}

bool liveStream(cudaStream_t stream) {
  return stream == nullptr || stream == cudaStreamLegacy ||
         stream == cudaStreamPerThread || runtime().streams.count(stream);
}

bool isDevicePointer(const void *pointer) {
  auto address = reinterpret_cast<uintptr_t>(pointer);
  const auto &allocations = device().allocations;
  auto next = allocations.upper_bound(address);
  if (next == allocations.begin())
    return false;
  --next;
  return address < std::max(next->second, next->first + 1);
}

bool inside(const void *pointer, uint64_t bytes, const char *call,
            const char *what) {
  if (bytes == 0)
    return true;
  auto address = reinterpret_cast<uintptr_t>(pointer);
  const auto &allocations = device().allocations;
  auto next = allocations.upper_bound(address);
  if (next != allocations.begin()) {
    --next;
    if (address >= next->first && address + bytes <= next->second)
      return true;
    if (address >= next->first && address < next->second)
      return violation(
          "%s: %s [%p, +%llu) runs %llu bytes past the end of "
          "its allocation of %llu",
          call, what, pointer, static_cast<unsigned long long>(bytes),
          static_cast<unsigned long long>(address + bytes - next->second),
          static_cast<unsigned long long>(next->second - next->first));
  }
  return violation("%s: %s [%p, +%llu) is not device memory", call, what,
                   pointer, static_cast<unsigned long long>(bytes));
}

} // namespace loom::fake

using namespace loom::fake;

extern "C" {

//===----------------------------------------------------------------------===//
// Registration and launch (nvcc's host code)
//===----------------------------------------------------------------------===//

void **__cudaRegisterFatBinary(void *fatCubin) { return new void *(fatCubin); }

void __cudaRegisterFatBinaryEnd(void **) {}

void __cudaUnregisterFatBinary(void **handle) { delete handle; }

void __cudaRegisterFunction(void **, const char *hostFun, char *,
                            const char *deviceName, int, uint3 *, uint3 *,
                            dim3 *, dim3 *, int *) {
  auto kernel = std::make_unique<Kernel>();
  kernel->name = demangle(deviceName);
  runtime().kernelsByHostFunction[hostFun] = std::move(kernel);
}

void __cudaRegisterVar(void **, char *, char *, const char *, int, size_t, int,
                       int) {}

void __cudaRegisterManagedVar(void **, void **, char *, const char *, int,
                              size_t, int, int) {}

char __cudaInitModule(void **) { return 1; }

unsigned __cudaPushCallConfiguration(dim3 grid, dim3 block, size_t shared,
                                     struct CUstream_st *stream) {
  launchConfigs.push_back({grid, block, shared, stream});
  return 0;
}

cudaError_t __cudaPopCallConfiguration(dim3 *grid, dim3 *block, size_t *shared,
                                       void *stream) {
  if (launchConfigs.empty())
    return fail(cudaErrorMissingConfiguration);
  LaunchConfig config = launchConfigs.back();
  launchConfigs.pop_back();
  *grid = config.grid;
  *block = config.block;
  *shared = config.shared;
  *static_cast<cudaStream_t *>(stream) = config.stream;
  return cudaSuccess;
}

cudaError_t __cudaGetKernel(cudaKernel_t *out, const void *hostFun) {
  auto found = runtime().kernelsByHostFunction.find(hostFun);
  if (found == runtime().kernelsByHostFunction.end())
    return fail(cudaErrorInvalidDeviceFunction);
  *out = reinterpret_cast<cudaKernel_t>(found->second.get());
  return cudaSuccess;
}

cudaError_t __cudaLaunchKernel(cudaKernel_t kernel, dim3 grid, dim3 block,
                               void **, size_t shared, cudaStream_t stream) {
  return launch(kernel, grid, block, shared, stream);
}

cudaError_t __cudaLaunchKernel_ptsz(cudaKernel_t kernel, dim3 grid, dim3 block,
                                    void **args, size_t shared,
                                    cudaStream_t stream) {
  return __cudaLaunchKernel(kernel, grid, block, args, shared, stream);
}

cudaError_t cudaLaunchKernel(const void *func, dim3 grid, dim3 block, void **,
                             size_t shared, cudaStream_t stream) {
  auto found = runtime().kernelsByHostFunction.find(func);
  if (found == runtime().kernelsByHostFunction.end())
    return fail(cudaErrorInvalidDeviceFunction);
  return launch(found->second.get(), grid, block, shared, stream);
}

cudaError_t cudaFuncSetAttribute(const void *func, cudaFuncAttribute attr,
                                 int value) {
  auto found = runtime().kernelsByHostFunction.find(func);
  if (found == runtime().kernelsByHostFunction.end())
    return fail(cudaErrorInvalidDeviceFunction);
  if (attr == cudaFuncAttributeMaxDynamicSharedMemorySize) {
    if (value < 0 || value > kMaxDynamicShared) {
      Device &d = device();
      std::lock_guard<std::mutex> lock(d.mutex);
      violation("cudaFuncSetAttribute(%s): %d bytes of dynamic shared "
                "memory, over the device's %d",
                found->second->name.c_str(), value, kMaxDynamicShared);
      return fail(cudaErrorInvalidValue);
    }
    found->second->maxDynamicShared = value;
  }
  return cudaSuccess;
}

//===----------------------------------------------------------------------===//
// Errors and devices
//===----------------------------------------------------------------------===//

cudaError_t cudaGetLastError(void) {
  cudaError_t error = lastError;
  lastError = cudaSuccess;
  return error;
}

cudaError_t cudaPeekAtLastError(void) { return lastError; }

const char *cudaGetErrorName(cudaError_t error) {
  switch (error) {
  case cudaSuccess:
    return "cudaSuccess";
  case cudaErrorInvalidValue:
    return "cudaErrorInvalidValue";
  case cudaErrorMemoryAllocation:
    return "cudaErrorMemoryAllocation";
  case cudaErrorInvalidConfiguration:
    return "cudaErrorInvalidConfiguration";
  case cudaErrorInvalidPitchValue:
    return "cudaErrorInvalidPitchValue";
  case cudaErrorInvalidDevice:
    return "cudaErrorInvalidDevice";
  case cudaErrorInvalidDeviceFunction:
    return "cudaErrorInvalidDeviceFunction";
  case cudaErrorInvalidResourceHandle:
    return "cudaErrorInvalidResourceHandle";
  case cudaErrorMissingConfiguration:
    return "cudaErrorMissingConfiguration";
  default:
    return "cudaErrorUnknown";
  }
}

const char *cudaGetErrorString(cudaError_t error) {
  switch (error) {
  case cudaSuccess:
    return "no error";
  case cudaErrorInvalidValue:
    return "invalid argument";
  case cudaErrorMemoryAllocation:
    return "out of memory";
  case cudaErrorInvalidConfiguration:
    return "invalid configuration argument";
  case cudaErrorInvalidPitchValue:
    return "invalid pitch argument";
  case cudaErrorInvalidDevice:
    return "invalid device ordinal";
  case cudaErrorInvalidDeviceFunction:
    return "invalid device function";
  case cudaErrorInvalidResourceHandle:
    return "invalid resource handle";
  case cudaErrorMissingConfiguration:
    return "__global__ function call is not configured";
  default:
    return "unknown error";
  }
}

cudaError_t cudaGetDeviceCount(int *count) {
  *count = 1;
  return cudaSuccess;
}

cudaError_t cudaSetDevice(int device) {
  if (device != 0)
    return fail(cudaErrorInvalidDevice);
  runtime().currentDevice = device;
  return cudaSuccess;
}

cudaError_t cudaGetDevice(int *device) {
  *device = runtime().currentDevice;
  return cudaSuccess;
}

cudaError_t cudaGetDeviceProperties(cudaDeviceProp *prop, int device) {
  if (device != 0)
    return fail(cudaErrorInvalidDevice);
  std::memset(prop, 0, sizeof *prop);
  std::snprintf(prop->name, sizeof prop->name, "Loom fake CUDA device");
  prop->totalGlobalMem = size_t{80} << 30;
  prop->sharedMemPerBlock = kDefaultDynamicShared;
  prop->sharedMemPerBlockOptin = kMaxDynamicShared;
  prop->regsPerBlock = 65536;
  prop->warpSize = 32;
  prop->maxThreadsPerBlock = kMaxBlockThreads;
  prop->maxThreadsDim[0] = prop->maxThreadsDim[1] = kMaxBlockThreads;
  prop->maxThreadsDim[2] = kMaxBlockZ;
  prop->maxGridSize[0] = static_cast<int>(kMaxGridX);
  prop->maxGridSize[1] = prop->maxGridSize[2] = kMaxGridYZ;
  prop->major = 9;
  prop->minor = 0;
  prop->multiProcessorCount = 132;
  return cudaSuccess;
}

cudaError_t cudaDeviceSynchronize(void) { return cudaSuccess; }

//===----------------------------------------------------------------------===//
// Memory
//===----------------------------------------------------------------------===//

cudaError_t cudaMalloc(void **out, size_t size) {
  return allocate("cudaMalloc", out, size);
}

cudaError_t cudaMallocAsync(void **out, size_t size, cudaStream_t stream) {
  {
    Device &d = device();
    std::lock_guard<std::mutex> lock(d.mutex);
    if (!liveStream(stream)) {
      violation("cudaMallocAsync: stream %p is not a live stream",
                (void *)stream);
      return fail(cudaErrorInvalidResourceHandle);
    }
  }
  return allocate("cudaMallocAsync", out, size);
}

cudaError_t cudaFree(void *pointer) { return release("cudaFree", pointer); }

cudaError_t cudaFreeAsync(void *pointer, cudaStream_t) {
  return release("cudaFreeAsync", pointer);
}

cudaError_t cudaMallocHost(void **out, size_t size) {
  *out = std::malloc(size ? size : 1);
  if (!*out)
    return fail(cudaErrorMemoryAllocation);
  Device &d = device();
  std::lock_guard<std::mutex> lock(d.mutex);
  runtime().hostAllocations.insert(*out);
  return cudaSuccess;
}

cudaError_t cudaFreeHost(void *pointer) {
  Device &d = device();
  {
    std::lock_guard<std::mutex> lock(d.mutex);
    if (pointer && !runtime().hostAllocations.erase(pointer)) {
      violation("cudaFreeHost: %p is not from cudaMallocHost", pointer);
      return fail(cudaErrorInvalidValue);
    }
  }
  std::free(pointer);
  return cudaSuccess;
}

cudaError_t cudaMemcpy(void *dst, const void *src, size_t count,
                       cudaMemcpyKind kind) {
  return copy2D("cudaMemcpy", dst, count, src, count, count, 1, kind, nullptr);
}

cudaError_t cudaMemcpyAsync(void *dst, const void *src, size_t count,
                            cudaMemcpyKind kind, cudaStream_t stream) {
  return copy2D("cudaMemcpyAsync", dst, count, src, count, count, 1, kind,
                stream);
}

cudaError_t cudaMemcpy2D(void *dst, size_t dpitch, const void *src,
                         size_t spitch, size_t width, size_t height,
                         cudaMemcpyKind kind) {
  return copy2D("cudaMemcpy2D", dst, dpitch, src, spitch, width, height, kind,
                nullptr);
}

cudaError_t cudaMemcpy2DAsync(void *dst, size_t dpitch, const void *src,
                              size_t spitch, size_t width, size_t height,
                              cudaMemcpyKind kind, cudaStream_t stream) {
  return copy2D("cudaMemcpy2DAsync", dst, dpitch, src, spitch, width, height,
                kind, stream);
}

cudaError_t cudaMemsetAsync(void *pointer, int value, size_t count,
                            cudaStream_t stream) {
  Device &d = device();
  std::lock_guard<std::mutex> lock(d.mutex);
  ++d.stats.memsets;
  if (!liveStream(stream)) {
    violation("cudaMemsetAsync: stream %p is not a live stream",
              (void *)stream);
    return fail(cudaErrorInvalidResourceHandle);
  }
  if (!inside(pointer, count, "cudaMemset", "destination"))
    return fail(cudaErrorInvalidValue);
  std::memset(pointer, value, count);
  return cudaSuccess;
}

cudaError_t cudaMemset(void *pointer, int value, size_t count) {
  return cudaMemsetAsync(pointer, value, count, nullptr);
}

//===----------------------------------------------------------------------===//
// Streams and events: everything is done when it is enqueued
//===----------------------------------------------------------------------===//

cudaError_t cudaStreamCreateWithFlags(cudaStream_t *out, unsigned int) {
  *out = reinterpret_cast<cudaStream_t>(new char);
  Device &d = device();
  std::lock_guard<std::mutex> lock(d.mutex);
  runtime().streams.insert(*out);
  return cudaSuccess;
}

cudaError_t cudaStreamCreate(cudaStream_t *out) {
  return cudaStreamCreateWithFlags(out, cudaStreamDefault);
}

cudaError_t cudaStreamDestroy(cudaStream_t stream) {
  Device &d = device();
  std::lock_guard<std::mutex> lock(d.mutex);
  if (!runtime().streams.erase(stream)) {
    violation("cudaStreamDestroy: %p is not a live stream", (void *)stream);
    return fail(cudaErrorInvalidResourceHandle);
  }
  delete reinterpret_cast<char *>(stream);
  return cudaSuccess;
}

cudaError_t cudaStreamSynchronize(cudaStream_t stream) {
  Device &d = device();
  std::lock_guard<std::mutex> lock(d.mutex);
  return liveStream(stream) ? cudaSuccess
                            : fail(cudaErrorInvalidResourceHandle);
}

cudaError_t cudaStreamQuery(cudaStream_t stream) {
  return cudaStreamSynchronize(stream);
}

cudaError_t cudaStreamWaitEvent(cudaStream_t stream, cudaEvent_t event,
                                unsigned int) {
  Device &d = device();
  std::lock_guard<std::mutex> lock(d.mutex);
  return liveStream(stream) && runtime().events.count(event)
             ? cudaSuccess
             : fail(cudaErrorInvalidResourceHandle);
}

cudaError_t cudaEventCreateWithFlags(cudaEvent_t *out, unsigned int) {
  *out = reinterpret_cast<cudaEvent_t>(new char);
  Device &d = device();
  std::lock_guard<std::mutex> lock(d.mutex);
  runtime().events.insert(*out);
  return cudaSuccess;
}

cudaError_t cudaEventCreate(cudaEvent_t *out) {
  return cudaEventCreateWithFlags(out, cudaEventDefault);
}

cudaError_t cudaEventDestroy(cudaEvent_t event) {
  Device &d = device();
  std::lock_guard<std::mutex> lock(d.mutex);
  if (!runtime().events.erase(event))
    return fail(cudaErrorInvalidResourceHandle);
  delete reinterpret_cast<char *>(event);
  return cudaSuccess;
}

cudaError_t cudaEventRecord(cudaEvent_t event, cudaStream_t stream) {
  Device &d = device();
  std::lock_guard<std::mutex> lock(d.mutex);
  return runtime().events.count(event) && liveStream(stream)
             ? cudaSuccess
             : fail(cudaErrorInvalidResourceHandle);
}

cudaError_t cudaEventSynchronize(cudaEvent_t event) {
  Device &d = device();
  std::lock_guard<std::mutex> lock(d.mutex);
  return runtime().events.count(event) ? cudaSuccess
                                       : fail(cudaErrorInvalidResourceHandle);
}

/// Every interval is a microsecond: nothing ran.
cudaError_t cudaEventElapsedTime(float *ms, cudaEvent_t start,
                                 cudaEvent_t end) {
  Device &d = device();
  std::lock_guard<std::mutex> lock(d.mutex);
  if (!runtime().events.count(start) || !runtime().events.count(end))
    return fail(cudaErrorInvalidResourceHandle);
  *ms = 1e-3f;
  return cudaSuccess;
}

//===----------------------------------------------------------------------===//
// FakeCuda.h
//===----------------------------------------------------------------------===//

void loom_fake_cuda_get_stats(loom_fake_cuda_stats *out) {
  Device &d = device();
  std::lock_guard<std::mutex> lock(d.mutex);
  *out = d.stats;
}

void loom_fake_cuda_reset_stats(void) {
  Device &d = device();
  std::lock_guard<std::mutex> lock(d.mutex);
  d.stats = {};
  d.launchesByKernel.clear();
  d.gemms.clear();
  d.cudnnExecutions.clear();
  d.lastViolation.clear();
}

const char *loom_fake_cuda_last_violation(void) {
  return device().lastViolation.c_str();
}

int64_t loom_fake_cuda_launches_of(const char *name) {
  Device &d = device();
  std::lock_guard<std::mutex> lock(d.mutex);
  int64_t count = 0;
  for (const auto &[kernel, launches] : d.launchesByKernel)
    if (kernel.find(name) != std::string::npos)
      count += launches;
  return count;
}

int32_t loom_fake_cuda_get_gemm(int64_t index, loom_fake_cuda_gemm *out) {
  Device &d = device();
  std::lock_guard<std::mutex> lock(d.mutex);
  if (index < 0 || index >= static_cast<int64_t>(d.gemms.size()))
    return 1;
  *out = d.gemms[static_cast<size_t>(index)];
  return 0;
}

} // extern "C"
