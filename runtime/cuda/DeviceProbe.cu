//===- DeviceProbe.cu - Is there a CUDA device to run on? -----------------===//
//
// Prints each visible device with its compute capability and memory. Exits
// 0 when at least one device is usable and 77 when none is (no driver, no
// device), so that tests needing a GPU can skip instead of failing.
//
//===----------------------------------------------------------------------===//

#include <cstdio>
#include <cuda_runtime.h>

int main() {
  int count = 0;
  cudaError_t status = cudaGetDeviceCount(&count);
  if (status != cudaSuccess || count == 0) {
    std::printf("no CUDA device: %s\n", status == cudaSuccess
                                            ? "none visible"
                                            : cudaGetErrorString(status));
    return 77;
  }
  for (int device = 0; device < count; ++device) {
    cudaDeviceProp prop;
    if (cudaGetDeviceProperties(&prop, device) != cudaSuccess)
      return 77;
    std::printf("device %d: %s, sm_%d%d, %.1f GiB\n", device, prop.name,
                prop.major, prop.minor,
                prop.totalGlobalMem / (1024.0 * 1024.0 * 1024.0));
  }
  return 0;
}
