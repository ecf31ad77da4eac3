//===- CudaSmokeTest.cu - The CUDA toolchain builds kernels that run ------===//
//
// Runs y = a*x + y on the device and compares with the same loop on the
// CPU (exact in f32: one fused multiply-add per element on both sides is
// not guaranteed, so the tolerance is 1 ulp-scale, 1e-6 relative). Exits 77
// without a device.
//
//===----------------------------------------------------------------------===//

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cuda_runtime.h>
#include <vector>

__global__ void saxpy_forward_kernel(int n, float a, const float *x, float *y) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n)
    y[i] = a * x[i] + y[i];
}

#define CHECK_CUDA(call)                                                       \
  do {                                                                         \
    cudaError_t err = (call);                                                  \
    if (err != cudaSuccess) {                                                  \
      std::fprintf(stderr, "%s:%d: %s\n", __FILE__, __LINE__,                  \
                   cudaGetErrorString(err));                                   \
      return 1;                                                                \
    }                                                                          \
  } while (0)

int main() {
  int count = 0;
  if (cudaGetDeviceCount(&count) != cudaSuccess || count == 0) {
    std::printf("skipped: no CUDA device\n");
    return 77;
  }
  const int n = 1 << 20;
  const float a = 1.5f;
  std::vector<float> x(n), y(n), expected(n);
  for (int i = 0; i < n; ++i) {
    x[i] = std::sin(0.001f * i);
    y[i] = std::cos(0.002f * i);
    expected[i] = a * x[i] + y[i];
  }
  float *dx = nullptr, *dy = nullptr;
  CHECK_CUDA(cudaMalloc(&dx, n * sizeof(float)));
  CHECK_CUDA(cudaMalloc(&dy, n * sizeof(float)));
  CHECK_CUDA(
      cudaMemcpy(dx, x.data(), n * sizeof(float), cudaMemcpyHostToDevice));
  CHECK_CUDA(
      cudaMemcpy(dy, y.data(), n * sizeof(float), cudaMemcpyHostToDevice));
  saxpy_forward_kernel<<<(n + 255) / 256, 256>>>(n, a, dx, dy);
  CHECK_CUDA(cudaGetLastError());
  CHECK_CUDA(
      cudaMemcpy(y.data(), dy, n * sizeof(float), cudaMemcpyDeviceToHost));
  CHECK_CUDA(cudaFree(dx));
  CHECK_CUDA(cudaFree(dy));
  for (int i = 0; i < n; ++i) {
    float tol = 1e-6f * std::max(1.0f, std::fabs(expected[i]));
    if (std::fabs(y[i] - expected[i]) > tol) {
      std::fprintf(stderr, "mismatch at %d: %g vs %g\n", i, y[i], expected[i]);
      return 1;
    }
  }
  std::printf("saxpy on %d elements matches the CPU\n", n);
  return 0;
}
