//===- KernelBench.cpp - How fast the CUDA kernels run at GPT-2 shapes ----===//
//
// Times the kernels of one GPT-2 124M training step's shapes (batch 8,
// sequence 1024, width 768, 12 heads, vocabulary 50257, bf16 activations,
// f32 optimizer state) through the same entry points compiled code calls,
// and prints each call's time with its achieved TFLOP/s (GEMMs, attention)
// or GB/s (the memory-bound rest, counting each tensor read or written
// once). Attention also at GPT-2 124M's batch 64 and a grouped-query
// Llama's shapes, forward and gradient on each of its paths (cuDNN, the
// tensor-core tiles, the CUDA-core kernels), against the targets of
// cuDNN's speed. Inputs are zeros (a step is 1): the timings of these
// kernels do not depend on the values. A guide for kernel work, not a
// conformance check (CudaKernelTest is that); utils/gpu-node.sh run
// runs it last.
//
//===----------------------------------------------------------------------===//

#include "loom/loom_cpu_kernels.h"
#include "loom/loom_cuda_kernels.h"

#include <cuda_runtime.h>

#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

namespace {

using CudaKernel = int32_t (*)(const loom_call_frame *, void *const *,
                               const int64_t *, loom_cuda_context *);

constexpr int64_t kBatch = 8, kSeq = 1024, kWidth = 768, kHeads = 12,
                  kVocab = 50257, kParams = 124439808;
constexpr int64_t kTokens = kBatch * kSeq;

struct TensorType {
  loom_dtype dtype;
  std::vector<int64_t> shape;

  int64_t bytes() const {
    int64_t n = loom_dtype_bytes(dtype);
    for (int64_t extent : shape)
      n *= extent;
    return n;
  }
};

TensorType bf16(std::vector<int64_t> shape) {
  return {LOOM_DTYPE_BF16, std::move(shape)};
}
TensorType f32(std::vector<int64_t> shape) {
  return {LOOM_DTYPE_F32, std::move(shape)};
}
TensorType i32(std::vector<int64_t> shape) {
  return {LOOM_DTYPE_I32, std::move(shape)};
}

int64_t real(double value) {
  int64_t bits;
  std::memcpy(&bits, &value, sizeof bits);
  return bits;
}

/// Allocates zeroed buffers for `ins` and `outs`, calls `kernel` once to
/// warm up (cuBLASLt's and cuDNN's plans are built then), times one call
/// to choose how many to time (10, fewer for a slow one: about a quarter
/// of a second in all), then times those; prints the mean with `flops`
/// (TFLOP/s) or, when 0, the bytes of every tensor (GB/s). With `seconds`,
/// stores the mean there and prints nothing but a failure.
bool bench(const char *name, CudaKernel kernel, std::vector<TensorType> ins,
           std::vector<TensorType> outs, std::vector<int64_t> attrs,
           double flops, loom_cuda_context *context, cudaStream_t stream,
           double *seconds = nullptr) {
  std::vector<int64_t> meta = {static_cast<int64_t>(ins.size()),
                               static_cast<int64_t>(outs.size())};
  std::vector<void *> buffers;
  double bytes = 0.0;
  bool ok = true;
  for (const std::vector<TensorType> *list : {&ins, &outs})
    for (const TensorType &t : *list) {
      meta.push_back(t.dtype);
      meta.push_back(static_cast<int64_t>(t.shape.size()));
      meta.insert(meta.end(), t.shape.begin(), t.shape.end());
      void *pointer = nullptr;
      ok = ok && cudaMalloc(&pointer, t.bytes()) == cudaSuccess &&
           cudaMemset(pointer, 0, t.bytes()) == cudaSuccess;
      // A 0-d integer is a step: 1-based.
      int64_t one = 1;
      if (ok && t.shape.empty() && t.dtype == LOOM_DTYPE_I64)
        ok =
            cudaMemcpy(pointer, &one, 8, cudaMemcpyHostToDevice) == cudaSuccess;
      buffers.push_back(pointer);
      bytes += static_cast<double>(t.bytes());
    }
  meta.insert(meta.end(), attrs.begin(), attrs.end());
  cudaEvent_t start, stop;
  cudaEventCreate(&start);
  cudaEventCreate(&stop);
  // Times `runs` calls; their mean in seconds (0 after a failure).
  auto time = [&](int runs) {
    float ms = 0.0f;
    cudaEventRecord(start, stream);
    for (int i = 0; ok && i < runs; ++i)
      ok = kernel(nullptr, buffers.data(), meta.data(), context) == 0;
    cudaEventRecord(stop, stream);
    ok = ok && loom_cuda_context_synchronize(context) == 0;
    cudaEventElapsedTime(&ms, start, stop);
    return ok ? ms / 1e3 / runs : 0.0;
  };
  time(1);
  double probe = time(1);
  int runs = probe > 0.0 ? static_cast<int>(0.25 / probe) : 1;
  double mean = time(runs < 1 ? 1 : runs > 10 ? 10 : runs);
  if (seconds)
    *seconds = mean;
  if (!ok)
    std::printf("%-28s failed: %s %s\n", name, loom_cuda_last_error(),
                cudaGetErrorString(cudaGetLastError()));
  else if (seconds)
    ; // the caller prints
  else if (flops > 0.0)
    std::printf("%-28s %9.1f us  %7.1f TFLOP/s\n", name, mean * 1e6,
                flops / mean / 1e12);
  else
    std::printf("%-28s %9.1f us  %7.1f GB/s\n", name, mean * 1e6,
                bytes / mean / 1e9);
  for (void *pointer : buffers)
    cudaFree(pointer);
  cudaEventDestroy(start);
  cudaEventDestroy(stop);
  return ok;
}

/// Attention forward and gradient, causal, bf16, at GPT-2 124M's shapes
/// (batch 8 and 64, 12 heads, sequence 1024, head dimension 64) and a
/// grouped-query Llama's (batch 8, 32 query heads, 8 key/value heads,
/// sequence 2048, head dimension 128), on each path LOOM_CUDA_ATTENTION
/// names, printing the time, TFLOP/s and the path that ran
/// (loom_cuda_attention_path): a path that refuses the call shows there.
/// FLOPs count causal attention as half of 4 B Hq S^2 D forward, 2.5
/// times that backward (the convention of PyTorch's and cuDNN's own
/// figures).
bool attentionBench(loom_cuda_context *context, cudaStream_t stream) {
  struct Shape {
    const char *model;
    int64_t batch, heads, kvHeads, seq, dim;
  };
  const Shape shapes[] = {{"GPT-2 124M", 8, 12, 12, 1024, 64},
                          {"GPT-2 124M", 64, 12, 12, 1024, 64},
                          {"Llama", 8, 32, 8, 2048, 128}};
  std::printf("attention, causal, bf16; targets at GPT-2 124M batch 64: "
              "forward <= 0.40 ms, backward <= 1.5 ms (cuDNN through "
              "PyTorch on an H200: 0.332 / 1.219 ms)\n");
  bool ok = true;
  for (const Shape &sh : shapes) {
    const int64_t b = sh.batch, s = sh.seq, h = sh.heads, kv = sh.kvHeads,
                  d = sh.dim;
    // causal, scale, has_step, dropout rate, seed, key, has_positions
    std::vector<int64_t> attrs = {
        1, real(1.0 / std::sqrt(double(d))), 0, real(0.0), 0, 0, 0};
    const double flops = 2.0 * b * h * s * s * d;
    TensorType q = bf16({b, s, h, d}), k = bf16({b, s, kv, d}),
               lse = f32({b, h, s});
    for (const char *path : {"cudnn", "tiles", "simt"}) {
      setenv("LOOM_CUDA_ATTENTION", path, 1);
      for (bool grad : {false, true}) {
        char name[96];
        std::snprintf(name, sizeof name, "attention %s B%lld %s %s", sh.model,
                      static_cast<long long>(b), grad ? "bwd" : "fwd", path);
        double seconds = 0.0;
        bool ran = grad ? bench(name, loom_cuda_attention_grad,
                                {q, q, k, k, q, lse}, {q, k, k}, attrs,
                                2.5 * flops, context, stream, &seconds)
                        : bench(name, loom_cuda_attention, {q, k, k}, {q, lse},
                                attrs, flops, context, stream, &seconds);
        if (ran)
          std::printf("%-40s %9.3f ms  %7.1f TFLOP/s  [%s]\n", name,
                      seconds * 1e3,
                      (grad ? 2.5 : 1.0) * flops / seconds / 1e12,
                      loom_cuda_attention_path(context));
        ok &= ran;
      }
    }
  }
  unsetenv("LOOM_CUDA_ATTENTION");
  return ok;
}

} // namespace

int main() {
  int count = 0;
  if (cudaGetDeviceCount(&count) != cudaSuccess || count == 0) {
    std::printf("skipped: no CUDA device\n");
    return 77;
  }
  cudaStream_t stream = nullptr;
  loom_cuda_context *context = nullptr;
  if (cudaStreamCreate(&stream) != cudaSuccess ||
      loom_cuda_context_create(stream, int64_t{256} << 20, &context) != 0) {
    std::printf("no context: %s\n", loom_cuda_last_error());
    return 1;
  }
  const int64_t b = kBatch, s = kSeq, c = kWidth, h = kHeads, d = c / h;
  const double gemm = 2.0 * kTokens * c; // times N
  // transpose_lhs, transpose_rhs, epilogue (none)
  std::vector<int64_t> noTranspose = {0, 0, 0};
  bool ok = true;
  std::printf("GPT-2 124M shapes: batch %lld, sequence %lld, bf16\n",
              static_cast<long long>(b), static_cast<long long>(s));
  ok &=
      bench("matmul qkv", loom_cuda_matmul, {bf16({b, s, c}), bf16({c, 3 * c})},
            {bf16({b, s, 3 * c})}, noTranspose, gemm * 3 * c, context, stream);
  ok &= bench("matmul mlp up", loom_cuda_matmul,
              {bf16({b, s, c}), bf16({c, 4 * c})}, {bf16({b, s, 4 * c})},
              noTranspose, gemm * 4 * c, context, stream);
  // Epilogue 3, bias_gelu_aux: pre = x.W + b and gelu(pre) from one call.
  ok &= bench("matmul mlp up +bias_gelu_aux", loom_cuda_matmul,
              {bf16({b, s, c}), bf16({c, 4 * c}), bf16({4 * c})},
              {bf16({b, s, 4 * c}), bf16({b, s, 4 * c})}, {0, 0, 3},
              gemm * 4 * c, context, stream);
  ok &= bench("matmul mlp up dW (lhs^T)", loom_cuda_matmul,
              {bf16({kTokens, c}), bf16({kTokens, 4 * c})}, {f32({c, 4 * c})},
              {1, 0, 0}, gemm * 4 * c, context, stream);
  // The residual and bias-gradient epilogues, each twice: cuBLASLt's (C
  // with beta = 1, BGRADA), then LOOM_CUDA_GEMM_EPILOGUES=basic (a plain
  // GEMM, then Matmul.cu's kernels), for the difference; dgelu_bias_grad
  // takes Matmul.cu's fused pass either way. Against
  // the unfused step: "matmul qkv" / "mlp up dW" plus "add (residual)",
  // "gelu_grad" and "reduce_sum (bias grad)" below.
  for (bool basic : {false, true}) {
    if (basic)
      setenv("LOOM_CUDA_GEMM_EPILOGUES", "basic", 1);
    std::string suffix = basic ? " (basic)" : "";
    ok &= bench(
        ("matmul mlp down +bias_residual" + suffix).c_str(), loom_cuda_matmul,
        {bf16({b, s, 4 * c}), bf16({4 * c, c}), bf16({c}), bf16({b, s, c})},
        {bf16({b, s, c})}, {0, 0, LOOM_EPILOGUE_BIAS_RESIDUAL}, gemm * 4 * c,
        context, stream);
    ok &= bench(("matmul mlp down dW +bias_grad" + suffix).c_str(),
                loom_cuda_matmul, {bf16({kTokens, 4 * c}), bf16({kTokens, c})},
                {bf16({4 * c, c}), bf16({c})}, {1, 0, LOOM_EPILOGUE_BIAS_GRAD},
                gemm * 4 * c, context, stream);
    ok &= bench(
        ("matmul mlp dX +dgelu_bias_grad" + suffix).c_str(), loom_cuda_matmul,
        {bf16({b, s, c}), bf16({4 * c, c}), bf16({b, s, 4 * c})},
        {bf16({b, s, 4 * c}), bf16({4 * c})},
        {0, 1, LOOM_EPILOGUE_DGELU_BIAS_GRAD}, gemm * 4 * c, context, stream);
  }
  unsetenv("LOOM_CUDA_GEMM_EPILOGUES");
  ok &= bench("matmul lm head (rhs^T)", loom_cuda_matmul,
              {bf16({b, s, c}), bf16({kVocab, c})}, {bf16({b, s, kVocab})},
              {0, 1, 0}, gemm * kVocab, context, stream);
  // The lm head's gradients: into its input, and into the (tied) embedding.
  // All three stage the vocabulary-wide matrix (GemmStaging.h).
  ok &= bench("matmul lm head dX", loom_cuda_matmul,
              {bf16({b, s, kVocab}), bf16({kVocab, c})}, {bf16({b, s, c})},
              noTranspose, gemm * kVocab, context, stream);
  ok &= bench("matmul lm head dW (lhs^T)", loom_cuda_matmul,
              {bf16({kTokens, kVocab}), bf16({kTokens, c})},
              {bf16({kVocab, c})}, {1, 0, 0}, gemm * kVocab, context, stream);
  // Each twice: the default kernels, then the block-per-row ones
  // LOOM_CUDA_NORM=block keeps, for the difference.
  for (bool fallback : {false, true}) {
    if (fallback)
      setenv("LOOM_CUDA_NORM", "block", 1);
    std::string suffix = fallback ? " (block)" : "";
    ok &= bench(("layernorm" + suffix).c_str(), loom_cuda_layernorm,
                {bf16({b, s, c}), f32({c}), f32({c})}, {bf16({b, s, c})},
                {real(1e-5)}, 0.0, context, stream);
    ok &= bench(("layernorm_grad" + suffix).c_str(), loom_cuda_layernorm_grad,
                {bf16({b, s, c}), bf16({b, s, c}), f32({c})},
                {bf16({b, s, c}), f32({c}), f32({c})}, {real(1e-5)}, 0.0,
                context, stream);
  }
  unsetenv("LOOM_CUDA_NORM");
  ok &= bench("gelu", loom_cuda_gelu, {bf16({b, s, 4 * c})},
              {bf16({b, s, 4 * c})}, {}, 0.0, context, stream);
  ok &= bench("gelu_grad", loom_cuda_gelu_grad,
              {bf16({b, s, 4 * c}), bf16({b, s, 4 * c})}, {bf16({b, s, 4 * c})},
              {}, 0.0, context, stream);
  ok &=
      bench("add (residual)", loom_cuda_add, {bf16({b, s, c}), bf16({b, s, c})},
            {bf16({b, s, c})}, {}, 0.0, context, stream);
  // A bias add and its gelu in one fused_elementwise: add(r0, r1) -> r2,
  // gelu(r2) -> r3 (opcodes 0 and 11), result r3; against "gelu" above,
  // the cost of the program's interpretation and the bias' broadcast.
  ok &= bench("fused bias + gelu", loom_cuda_fused_elementwise,
              {bf16({b, s, 4 * c}), bf16({4 * c})}, {bf16({b, s, 4 * c})},
              {2, 0, 0, 1, 11, 2, 0, 3}, 0.0, context, stream);
  ok &= bench("reduce_sum (bias grad)", loom_cuda_reduce_sum,
              {bf16({b, s, 4 * c})}, {f32({4 * c})}, {2, 0, 1, 0}, 0.0, context,
              stream);
  ok &=
      bench("reduce_sum (bias grad 768)", loom_cuda_reduce_sum,
            {bf16({b, s, c})}, {f32({c})}, {2, 0, 1, 0}, 0.0, context, stream);
  ok &= bench("cross_entropy", loom_cuda_cross_entropy,
              {bf16({b, s, kVocab}), i32({b, s})}, {f32({})}, {0}, 0.0, context,
              stream);
  ok &= bench("cross_entropy_grad", loom_cuda_cross_entropy_grad,
              {f32({}), bf16({b, s, kVocab}), i32({b, s})},
              {bf16({b, s, kVocab})}, {0}, 0.0, context, stream);
  ok &=
      bench("embedding", loom_cuda_embedding, {bf16({kVocab, c}), i32({b, s})},
            {bf16({b, s, c})}, {}, 0.0, context, stream);
  ok &= bench("embedding_grad (f32)", loom_cuda_embedding_grad,
              {bf16({b, s, c}), i32({b, s})}, {f32({kVocab, c})}, {}, 0.0,
              context, stream);
  ok &= bench("adamw_update (124M, f32)", loom_cuda_adamw_update,
              {f32({kParams}),
               f32({kParams}),
               f32({kParams}),
               f32({kParams}),
               {LOOM_DTYPE_I64, {}}},
              {f32({kParams}), f32({kParams}), f32({kParams})},
              {real(6e-4), real(0.9), real(0.95), real(1e-8), real(0.1)}, 0.0,
              context, stream);
  // The same update over GPT-2's 148 parameters (wte, wpe, 12 layers of 12,
  // ln_f's 2) in one multi call.
  const std::vector<std::vector<int64_t>> layer = {
      {c}, {c}, {c, 3 * c}, {3 * c}, {c, c},     {c}, //
      {c}, {c}, {c, 4 * c}, {4 * c}, {4 * c, c}, {c}};
  std::vector<std::vector<int64_t>> shapes = {{kVocab, c}, {1024, c}};
  for (int64_t l = 0; l < 12; ++l)
    shapes.insert(shapes.end(), layer.begin(), layer.end());
  shapes.insert(shapes.end(), 2, {c});
  std::vector<TensorType> multiIns, multiOuts;
  for (const std::vector<int64_t> &shape : shapes) {
    multiIns.insert(multiIns.end(), 4, f32(shape));
    multiOuts.insert(multiOuts.end(), 3, f32(shape));
  }
  multiIns.push_back({LOOM_DTYPE_I64, {}});
  ok &= bench("adamw_update_multi (148)", loom_cuda_adamw_update_multi,
              multiIns, multiOuts,
              {real(6e-4), real(0.9), real(0.95), real(1e-8), real(0.1)}, 0.0,
              context, stream);
  ok &= attentionBench(context, stream);
  loom_cuda_context_destroy(context);
  cudaStreamDestroy(stream);
  return ok ? 0 : 1;
}
