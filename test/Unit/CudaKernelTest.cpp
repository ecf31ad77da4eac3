//===- CudaKernelTest.cpp - The CUDA kernels against the CPU kernels ------===//
//
// Conformance of runtime/cuda/kernels (loom_cuda_kernels.h) with the CPU
// kernel library, link two of docs/design.md's chain of numerical trust: each
// case builds one op's meta exactly as passes/Lowering/KernelCall.cpp
// writes it, runs loom_cpu_<op> on host buffers and loom_cuda_<op> on
// device buffers holding the same random inputs, and compares every result.
// The collectives run on a loopback communicator group (see Collectives);
// the split ones (a start, then collective_wait) must give the blocking
// calls' bytes.
//
// Each case runs twice. In the f32 run every float tensor is f32 on both
// sides. In the bf16 run the tensors a mixed-precision step would keep in
// bf16 (activations, weights' compute copies) are bf16 on the device, and
// the CPU kernels (f32 only) get the same values, rounded to bf16 first;
// statistics (lse, the moments, the loss) stay f32. An element passes when
//
//   |got - want| <= tol * (|want| + rms(want))
//
// with tol = 1e-5 (f32 run) or 1e-2 (bf16 run; 2e-2 for attention, whose
// bf16 calls run on the tensor-core kernels, which round P and dS to bf16
// before they multiply, as FlashAttention does: 1.4e-2 measured in their
// host emulation, test/Unit/AttentionTilesTest.cpp): the
// rms term keeps the test meaningful for results whose elements cancel to
// near zero. Attention's bf16 gradients are held to 1e-2 as a whole
// (||got - want|| / ||want||) and each element to 4 x 2e-2: on an H200 a
// few elements of dK (1 of 3072 at 24 keys; 9 of 2 million, cuDNN against
// the tiles, at Llama's shapes) strayed past 2e-2 of the rms alone. Dropout
// masks must match exactly (the same elements are zero) and, in f32, so must
// the kept values. Integer results match exactly.
//
// A tiny harness of its own (no GoogleTest), so that a GPU machine without
// LLVM can build it without the rest of the tree (runtime/cuda/standalone).
// It exits 77 when there is no CUDA device (ctest SKIP_RETURN_CODE), 1 when
// a case fails. An argument runs only the cases whose name contains it.
//
// Built with LOOM_CUDA_FAKE_DEVICE (LoomCudaKernelHostTest), it runs on the
// fake device of test/FakeCuda, which carries out copies but runs no
// kernel and no GEMM: every case then checks the host side only. The CUDA
// kernel must accept each call the CPU kernel accepts (its status is 0),
// enqueue device work for it, and break none of the fake device's rules
// (launch limits, memory ranges, cuBLASLt's shapes); the host-side errors
// must still fail with their messages. Results are not compared, and the
// errors that only the device sees are not expected.
//
//===----------------------------------------------------------------------===//

#include "loom/loom_cpu_kernels.h"
#include "loom/loom_cuda_kernels.h"

#include <cuda_runtime.h>

#ifdef LOOM_CUDA_FAKE_DEVICE
#include "FakeCuda.h"

#include <cublasLt.h>
#endif

#include <algorithm>
#include <array>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <map>
#include <random>
#include <string>
#include <utility>
#include <vector>

#include <dlfcn.h>
#include <unistd.h>

namespace {

using CpuKernel = int32_t (*)(const loom_call_frame *, void *const *,
                              const int64_t *);
using CudaKernel = int32_t (*)(const loom_call_frame *, void *const *,
                               const int64_t *, loom_cuda_context *);

/// Whether the kernels run on the fake device (see the file comment).
#ifdef LOOM_CUDA_FAKE_DEVICE
constexpr bool kHostOnly = true;
#else
constexpr bool kHostOnly = false;
#endif

enum class Precision { F32, BF16 };

const char *nameOf(Precision precision) {
  return precision == Precision::F32 ? "f32" : "bf16";
}

//===----------------------------------------------------------------------===//
// bf16 on the host
//===----------------------------------------------------------------------===//

uint16_t toBf16(float value) {
  uint32_t bits;
  std::memcpy(&bits, &value, sizeof bits);
  if (std::isnan(value))
    return static_cast<uint16_t>((bits >> 16) | 0x40);
  bits += 0x7fff + ((bits >> 16) & 1); // round to nearest even
  return static_cast<uint16_t>(bits >> 16);
}

float fromBf16(uint16_t half) {
  uint32_t bits = static_cast<uint32_t>(half) << 16;
  float value;
  std::memcpy(&value, &bits, sizeof value);
  return value;
}

float roundBf16(float value) { return fromBf16(toBf16(value)); }

//===----------------------------------------------------------------------===//
// Cases
//===----------------------------------------------------------------------===//

/// One operand or result: its element type as the CPU kernel sees it (f32,
/// i32 or i64), its shape, whether the bf16 run makes it bf16, and (for
/// operands) its values.
struct Tensor {
  loom_dtype dtype = LOOM_DTYPE_F32;
  std::vector<int64_t> shape;
  bool lowPrecision = true;
  std::vector<double> values;

  int64_t size() const {
    int64_t n = 1;
    for (int64_t extent : shape)
      n *= extent;
    return n;
  }
  loom_dtype dtypeIn(Precision precision) const {
    return precision == Precision::BF16 && lowPrecision &&
                   dtype == LOOM_DTYPE_F32
               ? LOOM_DTYPE_BF16
               : dtype;
  }
};

struct Case {
  std::string name;
  CpuKernel cpu = nullptr;
  CudaKernel cuda = nullptr;
  std::vector<Tensor> ins, outs;
  std::vector<int64_t> attrs;
  const loom_call_frame *frame = nullptr;
  /// The CUDA kernel's frame, when it differs from the CPU kernel's (the
  /// collectives: a comm whose callbacks take device pointers).
  const loom_call_frame *cudaFrame = nullptr;
  /// Dropout: the zeros of the results match exactly, and in f32 the
  /// values too.
  bool exactMask = false;
  /// No bf16 run (the op keeps its tensors f32).
  bool f32Only = false;
  /// The bf16 run's tol (see the file comment).
  double bf16Tolerance = 1e-2;
  /// When set, the bf16 run's results are held to it as a whole, the
  /// relative error of their norms (||got - want|| / ||want||), and each
  /// element only to kOutlierFactor times tol: for results that are long
  /// sums of bf16-rounded products (attention's gradients), where a few
  /// elements that cancel to near zero stray by several bf16 steps of the
  /// row's scale while the tensor is well within bf16's precision.
  double bf16NormTolerance = 0.0;
  /// What loom_cuda_attention_path must start with after the call, in the
  /// f32 and the bf16 run ("": not checked).
  std::array<std::string, 2> attentionPath;
};

std::mt19937 &generator() {
  static std::mt19937 rng(20240611);
  return rng;
}

Tensor uniform(std::vector<int64_t> shape, double lo = -1.0, double hi = 1.0) {
  Tensor t;
  t.shape = std::move(shape);
  std::uniform_real_distribution<double> dist(lo, hi);
  t.values.resize(t.size());
  for (double &value : t.values)
    value = static_cast<float>(dist(generator()));
  return t;
}

/// Uniform values in [lo, hi) on a grid of `step`: many ties.
Tensor quantized(std::vector<int64_t> shape, double step, double lo,
                 double hi) {
  Tensor t = uniform(std::move(shape), lo, hi);
  for (double &value : t.values)
    value = std::round(value / step) * step;
  return t;
}

Tensor integers(std::vector<int64_t> shape, int64_t lo, int64_t hi,
                loom_dtype dtype = LOOM_DTYPE_I32) {
  Tensor t;
  t.dtype = dtype;
  t.shape = std::move(shape);
  t.lowPrecision = false;
  std::uniform_int_distribution<int64_t> dist(lo, hi - 1);
  t.values.resize(t.size());
  for (double &value : t.values)
    value = static_cast<double>(dist(generator()));
  return t;
}

Tensor scalarInt(int64_t value, loom_dtype dtype = LOOM_DTYPE_I64) {
  Tensor t;
  t.dtype = dtype;
  t.lowPrecision = false;
  t.values = {static_cast<double>(value)};
  return t;
}

/// A result of `shape`.
Tensor result(std::vector<int64_t> shape, bool lowPrecision = true,
              loom_dtype dtype = LOOM_DTYPE_F32) {
  Tensor t;
  t.dtype = dtype;
  t.shape = std::move(shape);
  t.lowPrecision = lowPrecision;
  return t;
}

Tensor f32(Tensor t) {
  t.lowPrecision = false;
  return t;
}

int64_t real(double value) {
  int64_t bits;
  std::memcpy(&bits, &value, sizeof bits);
  return bits;
}

/// An array attribute: its length, then its elements.
void appendArray(std::vector<int64_t> &attrs, std::vector<int64_t> values) {
  attrs.push_back(static_cast<int64_t>(values.size()));
  attrs.insert(attrs.end(), values.begin(), values.end());
}

//===----------------------------------------------------------------------===//
// Running a case
//===----------------------------------------------------------------------===//

std::vector<int64_t> metaOf(const Case &c, Precision precision) {
  std::vector<int64_t> meta = {static_cast<int64_t>(c.ins.size()),
                               static_cast<int64_t>(c.outs.size())};
  for (const std::vector<Tensor> *list : {&c.ins, &c.outs})
    for (const Tensor &t : *list) {
      meta.push_back(t.dtypeIn(precision));
      meta.push_back(static_cast<int64_t>(t.shape.size()));
      meta.insert(meta.end(), t.shape.begin(), t.shape.end());
    }
  meta.insert(meta.end(), c.attrs.begin(), c.attrs.end());
  return meta;
}

/// The bytes of `values` stored as `dtype`.
std::vector<uint8_t> encode(const std::vector<double> &values,
                            loom_dtype dtype) {
  std::vector<uint8_t> bytes(values.size() * loom_dtype_bytes(dtype) + 8);
  for (size_t i = 0; i < values.size(); ++i) {
    uint8_t *at = bytes.data() + i * loom_dtype_bytes(dtype);
    switch (dtype) {
    case LOOM_DTYPE_F32: {
      float value = static_cast<float>(values[i]);
      std::memcpy(at, &value, 4);
      break;
    }
    case LOOM_DTYPE_BF16: {
      uint16_t value = toBf16(static_cast<float>(values[i]));
      std::memcpy(at, &value, 2);
      break;
    }
    case LOOM_DTYPE_I32: {
      int32_t value = static_cast<int32_t>(values[i]);
      std::memcpy(at, &value, 4);
      break;
    }
    default: {
      int64_t value = static_cast<int64_t>(values[i]);
      std::memcpy(at, &value, 8);
      break;
    }
    }
  }
  return bytes;
}

std::vector<double> decode(const uint8_t *bytes, int64_t n, loom_dtype dtype) {
  std::vector<double> values(n);
  for (int64_t i = 0; i < n; ++i) {
    const uint8_t *at = bytes + i * loom_dtype_bytes(dtype);
    switch (dtype) {
    case LOOM_DTYPE_F32: {
      float value;
      std::memcpy(&value, at, 4);
      values[i] = value;
      break;
    }
    case LOOM_DTYPE_BF16: {
      uint16_t value;
      std::memcpy(&value, at, 2);
      values[i] = fromBf16(value);
      break;
    }
    case LOOM_DTYPE_I32: {
      int32_t value;
      std::memcpy(&value, at, 4);
      values[i] = value;
      break;
    }
    default: {
      int64_t value;
      std::memcpy(&value, at, 8);
      values[i] = static_cast<double>(value);
      break;
    }
    }
  }
  return values;
}

/// The operands of `c` as the precision's run sees them: bf16 tensors'
/// values rounded, so that both sides compute on the same numbers.
std::vector<Tensor> inputsFor(const Case &c, Precision precision) {
  std::vector<Tensor> ins = c.ins;
  for (Tensor &t : ins)
    if (t.dtypeIn(precision) == LOOM_DTYPE_BF16)
      for (double &value : t.values)
        value = roundBf16(static_cast<float>(value));
  return ins;
}

/// Runs the CPU kernel; returns the results as doubles.
bool runCpu(const Case &c, const std::vector<Tensor> &ins,
            std::vector<std::vector<double>> &results) {
  std::vector<int64_t> meta = metaOf(c, Precision::F32);
  std::vector<std::vector<uint8_t>> storage;
  std::vector<void *> buffers;
  for (const Tensor &t : ins)
    storage.push_back(encode(t.values, t.dtype));
  for (const Tensor &t : c.outs)
    storage.push_back(
        std::vector<uint8_t>(t.size() * loom_dtype_bytes(t.dtype) + 8));
  for (auto &bytes : storage)
    buffers.push_back(bytes.data());
  if (int32_t status = c.cpu(c.frame, buffers.data(), meta.data())) {
    std::printf("  the CPU kernel failed (%d): %s\n", status,
                loom_cpu_last_error());
    return false;
  }
  for (size_t r = 0; r < c.outs.size(); ++r)
    results.push_back(decode(storage[ins.size() + r].data(), c.outs[r].size(),
                             c.outs[r].dtype));
  return true;
}

#define CHECK_CUDA(call)                                                       \
  do {                                                                         \
    cudaError_t status = (call);                                               \
    if (status != cudaSuccess) {                                               \
      std::printf("  %s: %s\n", #call, cudaGetErrorString(status));            \
      return false;                                                            \
    }                                                                          \
  } while (0)

/// Device buffers freed on scope exit.
struct DeviceBuffers {
  std::vector<void *> pointers;
  ~DeviceBuffers() {
    for (void *pointer : pointers)
      cudaFree(pointer);
  }
};

/// Runs the CUDA kernel, then `after` (when given: more calls on the same
/// device buffers, operands then results); returns the results' bytes.
bool runCudaBytes(
    const Case &c, const std::vector<Tensor> &ins, Precision precision,
    loom_cuda_context *context, std::vector<std::vector<uint8_t>> &results,
    const std::function<bool(void *const *buffers)> &after = nullptr) {
  std::vector<int64_t> meta = metaOf(c, precision);
  DeviceBuffers device;
  for (size_t t = 0; t < ins.size() + c.outs.size(); ++t) {
    const Tensor &tensor = t < ins.size() ? ins[t] : c.outs[t - ins.size()];
    loom_dtype dtype = tensor.dtypeIn(precision);
    int64_t bytes =
        std::max<int64_t>(1, tensor.size()) * loom_dtype_bytes(dtype);
    void *pointer = nullptr;
    CHECK_CUDA(cudaMalloc(&pointer, bytes));
    device.pointers.push_back(pointer);
    if (t < ins.size()) {
      std::vector<uint8_t> host = encode(tensor.values, dtype);
      CHECK_CUDA(cudaMemcpy(pointer, host.data(),
                            tensor.size() * loom_dtype_bytes(dtype),
                            cudaMemcpyHostToDevice));
    } else {
      // NaN-filled, so that an element a kernel forgets to write shows.
      CHECK_CUDA(cudaMemset(pointer, 0xff, bytes));
    }
  }
  const loom_call_frame *frame = c.cudaFrame ? c.cudaFrame : c.frame;
#ifdef LOOM_CUDA_FAKE_DEVICE
  loom_fake_cuda_reset_stats();
#endif
  if (int32_t status =
          c.cuda(frame, device.pointers.data(), meta.data(), context)) {
    std::printf("  the CUDA kernel failed (%d): %s\n", status,
                loom_cuda_last_error());
    return false;
  }
  const std::string &wantPath =
      c.attentionPath[precision == Precision::BF16 ? 1 : 0];
  std::string path = loom_cuda_attention_path(context);
  if (path.compare(0, wantPath.size(), wantPath) != 0) {
    std::printf("  ran on \"%s\", expected \"%s\"\n", path.c_str(),
                wantPath.c_str());
    return false;
  }
#ifdef LOOM_CUDA_FAKE_DEVICE
  loom_fake_cuda_stats stats;
  loom_fake_cuda_get_stats(&stats);
  bool empty = std::all_of(c.outs.begin(), c.outs.end(),
                           [](const Tensor &t) { return t.size() == 0; });
  // A collective's work may be all in its communicator's callbacks (a split
  // start only hands the transfer over).
  bool enqueued = stats.launches + stats.gemms + stats.copies + stats.memsets +
                      stats.cudnn_executions >
                  0;
  // Split-K partial sums are reduced in f32, never in a bf16 output (see
  // Matmul.cu).
  for (int64_t g = 0; g < stats.gemms; ++g) {
    loom_fake_cuda_gemm gemm;
    if (loom_fake_cuda_get_gemm(g, &gemm) == 0 &&
        (gemm.reduction_schemes &
         ~uint32_t{CUBLASLT_REDUCTION_SCHEME_COMPUTE_TYPE})) {
      std::printf("  GEMM %lld may reduce split-K partial sums in the output "
                  "type (reduction schemes 0x%x)\n",
                  static_cast<long long>(g), gemm.reduction_schemes);
      return false;
    }
  }
  // An attention call on cuDNN is one execution of its plan; no other
  // call executes one.
  bool onCudnn = !wantPath.empty() && path.compare(0, 5, "cudnn") == 0;
  if (onCudnn != (stats.cudnn_executions == 1) || stats.cudnn_executions > 1) {
    std::printf("  %lld cuDNN executions for a call on \"%s\"\n",
                static_cast<long long>(stats.cudnn_executions), path.c_str());
    return false;
  }
  if (stats.violations != 0 || (!empty && !c.cudaFrame && !enqueued)) {
    std::printf("  on the fake device: %lld violation(s) (%s), %lld launches, "
                "%lld GEMMs, %lld copies, %lld memsets\n",
                static_cast<long long>(stats.violations),
                loom_fake_cuda_last_violation(),
                static_cast<long long>(stats.launches),
                static_cast<long long>(stats.gemms),
                static_cast<long long>(stats.copies),
                static_cast<long long>(stats.memsets));
    return false;
  }
#endif
  if (after && !after(device.pointers.data()))
    return false;
  if (int32_t status = loom_cuda_context_synchronize(context)) {
    std::printf("  the CUDA kernel failed on the device (%d): %s\n", status,
                loom_cuda_last_error());
    return false;
  }
  for (size_t r = 0; r < c.outs.size(); ++r) {
    const Tensor &out = c.outs[r];
    int64_t bytes = out.size() * loom_dtype_bytes(out.dtypeIn(precision));
    std::vector<uint8_t> host(bytes + 8);
    CHECK_CUDA(cudaMemcpy(host.data(), device.pointers[ins.size() + r], bytes,
                          cudaMemcpyDeviceToHost));
    results.push_back(std::move(host));
  }
  return true;
}

/// Runs the CUDA kernel; returns the results as doubles.
bool runCuda(const Case &c, const std::vector<Tensor> &ins, Precision precision,
             loom_cuda_context *context,
             std::vector<std::vector<double>> &results) {
  std::vector<std::vector<uint8_t>> bytes;
  if (!runCudaBytes(c, ins, precision, context, bytes))
    return false;
  for (size_t r = 0; r < c.outs.size(); ++r)
    results.push_back(decode(bytes[r].data(), c.outs[r].size(),
                             c.outs[r].dtypeIn(precision)));
  return true;
}

/// Compares one result; prints the worst element; returns whether all pass.
bool compare(const Case &c, size_t r, Precision precision,
             const std::vector<double> &want, const std::vector<double> &got) {
  const Tensor &out = c.outs[r];
  bool integer = out.dtype != LOOM_DTYPE_F32;
  // In the bf16 run even an f32 result is computed from bf16 operands.
  double tol = precision == Precision::F32 ? 1e-5 : c.bf16Tolerance;
  bool exact = integer || (c.exactMask && precision == Precision::F32);
  double squares = 0.0;
  for (double value : want)
    squares += value * value;
  double rms = want.empty() ? 0.0 : std::sqrt(squares / want.size());
  double worst = 0.0;
  int64_t worstAt = -1, failures = 0;
  bool byNorm = precision == Precision::BF16 && c.bf16NormTolerance > 0;
  constexpr double kOutlierFactor = 4.0;
  double elementTol = byNorm ? kOutlierFactor * tol : tol;
  double errorSquares = 0.0;
  for (size_t i = 0; i < want.size(); ++i) {
    double error = std::fabs(got[i] - want[i]);
    errorSquares += error * error;
    double bound = exact ? 0.0 : elementTol * (std::fabs(want[i]) + rms);
    bool ok = error <= bound || (std::isnan(want[i]) && std::isnan(got[i])) ||
              (std::isinf(want[i]) && got[i] == want[i]);
    if (c.exactMask && ((want[i] == 0.0) != (got[i] == 0.0)))
      ok = false;
    double relative = error / (std::fabs(want[i]) + rms + 1e-300);
    if (!ok || std::isnan(got[i]) != std::isnan(want[i])) {
      ok = false;
      relative = INFINITY;
    }
    if (relative > worst || worstAt < 0) {
      worst = relative;
      worstAt = static_cast<int64_t>(i);
    }
    failures += !ok;
  }
  double normError = std::sqrt(errorSquares / std::max(squares, 1e-300));
  bool normOk = !byNorm || normError <= c.bf16NormTolerance;
  if (failures == 0 && normOk)
    return true;
  std::printf("  result %zu: %lld of %zu elements off (tolerance %s%g); "
              "worst at %lld: got %.9g, want %.9g; rms %.3g, relative norm "
              "error %.3g%s\n",
              r, static_cast<long long>(failures), want.size(),
              exact ? "exact, " : "", exact ? 0.0 : elementTol,
              static_cast<long long>(worstAt), got[worstAt], want[worstAt], rms,
              normError, normOk ? "" : " (over the norm tolerance)");
  return false;
}

int failures = 0, passes = 0;
const char *filter = nullptr;

void run(const Case &c, loom_cuda_context *context) {
  if (filter && c.name.find(filter) == std::string::npos)
    return;
  for (Precision precision : {Precision::F32, Precision::BF16}) {
    if (precision == Precision::BF16 && c.f32Only)
      continue;
    std::vector<Tensor> ins = inputsFor(c, precision);
    std::vector<std::vector<double>> want, got;
    bool ok = runCpu(c, ins, want) && runCuda(c, ins, precision, context, got);
    for (size_t r = 0; ok && !kHostOnly && r < c.outs.size(); ++r)
      ok = compare(c, r, precision, want[r], got[r]) && ok;
    std::printf("%s %s [%s]\n", ok ? "PASS" : "FAIL", c.name.c_str(),
                nameOf(precision));
    (ok ? passes : failures) += 1;
  }
}

//===----------------------------------------------------------------------===//
// The cases, op by op
//===----------------------------------------------------------------------===//

#define KERNELS(op) loom_cpu_##op, loom_cuda_##op

Case make(std::string name, CpuKernel cpu, CudaKernel cuda,
          std::vector<Tensor> ins, std::vector<Tensor> outs,
          std::vector<int64_t> attrs = {}) {
  Case c;
  c.name = std::move(name);
  c.cpu = cpu;
  c.cuda = cuda;
  c.ins = std::move(ins);
  c.outs = std::move(outs);
  c.attrs = std::move(attrs);
  return c;
}

void elementwiseCases(loom_cuda_context *context) {
  run(make("add same shape", KERNELS(add),
           {uniform({4, 33, 65}), uniform({4, 33, 65})}, {result({4, 33, 65})}),
      context);
  run(make("add broadcast", KERNELS(add),
           {uniform({4, 1, 65}), uniform({33, 1})}, {result({4, 33, 65})}),
      context);
  run(make("sub broadcast", KERNELS(sub), {uniform({2, 3, 16}), uniform({16})},
           {result({2, 3, 16})}),
      context);
  run(make("mul broadcast", KERNELS(mul), {uniform({8, 1}), uniform({8, 16})},
           {result({8, 16})}),
      context);
  run(make("div", KERNELS(div), {uniform({300}), uniform({300}, 0.5, 2.0)},
           {result({300})}),
      context);
  run(make("neg", KERNELS(neg), {uniform({1000})}, {result({1000})}), context);
  run(make("exp", KERNELS(exp), {uniform({1000}, -3, 3)}, {result({1000})}),
      context);
  run(make("log", KERNELS(log), {uniform({1000}, 0.1, 4)}, {result({1000})}),
      context);
  run(make("sqrt", KERNELS(sqrt), {uniform({1000}, 0.1, 4)}, {result({1000})}),
      context);
  run(make("rsqrt", KERNELS(rsqrt), {uniform({1000}, 0.1, 4)},
           {result({1000})}),
      context);
  run(make("tanh", KERNELS(tanh), {uniform({1000}, -3, 3)}, {result({1000})}),
      context);
  // In the bf16 run: bf16 -> f32 (exact), then f32 -> bf16 (rounds).
  run(make("cast to f32", KERNELS(cast), {uniform({500})},
           {result({500}, false)}),
      context);
  run(make("cast to bf16", KERNELS(cast), {f32(uniform({500}))},
           {result({500})}),
      context);
  run(make("copy", KERNELS(copy), {uniform({7, 9})}, {result({7, 9})}),
      context);
  run(make("copy i64", KERNELS(copy),
           {integers({40}, -1000, 1000, LOOM_DTYPE_I64)},
           {result({40}, false, LOOM_DTYPE_I64)}),
      context);
  run(make("reshape", KERNELS(reshape), {uniform({6, 10})}, {result({60})}),
      context);
}

/// fused_elementwise's attributes: the instructions (opcode, a, b), then
/// each result's register.
std::vector<int64_t> program(std::vector<std::array<int64_t, 3>> code,
                             std::vector<int64_t> results) {
  std::vector<int64_t> attrs = {static_cast<int64_t>(code.size())};
  for (const std::array<int64_t, 3> &instruction : code)
    attrs.insert(attrs.end(), instruction.begin(), instruction.end());
  attrs.insert(attrs.end(), results.begin(), results.end());
  return attrs;
}

/// fused_elementwise: the chains `--loom-fuse` forms, broadcasting, and
/// every opcode once. Registers 0..N-1 are the operands. Run twice: on the
/// default kernels, where contiguous chains take the slot kernels, and
/// under LOOM_CUDA_FUSED=general (`mode` " (general)"), where every chain
/// takes the per-element kernel.
void fusedCases(loom_cuda_context *context, const std::string &mode) {
  run(make(std::string("fused bias + gelu") + mode, KERNELS(fused_elementwise),
           {uniform({4, 33, 96}, -3, 3), uniform({96})}, {result({4, 33, 96})},
           program({{LOOM_FUSED_ADD, 0, 1}, {LOOM_FUSED_GELU, 2, 0}}, {3})),
      context);
  run(make(std::string("fused bias + gelu gpt2") + mode,
           KERNELS(fused_elementwise),
           {uniform({256, 3072}, -3, 3), uniform({3072})},
           {result({256, 3072})},
           program({{LOOM_FUSED_ADD, 0, 1}, {LOOM_FUSED_GELU, 2, 0}}, {3})),
      context);
  // The residual stream: x + y and (x + y) + z, both kept.
  run(make(std::string("fused residual chain") + mode,
           KERNELS(fused_elementwise),
           {uniform({8, 64}), uniform({8, 64}), uniform({8, 64})},
           {result({8, 64}), result({8, 64})},
           program({{LOOM_FUSED_ADD, 0, 1}, {LOOM_FUSED_ADD, 3, 2}}, {3, 4})),
      context);
  run(make(std::string("fused swiglu") + mode, KERNELS(fused_elementwise),
           {uniform({16, 128}, -4, 4), uniform({16, 128})}, {result({16, 128})},
           program({{LOOM_FUSED_SILU, 0, 0}, {LOOM_FUSED_MUL, 2, 1}}, {3})),
      context);
  // Contiguous chains take 8 elements a thread; these sizes leave 3 and 7
  // over. The gradient also stores an operand as a result (u, register 2)
  // and drops an instruction nothing reads (exp, register 7).
  run(make(std::string("fused swiglu, n % 8 == 3") + mode,
           KERNELS(fused_elementwise),
           {uniform({3, 1001}, -4, 4), uniform({3, 1001})}, {result({3, 1001})},
           program({{LOOM_FUSED_SILU, 0, 0}, {LOOM_FUSED_MUL, 2, 1}}, {3})),
      context);
  run(make(std::string("fused swiglu grad, n % 8 == 7") + mode,
           KERNELS(fused_elementwise),
           {uniform({5, 203}), uniform({5, 203}, -4, 4), uniform({5, 203})},
           {result({5, 203}), result({5, 203}), result({5, 203})},
           program({{LOOM_FUSED_SILU, 1, 0},
                    {LOOM_FUSED_MUL, 0, 3},
                    {LOOM_FUSED_MUL, 0, 2},
                    {LOOM_FUSED_SILU_GRAD, 5, 1},
                    {LOOM_FUSED_EXP, 0, 0}},
                   {6, 4, 2})),
      context);
  // dy * gelu'(x), then a gradient accumulated into it.
  run(make(
          std::string("fused gelu_grad + add") + mode,
          KERNELS(fused_elementwise),
          {uniform({32, 96}), uniform({32, 96}, -4, 4), uniform({32, 96})},
          {result({32, 96})},
          program({{LOOM_FUSED_GELU_GRAD, 0, 1}, {LOOM_FUSED_ADD, 3, 2}}, {4})),
      context);
  // A bf16 rounding inside an f32 chain (and a no-op cast to f32).
  Case cast =
      make(std::string("fused cast to bf16 in an f32 chain") + mode,
           KERNELS(fused_elementwise), {uniform({1000}), uniform({1000})},
           {result({1000}), result({1000})},
           program({{LOOM_FUSED_MUL, 0, 1},
                    {LOOM_FUSED_CAST, 2, LOOM_DTYPE_BF16},
                    {LOOM_FUSED_ADD, 3, 0},
                    {LOOM_FUSED_CAST, 4, LOOM_DTYPE_F32}},
                   {5, 3}));
  cast.f32Only = true;
  run(cast, context);
  run(make(std::string("fused broadcast [1, n] and [m, 1]") + mode,
           KERNELS(fused_elementwise), {uniform({1, 40}), uniform({24, 1})},
           {result({24, 40})},
           program({{LOOM_FUSED_SUB, 0, 1}, {LOOM_FUSED_MUL, 2, 2}}, {3})),
      context);
  // A missing leading dimension, a size-1 middle one, a one-element operand.
  run(make(std::string("fused broadcast 4-d") + mode,
           KERNELS(fused_elementwise),
           {uniform({2, 3, 24, 40}), uniform({40}), uniform({3, 1, 1}),
            uniform({1})},
           {result({2, 3, 24, 40})},
           program({{LOOM_FUSED_ADD, 0, 1},
                    {LOOM_FUSED_MUL, 4, 2},
                    {LOOM_FUSED_SUB, 5, 3}},
                   {6})),
      context);
  // Every opcode once, each value a result; positive x and y for log,
  // sqrt and rsqrt.
  run(make(std::string("fused every opcode") + mode, KERNELS(fused_elementwise),
           {uniform({500}, 0.5, 2), uniform({500}, 0.5, 2)},
           std::vector<Tensor>(13, result({500})),
           program({{LOOM_FUSED_ADD, 0, 1},
                    {LOOM_FUSED_SUB, 0, 1},
                    {LOOM_FUSED_MUL, 2, 3},
                    {LOOM_FUSED_DIV, 0, 1},
                    {LOOM_FUSED_NEG, 3, 0},
                    {LOOM_FUSED_EXP, 3, 0},
                    {LOOM_FUSED_LOG, 0, 0},
                    {LOOM_FUSED_SQRT, 1, 0},
                    {LOOM_FUSED_RSQRT, 2, 0},
                    {LOOM_FUSED_TANH, 3, 0},
                    {LOOM_FUSED_CAST, 4, LOOM_DTYPE_BF16},
                    {LOOM_FUSED_GELU, 3, 0},
                    {LOOM_FUSED_GELU_GRAD, 0, 3},
                    {LOOM_FUSED_SILU, 3, 0},
                    {LOOM_FUSED_SILU_GRAD, 1, 3}},
                   {4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16})),
      context);
}

void layoutCases(loom_cuda_context *context) {
  std::vector<int64_t> attrs;
  appendArray(attrs, {0, 2, 1, 3});
  run(make("transpose 4-d", KERNELS(transpose), {uniform({2, 3, 4, 5})},
           {result({2, 4, 3, 5})}, attrs),
      context);
  attrs.clear();
  appendArray(attrs, {1, 0});
  run(make("transpose 2-d", KERNELS(transpose), {uniform({64, 48})},
           {result({48, 64})}, attrs),
      context);
  attrs.clear();
  appendArray(attrs, {2, 0, 1});
  run(make("transpose i64", KERNELS(transpose),
           {integers({3, 4, 5}, 0, 1 << 20, LOOM_DTYPE_I64)},
           {result({5, 3, 4}, false, LOOM_DTYPE_I64)}, attrs),
      context);
  run(make("broadcast", KERNELS(broadcast), {uniform({3, 1})},
           {result({2, 3, 5})}),
      context);
  run(make("broadcast leading", KERNELS(broadcast), {uniform({5})},
           {result({4, 5})}),
      context);
  attrs.clear();
  appendArray(attrs, {1, 2, 3});
  run(make("slice", KERNELS(slice), {uniform({6, 8, 10})}, {result({3, 4, 5})},
           attrs),
      context);
  // Rows that move in 16-byte units (a third of a fused q/k/v projection)
  // and, in bf16, in 8-byte ones (4 elements at an 8-byte offset).
  attrs.clear();
  appendArray(attrs, {0, 0, 16});
  run(make("slice of rows, wide", KERNELS(slice), {uniform({4, 6, 48})},
           {result({4, 6, 16})}, attrs),
      context);
  attrs.clear();
  appendArray(attrs, {1, 0, 4});
  run(make("slice of rows, 8 bytes", KERNELS(slice), {uniform({3, 5, 12})},
           {result({2, 5, 4})}, attrs),
      context);
  attrs.clear();
  appendArray(attrs, {1, 2});
  run(make("pad", KERNELS(pad), {uniform({3, 4})}, {result({6, 9})}, attrs),
      context);
  run(make("concat", KERNELS(concat),
           {uniform({2, 3, 4}), uniform({2, 1, 4}), uniform({2, 5, 4})},
           {result({2, 9, 4})}, {1}),
      context);
}

/// The attributes of a reduction: dims, keep_dims.
std::vector<int64_t> reduction(std::vector<int64_t> dims, bool keepDims) {
  std::vector<int64_t> attrs;
  appendArray(attrs, std::move(dims));
  attrs.push_back(keepDims);
  return attrs;
}

void reductionCases(loom_cuda_context *context) {
  run(make("reduce_sum leading", KERNELS(reduce_sum), {uniform({4, 8, 96})},
           {result({96})}, reduction({0, 1}, false)),
      context);
  run(make("reduce_sum rows", KERNELS(reduce_sum), {uniform({4, 8, 96})},
           {result({4, 8, 1})}, reduction({2}, true)),
      context);
  run(make("reduce_sum all", KERNELS(reduce_sum), {uniform({4, 8, 96})},
           {result({})}, reduction({0, 1, 2}, false)),
      context);
  run(make("reduce_mean middle", KERNELS(reduce_mean), {uniform({5, 7, 9})},
           {result({5, 9})}, reduction({1}, false)),
      context);
  // Few, long groups over leading dimensions: cut into chunks (a bias
  // gradient's shape), over two non-adjacent dimensions, and max.
  run(make("reduce_sum leading chunked", KERNELS(reduce_sum),
           {uniform({64, 33, 40})}, {result({40})}, reduction({0, 1}, false)),
      context);
  run(make("reduce_mean outer chunked", KERNELS(reduce_mean),
           {uniform({40, 6, 50})}, {result({1, 6, 1})},
           reduction({0, 2}, true)),
      context);
  run(make("reduce_max leading chunked", KERNELS(reduce_max),
           {uniform({3000, 7})}, {result({7})}, reduction({0}, false)),
      context);
  run(make("reduce_max rows", KERNELS(reduce_max), {uniform({6, 50})},
           {result({6})}, reduction({1}, false)),
      context);
  run(make("reduce_max columns", KERNELS(reduce_max), {uniform({6, 50})},
           {result({50})}, reduction({0}, false)),
      context);
  // Values on a grid of 1/4: maxima tie, and the gradient is shared.
  run(make("reduce_max_grad rows", KERNELS(reduce_max_grad),
           {uniform({6}), quantized({6, 50}, 0.25, -1, 1)}, {result({6, 50})},
           reduction({1}, false)),
      context);
  run(make("reduce_max_grad columns", KERNELS(reduce_max_grad),
           {uniform({50}), quantized({6, 50}, 0.25, -1, 1)}, {result({6, 50})},
           reduction({0}, false)),
      context);
}

/// A matmul case: operand and result shapes, which operands are
/// transposed.
struct MatmulShape {
  const char *name;
  std::vector<int64_t> lhs, rhs, out;
  bool transLhs, transRhs;
};

void matmulCases(loom_cuda_context *context) {
  const MatmulShape shapes[] = {
      {"matmul", {64, 96}, {96, 80}, {64, 80}, false, false},
      {"matmul lhs^T", {96, 64}, {96, 80}, {64, 80}, true, false},
      {"matmul rhs^T", {64, 96}, {80, 96}, {64, 80}, false, true},
      {"matmul both^T", {96, 64}, {80, 96}, {64, 80}, true, true},
      {"matmul odd sizes", {33, 17}, {17, 65}, {33, 65}, false, false},
      {"matmul batched",
       {3, 2, 32, 48},
       {3, 2, 48, 40},
       {3, 2, 32, 40},
       false,
       false},
      {"matmul batched both^T",
       {3, 2, 48, 32},
       {3, 2, 40, 48},
       {3, 2, 32, 40},
       true,
       true},
      {"matmul batched odd", {3, 7, 5}, {3, 5, 9}, {3, 7, 9}, false, false},
      {"matmul shared rhs", {4, 16, 32}, {32, 24}, {4, 16, 24}, false, false},
      {"matmul shared rhs lhs^T",
       {4, 32, 16},
       {32, 24},
       {4, 16, 24},
       true,
       false},
      {"matmul gpt2 mlp", {256, 768}, {768, 768}, {256, 768}, false, false},
  };
  for (const MatmulShape &s : shapes) {
    run(make(s.name, KERNELS(matmul), {uniform(s.lhs), uniform(s.rhs)},
             {result(s.out)}, {s.transLhs, s.transRhs, LOOM_EPILOGUE_NONE}),
        context);
  }
  // bf16 operands into an f32 result (the bf16 run; f32 in the other).
  run(make("matmul bf16 -> f32", KERNELS(matmul),
           {uniform({48, 64}), uniform({64, 40})}, {result({48, 40}, false)},
           {0, 0, LOOM_EPILOGUE_NONE}),
      context);
}

/// Leading dimensions that are not a multiple of 16 bytes, staged through
/// the scratch with aligned ones (GemmStaging.h): the lm head's three GEMMs
/// at a vocabulary of 1001, an odd rhs, and bias_gelu_aux with an odd k
/// (cuBLASLt's GELU_AUX_BIAS, the bf16 run, with a chunk's own aux). A
/// context with 1 MiB of scratch runs them in 2 to 4 chunks of 192 to 2368
/// rows; the 64 MiB one in one chunk. The small context also runs
/// dgelu_bias_grad's way without room for its partial sums.
void matmulStagedCases(loom_cuda_context *context, cudaStream_t stream) {
  loom_cuda_context *small = nullptr;
  if (loom_cuda_context_create(stream, int64_t{1} << 20, &small) != 0) {
    std::printf("FAIL matmul staged: loom_cuda_context_create: %s\n",
                loom_cuda_last_error());
    ++failures;
    return;
  }
  const MatmulShape shapes[] = {
      {"logits", {700, 64}, {1001, 64}, {700, 1001}, false, true},
      {"logits grad", {700, 1001}, {1001, 64}, {700, 64}, false, false},
      {"embedding grad", {700, 1001}, {700, 64}, {1001, 64}, true, false},
      {"odd rhs", {5000, 48}, {48, 77}, {5000, 77}, false, false},
  };
  for (loom_cuda_context *c : {small, context})
    for (const MatmulShape &s : shapes)
      run(make(std::string("matmul staged ") + s.name +
                   (c == small ? " (chunks)" : ""),
               KERNELS(matmul), {uniform(s.lhs), uniform(s.rhs)},
               {result(s.out)}, {s.transLhs, s.transRhs, LOOM_EPILOGUE_NONE}),
          c);
  run(make(
          "matmul staged bias_gelu_aux odd k (chunks)", KERNELS(matmul),
          {uniform({700, 1001}), uniform({1001, 64}, -0.1, 0.1), uniform({64})},
          {result({700, 64}), result({700, 64})},
          {0, 0, LOOM_EPILOGUE_BIAS_GELU_AUX}),
      small);
  // Not staged, but short of scratch: dgelu_bias_grad's partial sums want
  // 33 chunks of 4096 columns (1056 KiB), so it falls back to dgelu_kernel
  // and sumRows. Its bias gradient adds 2112 bf16-rounded gradients per
  // column (the CPU kernel adds them unrounded), so in bf16 it is held to
  // 1e-2 as a whole: on an H200 one column of 4096 was 0.35 off at an rms
  // of 30.8 (2112 roundings of 2^-9 each), the norm 2.9e-3.
  Case shortScratch =
      make("matmul dgelu_bias_grad short scratch", KERNELS(matmul),
           {uniform({2112, 8}), uniform({4096, 8}, -1, 1),
            uniform({2112, 4096}, -3, 3)},
           {result({2112, 4096}), result({4096})},
           {0, 1, LOOM_EPILOGUE_DGELU_BIAS_GRAD});
  shortScratch.bf16NormTolerance = 1e-2;
  run(shortScratch, small);
  loom_cuda_context_destroy(small);
}

/// The epilogues that add a residual or take a bias gradient: residual
/// and bias_residual (cuBLASLt's C with beta = 1) and bias_grad (BGRADA:
/// the column sums of cuBLASLt's A, our rhs), each also under
/// LOOM_CUDA_GEMM_EPILOGUES=basic (a plain GEMM, then Matmul.cu's kernels
/// and sumRows), which batched GEMMs and k = 0 take anyway; and
/// dgelu_bias_grad (a plain GEMM, then Matmul.cu's fused gelu gradient and
/// column sums, 8 columns per thread where n is a multiple of 8), in both
/// modes alike.
void matmulResidualAndGradCases(loom_cuda_context *context) {
  const MatmulShape forward[] = {
      {"2-d", {64, 96}, {96, 80}, {64, 80}, false, false},
      {"shared rhs", {4, 16, 32}, {32, 24}, {4, 16, 24}, false, false},
      {"batched", {3, 2, 32, 48}, {3, 2, 48, 40}, {3, 2, 32, 40}, false, false},
      {"gpt2 attn proj", {256, 768}, {768, 768}, {256, 768}, false, false},
      {"odd n", {33, 17}, {17, 65}, {33, 65}, false, false},
  };
  // Weight gradients x^T.dy: an untransposed rank-2 rhs.
  const MatmulShape weightGrads[] = {
      {"2-d", {64, 96}, {96, 80}, {64, 80}, false, false},
      {"gpt2 wgrad", {512, 768}, {512, 768}, {768, 768}, true, false},
      {"shared rhs lhs^T", {4, 32, 16}, {32, 24}, {4, 16, 24}, true, false},
      {"odd n", {33, 17}, {33, 65}, {17, 65}, true, false},
  };
  // dy.w^T into the MLP's hidden width, at the pre-activation.
  const MatmulShape dgelu[] = {
      {"gpt2 mlp", {256, 768}, {3072, 768}, {256, 3072}, false, true},
      {"shared rhs", {4, 16, 32}, {24, 32}, {4, 16, 24}, false, true},
      {"batched", {3, 16, 32}, {3, 32, 24}, {3, 16, 24}, false, false},
      {"odd n", {33, 17}, {65, 17}, {33, 65}, false, true},
      // A shared rhs folds the batch into m: 210 and 335 rows in chunks
      // of 53 and 56 rows (the last 51 and 55), n odd (a column per
      // thread) and a multiple of 8 (8 per thread).
      {"shared rhs odd n", {3, 70, 24}, {37, 24}, {3, 70, 37}, false, true},
      {"shared rhs chunks", {5, 67, 48}, {40, 48}, {5, 67, 40}, false, true},
  };
  auto kOf = [](const MatmulShape &s) {
    return s.transLhs ? s.lhs[s.lhs.size() - 2] : s.lhs.back();
  };
  for (const char *mode : {"", "basic"}) {
    if (*mode)
      setenv("LOOM_CUDA_GEMM_EPILOGUES", mode, 1);
    std::string suffix = *mode ? " (basic)" : "";
    for (const MatmulShape &s : forward) {
      double scale = 3.0 / std::sqrt(static_cast<double>(kOf(s)));
      run(make(std::string("matmul residual ") + s.name + suffix,
               KERNELS(matmul),
               {uniform(s.lhs), uniform(s.rhs, -scale, scale), uniform(s.out)},
               {result(s.out)},
               {s.transLhs, s.transRhs, LOOM_EPILOGUE_RESIDUAL}),
          context);
      run(make(std::string("matmul bias_residual ") + s.name + suffix,
               KERNELS(matmul),
               {uniform(s.lhs), uniform(s.rhs, -scale, scale),
                uniform({s.out.back()}), uniform(s.out)},
               {result(s.out)},
               {s.transLhs, s.transRhs, LOOM_EPILOGUE_BIAS_RESIDUAL}),
          context);
    }
    for (const MatmulShape &s : weightGrads)
      run(make(std::string("matmul bias_grad ") + s.name + suffix,
               KERNELS(matmul), {uniform(s.lhs), uniform(s.rhs)},
               {result(s.out), result({s.out.back()})},
               {s.transLhs, s.transRhs, LOOM_EPILOGUE_BIAS_GRAD}),
          context);
    for (const MatmulShape &s : dgelu) {
      double scale = 3.0 / std::sqrt(static_cast<double>(kOf(s)));
      run(make(std::string("matmul dgelu_bias_grad ") + s.name + suffix,
               KERNELS(matmul),
               {uniform(s.lhs), uniform(s.rhs, -scale, scale),
                uniform(s.out, -3, 3)},
               {result(s.out), result({s.out.back()})},
               {s.transLhs, s.transRhs, LOOM_EPILOGUE_DGELU_BIAS_GRAD}),
          context);
    }
  }
  unsetenv("LOOM_CUDA_GEMM_EPILOGUES");
  // k = 0: the product is zeros; the bias gradient sums the rhs' 0 rows or
  // dpre's zeros.
  run(make("matmul bias_residual k = 0", KERNELS(matmul),
           {uniform({0, 8}), uniform({0, 16}), uniform({16}), uniform({8, 16})},
           {result({8, 16})}, {1, 0, LOOM_EPILOGUE_BIAS_RESIDUAL}),
      context);
  run(make("matmul bias_grad k = 0", KERNELS(matmul),
           {uniform({0, 8}), uniform({0, 16})}, {result({8, 16}), result({16})},
           {1, 0, LOOM_EPILOGUE_BIAS_GRAD}),
      context);
  run(make("matmul dgelu_bias_grad k = 0", KERNELS(matmul),
           {uniform({0, 8}), uniform({0, 16}), uniform({8, 16}, -3, 3)},
           {result({8, 16}), result({16})},
           {1, 0, LOOM_EPILOGUE_DGELU_BIAS_GRAD}),
      context);
  // m = 0: no product, but a bias gradient of the rhs' 12 rows.
  run(make("matmul bias_grad m = 0", KERNELS(matmul),
           {uniform({0, 12}), uniform({12, 16})},
           {result({0, 16}), result({16})}, {0, 0, LOOM_EPILOGUE_BIAS_GRAD}),
      context);
}

/// matmul's epilogues (loom_cpu_kernels.h): the bias [n] has the result's
/// element type. The rhs is scaled so that the sums are about 1, where the
/// gelu bends. cuBLASLt adds the bias, and for bf16 results applies the
/// gelu; f32 results' gelu, bf16 bias_gelu_aux with n not a multiple of 8
/// (odd n) and k = 0 take Matmul.cu's epilogue kernel.
void matmulEpilogueCases(loom_cuda_context *context) {
  const MatmulShape shapes[] = {
      {"2-d", {64, 96}, {96, 80}, {64, 80}, false, false},
      {"rhs^T", {64, 96}, {80, 96}, {64, 80}, false, true},
      // Folded into one GEMM of 64 rows.
      {"shared rhs", {4, 16, 32}, {32, 24}, {4, 16, 24}, false, false},
      // A strided batch with the rhs' stride 0: the bias' batch stride 0,
      // the aux's m * n.
      {"shared rhs lhs^T", {4, 32, 16}, {32, 24}, {4, 16, 24}, true, false},
      {"batched", {3, 2, 32, 48}, {3, 2, 48, 40}, {3, 2, 32, 40}, false, false},
      {"gpt2 mlp up", {256, 768}, {768, 3072}, {256, 3072}, false, false},
      {"odd n", {33, 17}, {17, 65}, {33, 65}, false, false},
  };
  const char *names[] = {"none", "bias", "bias_gelu", "bias_gelu_aux"};
  for (int64_t epilogue : {LOOM_EPILOGUE_BIAS, LOOM_EPILOGUE_BIAS_GELU,
                           LOOM_EPILOGUE_BIAS_GELU_AUX})
    for (const MatmulShape &s : shapes) {
      int64_t k = s.transLhs ? s.lhs[s.lhs.size() - 2] : s.lhs.back();
      double scale = 3.0 / std::sqrt(static_cast<double>(k));
      std::vector<Tensor> outs = {result(s.out)};
      if (epilogue == LOOM_EPILOGUE_BIAS_GELU_AUX)
        outs.push_back(result(s.out));
      run(make(std::string("matmul ") + names[epilogue] + " " + s.name,
               KERNELS(matmul),
               {uniform(s.lhs), uniform(s.rhs, -scale, scale),
                uniform({s.out.back()})},
               outs, {s.transLhs, s.transRhs, epilogue}),
          context);
    }
  // bf16 operands into f32 results, with an f32 bias (the bf16 run).
  run(make(
          "matmul bias_gelu_aux bf16 -> f32", KERNELS(matmul),
          {uniform({48, 64}), uniform({64, 40}, -0.4, 0.4), f32(uniform({40}))},
          {result({48, 40}, false), result({48, 40}, false)},
          {0, 0, LOOM_EPILOGUE_BIAS_GELU_AUX}),
      context);
  // k = 0: the product is zeros, the results the bias and its gelu (lhs^T
  // keeps the CPU's BLAS call's leading dimensions valid).
  run(make("matmul bias_gelu_aux k = 0", KERNELS(matmul),
           {uniform({0, 8}), uniform({0, 16}), uniform({16}, -3, 3)},
           {result({8, 16}), result({8, 16})},
           {1, 0, LOOM_EPILOGUE_BIAS_GELU_AUX}),
      context);
  run(make("matmul bias_gelu k = 0", KERNELS(matmul),
           {uniform({0, 8}), uniform({0, 16}), uniform({16}, -3, 3)},
           {result({8, 16})}, {1, 0, LOOM_EPILOGUE_BIAS_GELU}),
      context);
  matmulResidualAndGradCases(context);
}

void normCases(loom_cuda_context *context) {
  // Rows up to 1024 elements take a warp per row (NormRows.cuh), longer
  // ones and LOOM_CUDA_NORM=block a block per row.
  // The weight gradients' sums: D a multiple of 8 (8 columns a thread)
  // or not (one), over a few rows or thousands (hundreds of chunks).
  const std::vector<std::vector<int64_t>> shapes = {
      {4, 16, 96}, {300, 768}, {5, 1100}, {4100, 40}, {2000, 36}};
  for (const char *mode : {"", "block"}) {
    if (*mode)
      setenv("LOOM_CUDA_NORM", mode, 1);
    for (const std::vector<int64_t> &x : shapes) {
      int64_t d = x.back();
      std::string size = " " + std::to_string(d) + (*mode ? " (block)" : "");
      run(make("layernorm" + size, KERNELS(layernorm),
               {uniform(x, -2, 2), uniform({d}, 0.5, 1.5), uniform({d})},
               {result(x)}, {real(1e-5)}),
          context);
      run(make("layernorm_grad" + size, KERNELS(layernorm_grad),
               {uniform(x), uniform(x, -2, 2), uniform({d}, 0.5, 1.5)},
               {result(x), result({d}), result({d})}, {real(1e-5)}),
          context);
      // With a residual added to dx (the fused norm gradient).
      run(make("layernorm_grad + residual" + size, KERNELS(layernorm_grad),
               {uniform(x), uniform(x, -2, 2), uniform({d}, 0.5, 1.5),
                uniform(x, -3, 3)},
               {result(x), result({d}), result({d})}, {real(1e-5)}),
          context);
    }
  }
  unsetenv("LOOM_CUDA_NORM");
  for (const std::vector<int64_t> &x : shapes) {
    int64_t d = x.back();
    std::string size = " " + std::to_string(d);
    run(make("rmsnorm" + size, KERNELS(rmsnorm),
             {uniform(x, -2, 2), uniform({d}, 0.5, 1.5)}, {result(x)},
             {real(1e-6)}),
        context);
    run(make("rmsnorm_grad" + size, KERNELS(rmsnorm_grad),
             {uniform(x), uniform(x, -2, 2), uniform({d}, 0.5, 1.5)},
             {result(x), result({d})}, {real(1e-6)}),
        context);
    run(make("rmsnorm_grad + residual" + size, KERNELS(rmsnorm_grad),
             {uniform(x), uniform(x, -2, 2), uniform({d}, 0.5, 1.5),
              uniform(x, -3, 3)},
             {result(x), result({d})}, {real(1e-6)}),
        context);
  }
  run(make("gelu", KERNELS(gelu), {uniform({2000}, -5, 5)}, {result({2000})}),
      context);
  run(make("gelu_grad", KERNELS(gelu_grad),
           {uniform({2000}), uniform({2000}, -5, 5)}, {result({2000})}),
      context);
  // 2003 elements: 250 groups of 8, then 3 one by one.
  run(make("gelu 2003", KERNELS(gelu), {uniform({2003}, -5, 5)},
           {result({2003})}),
      context);
  run(make("gelu_grad 2003", KERNELS(gelu_grad),
           {uniform({2003}), uniform({2003}, -5, 5)}, {result({2003})}),
      context);
  run(make("gelu_erf", KERNELS(gelu_erf), {uniform({2003}, -8, 8)},
           {result({2003})}),
      context);
  run(make("gelu_erf_grad", KERNELS(gelu_erf_grad),
           {uniform({2003}), uniform({2003}, -8, 8)}, {result({2003})}),
      context);
  run(make("silu", KERNELS(silu), {uniform({2000}, -5, 5)}, {result({2000})}),
      context);
  run(make("silu_grad", KERNELS(silu_grad),
           {uniform({2000}), uniform({2000}, -5, 5)}, {result({2000})}),
      context);
  run(make("softmax", KERNELS(softmax), {uniform({7, 1000}, -4, 4)},
           {result({7, 1000})}, {0}),
      context);
  run(make("softmax causal", KERNELS(softmax), {uniform({2, 3, 40, 40}, -4, 4)},
           {result({2, 3, 40, 40})}, {1}),
      context);
  run(make("softmax_grad", KERNELS(softmax_grad),
           {uniform({6, 100}), uniform({6, 100}, 0, 0.05)}, {result({6, 100})}),
      context);
  // theta, no frequency scaling (factor 0), no position block (the whole
  // sequence); then Llama 3.1's scaling on a shard starting at position
  // 24 (this rank at coordinate 3 of a grid of 4 splitting dimension 1).
  std::vector<int64_t> plain = {real(10000.0), real(0), real(0),
                                real(0),       real(0), 0};
  run(make("rope", KERNELS(rope), {uniform({2, 8, 3, 16})},
           {result({2, 8, 3, 16})}, plain),
      context);
  run(make("rope_grad", KERNELS(rope_grad), {uniform({2, 8, 3, 16})},
           {result({2, 8, 3, 16})}, plain),
      context);
  static int64_t coordinates[1] = {3};
  static loom_comm comm;
  comm.grid_coordinate = [](void *, int32_t) { return coordinates[0]; };
  static loom_call_frame frame;
  frame.comm = &comm;
  Case shard = make("rope llama3 shard", KERNELS(rope),
                    {uniform({2, 8, 3, 16})}, {result({2, 8, 3, 16})},
                    {real(500000.0), real(8.0), real(1.0), real(4.0), real(8.0),
                     1, 1, 1, 4, 0, 1, 0, 0, 0});
  shard.frame = &frame;
  run(shard, context);
}

/// A loom_comm that knows one rank's coordinates in a grid.
int64_t fakeCoordinates[2] = {1, 2};
int64_t coordinateOf(void *, int32_t axis) { return fakeCoordinates[axis]; }

void dropoutCases(loom_cuda_context *context) {
  // rate, seed, key, then the mask block: one micro-batch, no grid.
  std::vector<int64_t> attrs = {real(0.1), 1234, 5, 1, 0};
  for (auto op :
       {std::make_pair(loom_cpu_dropout, loom_cuda_dropout),
        std::make_pair(loom_cpu_dropout_grad, loom_cuda_dropout_grad)}) {
    bool grad = op.first == loom_cpu_dropout_grad;
    Case c = make(grad ? "dropout_grad" : "dropout", op.first, op.second,
                  {uniform({4, 33, 17}, 0.5, 1.5), scalarInt(7)},
                  {result({4, 33, 17})}, attrs);
    c.exactMask = true;
    run(c, context);
  }
  // A shard of a [4, 33, 51] tensor on a 2 x 3 grid (dims 0 and 2 split
  // over axes 0 and 1; this rank at (1, 2)), micro-batch 2 of 3.
  static loom_comm comm;
  comm.grid_coordinate = coordinateOf;
  static loom_call_frame frame;
  frame.comm = &comm;
  frame.micro_batch = 2;
  Case c = make("dropout on a shard", KERNELS(dropout),
                {uniform({2, 33, 17}, 0.5, 1.5), scalarInt(11, LOOM_DTYPE_I32)},
                {result({2, 33, 17})},
                {real(0.3), -77, 9, 3, 2, 2, 3, 1, 0, 0, 1, 1});
  c.frame = &frame;
  c.exactMask = true;
  run(c, context);
}

struct AttentionShape {
  int64_t batch, seq, heads, kvSeq, kvHeads, dim;
  bool causal;
  double rate;
};

/// The attributes of attention / attention_grad: causal, scale, has_step,
/// dropout rate, seed, key, then a flag and, with a step, the mask block.
std::vector<int64_t> attentionAttrs(const AttentionShape &s) {
  std::vector<int64_t> attrs = {s.causal,
                                real(1.0 / std::sqrt(double(s.dim))),
                                s.rate != 0.0,
                                real(s.rate),
                                42,
                                3};
  if (s.rate != 0.0)
    attrs.insert(attrs.end(), {1, 1, 0});
  else
    attrs.push_back(0);
  return attrs;
}

/// Whether cuDNN takes the calls its graphs describe here: the kernels are
/// built with it, and on the fake device its heuristic is not told to
/// refuse (LOOM_FAKE_CUDNN=refuse, the fallback's ctest run).
bool cudnnTakesAttention() {
#ifdef LOOM_HAVE_CUDNN
  const char *fake = kHostOnly ? std::getenv("LOOM_FAKE_CUDNN") : nullptr;
  return !(fake && std::strcmp(fake, "refuse") == 0);
#else
  return false;
#endif
}

/// The kernels an attention call of shape `s` must run on in `precision`
/// under LOOM_CUDA_ATTENTION=`mode` (Attention.cu's order: cuDNN, then the
/// tensor-core tiles, then the CUDA-core kernels).
std::string attentionPathFor(const AttentionShape &s, Precision precision,
                             const std::string &mode) {
  bool bf16 = precision == Precision::BF16 && s.rate == 0.0;
  if (bf16 && mode == "cudnn" && s.dim % 8 == 0 && cudnnTakesAttention())
    return "cudnn";
  if (bf16 && mode != "simt" && s.dim % 16 == 0 && s.dim <= 128)
    return "tiles";
  return "simt";
}

/// Every case under LOOM_CUDA_ATTENTION=`mode`: cudnn (the default order:
/// the bf16 calls without dropout run on cuDNN), tiles (they run on the
/// tensor-core kernels) or simt (the CUDA-core kernels); each checks the
/// path its calls took.
void attentionCases(loom_cuda_context *context, const std::string &mode) {
  const AttentionShape shapes[] = {
      {2, 24, 4, 24, 2, 16, false, 0.0},  {2, 24, 4, 24, 2, 16, true, 0.0},
      {1, 100, 2, 100, 2, 64, true, 0.0}, {1, 40, 2, 70, 1, 32, false, 0.0},
      {2, 20, 2, 20, 2, 80, true, 0.0},   {2, 33, 2, 33, 1, 16, true, 0.2},
      {1, 70, 2, 70, 1, 128, true, 0.0},  {1, 30, 2, 30, 2, 40, true, 0.0},
  };
  setenv("LOOM_CUDA_ATTENTION", mode.c_str(), 1);
  for (const AttentionShape &s : shapes) {
    std::string name = "attention B" + std::to_string(s.batch) + " S" +
                       std::to_string(s.seq) + " Hq" + std::to_string(s.heads) +
                       " Skv" + std::to_string(s.kvSeq) + " Hkv" +
                       std::to_string(s.kvHeads) + " D" +
                       std::to_string(s.dim) + (s.causal ? " causal" : "") +
                       (s.rate != 0.0 ? " dropout" : "") + " " + mode;
    std::array<std::string, 2> path = {
        attentionPathFor(s, Precision::F32, mode),
        attentionPathFor(s, Precision::BF16, mode)};
    std::vector<int64_t> q = {s.batch, s.seq, s.heads, s.dim};
    std::vector<int64_t> kv = {s.batch, s.kvSeq, s.kvHeads, s.dim};
    std::vector<int64_t> lse = {s.batch, s.heads, s.seq};
    std::vector<Tensor> ins = {uniform(q, -2, 2), uniform(kv, -2, 2),
                               uniform(kv)};
    if (s.rate != 0.0)
      ins.push_back(scalarInt(5));
    Case forward = make(name, KERNELS(attention), ins,
                        {result(q), result(lse, false)}, attentionAttrs(s));
    forward.bf16Tolerance = 2e-2;
    forward.attentionPath = path;
    run(forward, context);

    // The gradient at the forward's own out and lse (the CPU kernel's, from
    // the f32 inputs), so that P is close to a distribution.
    Case backward =
        make(name + " grad", KERNELS(attention_grad), {},
             {result(q), result(kv), result(kv)}, attentionAttrs(s));
    backward.bf16Tolerance = 2e-2;
    backward.bf16NormTolerance = 1e-2;
    backward.attentionPath = path;
    backward.ins = {uniform(q), ins[0], ins[1], ins[2]};
    std::vector<std::vector<double>> outs;
    if (!runCpu(forward, ins, outs)) {
      ++failures;
      continue;
    }
    Tensor out = uniform(q), logSumExp = f32(uniform(lse));
    out.values = outs[0];
    logSumExp.values = outs[1];
    backward.ins.push_back(out);
    backward.ins.push_back(logSumExp);
    if (s.rate != 0.0)
      backward.ins.push_back(scalarInt(5));
    run(backward, context);
  }
  unsetenv("LOOM_CUDA_ATTENTION");
}

/// Runs `c` in bf16 under LOOM_CUDA_ATTENTION=`mode` on `context`, its path
/// checked; the results' bytes.
bool runAttention(Case c, const std::string &mode, const std::string &path,
                  loom_cuda_context *context,
                  std::vector<std::vector<uint8_t>> &bytes) {
  setenv("LOOM_CUDA_ATTENTION", mode.c_str(), 1);
  c.attentionPath[1] = path;
  bool ok = runCudaBytes(c, inputsFor(c, Precision::BF16), Precision::BF16,
                         context, bytes);
  unsetenv("LOOM_CUDA_ATTENTION");
  return ok;
}

/// GPT-2 124M's and a grouped-query Llama's attention (32 query heads, 8
/// key/value heads, head dimension 128, sequence 2048) at batch 1, bf16:
/// forward and gradient on cuDNN (where it is built) and on the
/// tensor-core kernels (LOOM_CUDA_ATTENTION=tiles), each checking its path,
/// and on a GPU each result of one against the other's (tol 2e-2 as
/// above; no CPU reference: the cases above compare both paths with the
/// CPU kernel at small shapes, these shapes are slow there). Both
/// gradients read the tiles forward's out and lse, so cuDNN's gradient
/// reads an lse it did not write. They run on a context of 1 MiB of
/// scratch, which cuDNN's gradient plans outgrow (growScratch).
void attentionModelCases(cudaStream_t stream) {
  if (filter &&
      std::string("attention model").find(filter) == std::string::npos)
    return;
  loom_cuda_context *small = nullptr;
  if (loom_cuda_context_create(stream, int64_t{1} << 20, &small) != 0) {
    std::printf("FAIL attention model: no context: %s\n",
                loom_cuda_last_error());
    ++failures;
    return;
  }
  struct Model {
    const char *name;
    AttentionShape shape;
  };
  const Model models[] = {
      {"GPT-2 124M", {1, 1024, 12, 1024, 12, 64, true, 0.0}},
      {"Llama", {1, 2048, 32, 2048, 8, 128, true, 0.0}},
  };
  std::string cudnnPath = cudnnTakesAttention() ? "cudnn" : "tiles";
  for (const Model &m : models) {
    const AttentionShape &s = m.shape;
    std::string name = std::string("attention model ") + m.name;
    std::vector<int64_t> q = {s.batch, s.seq, s.heads, s.dim};
    std::vector<int64_t> kv = {s.batch, s.kvSeq, s.kvHeads, s.dim};
    std::vector<int64_t> lse = {s.batch, s.heads, s.seq};
    Case forward = make(name, KERNELS(attention),
                        {uniform(q, -2, 2), uniform(kv, -2, 2), uniform(kv)},
                        {result(q), result(lse, false)}, attentionAttrs(s));
    forward.bf16Tolerance = 2e-2;
    std::vector<std::vector<uint8_t>> tiles, cudnn;
    bool ok = runAttention(forward, "tiles", "tiles", small, tiles) &&
              runAttention(forward, "cudnn", cudnnPath, small, cudnn);
    for (size_t r = 0; ok && !kHostOnly && r < forward.outs.size(); ++r) {
      loom_dtype dtype = forward.outs[r].dtypeIn(Precision::BF16);
      ok = compare(forward, r, Precision::BF16,
                   decode(tiles[r].data(), forward.outs[r].size(), dtype),
                   decode(cudnn[r].data(), forward.outs[r].size(), dtype)) &&
           ok;
    }
    std::printf("%s %s [cudnn vs tiles]\n", ok ? "PASS" : "FAIL", name.c_str());
    (ok ? passes : failures) += 1;
    if (!ok)
      continue;

    Case backward =
        make(name + " grad", KERNELS(attention_grad),
             {uniform(q), forward.ins[0], forward.ins[1], forward.ins[2],
              uniform(q), f32(uniform(lse))},
             {result(q), result(kv), result(kv)}, attentionAttrs(s));
    backward.bf16Tolerance = 2e-2;
    backward.bf16NormTolerance = 1e-2;
    backward.ins[4].values =
        decode(tiles[0].data(), forward.outs[0].size(), LOOM_DTYPE_BF16);
    backward.ins[5].values =
        decode(tiles[1].data(), forward.outs[1].size(), LOOM_DTYPE_F32);
    std::vector<std::vector<uint8_t>> tilesGrad, cudnnGrad;
    ok = runAttention(backward, "tiles", "tiles", small, tilesGrad) &&
         runAttention(backward, "cudnn", cudnnPath, small, cudnnGrad);
    for (size_t r = 0; ok && !kHostOnly && r < backward.outs.size(); ++r)
      ok = compare(backward, r, Precision::BF16,
                   decode(tilesGrad[r].data(), backward.outs[r].size(),
                          LOOM_DTYPE_BF16),
                   decode(cudnnGrad[r].data(), backward.outs[r].size(),
                          LOOM_DTYPE_BF16)) &&
           ok;
    std::printf("%s %s grad [cudnn vs tiles]\n", ok ? "PASS" : "FAIL",
                name.c_str());
    (ok ? passes : failures) += 1;
  }
  loom_cuda_context_destroy(small);
}

/// [rows, vocab] logits with -inf at every odd class, and even labels
/// for them (drawn in that order).
std::pair<Tensor, Tensor> maskedLogits(int64_t rows, int64_t vocab) {
  Tensor logits = uniform({rows, vocab}, -3, 3);
  for (size_t i = 1; i < logits.values.size(); i += 2)
    logits.values[i] = -INFINITY;
  Tensor labels = integers({rows}, 0, vocab / 2);
  for (double &label : labels.values)
    label *= 2;
  return {logits, labels};
}

void lookupAndLossCases(loom_cuda_context *context) {
  run(make("embedding", KERNELS(embedding),
           {uniform({50, 32}), integers({4, 6}, 0, 50)}, {result({4, 6, 32})}),
      context);
  run(make("embedding i64", KERNELS(embedding),
           {uniform({50, 32}), integers({10}, 0, 50, LOOM_DTYPE_I64)},
           {result({10, 32})}),
      context);
  // Ids from a small range: rows collide and add up.
  run(make("embedding_grad", KERNELS(embedding_grad),
           {uniform({4, 6, 32}), integers({4, 6}, 0, 10)}, {result({50, 32})}),
      context);
  run(make("embedding_grad f32", KERNELS(embedding_grad),
           {uniform({4, 6, 32}), integers({4, 6}, 0, 10)},
           {result({50, 32}, false)}),
      context);
  run(make("cross_entropy", KERNELS(cross_entropy),
           {uniform({12, 50}, -3, 3), integers({12}, 0, 50)},
           {result({}, false)}, {0}),
      context);
  run(make("cross_entropy token_count", KERNELS(cross_entropy),
           {uniform({3, 4, 1000}, -3, 3),
            integers({3, 4}, 0, 1000, LOOM_DTYPE_I64)},
           {result({}, false)}, {20}),
      context);
  Tensor dloss = f32(uniform({}, 0.5, 2));
  run(make("cross_entropy_grad", KERNELS(cross_entropy_grad),
           {dloss, uniform({12, 50}, -3, 3), integers({12}, 0, 50)},
           {result({12, 50})}, {0}),
      context);
  run(make("cross_entropy_grad token_count", KERNELS(cross_entropy_grad),
           {dloss, uniform({3, 4, 1000}, -3, 3),
            integers({3, 4}, 0, 1000, LOOM_DTYPE_I64)},
           {result({3, 4, 1000})}, {20}),
      context);
  // Masked logits, -inf at odd classes (the labels even): the kernels'
  // online maximum and sum skip them.
  auto [masked, evenLabels] = maskedLogits(6, 300);
  run(make("cross_entropy masked", KERNELS(cross_entropy), {masked, evenLabels},
           {result({}, false)}, {0}),
      context);
  run(make("cross_entropy_grad masked", KERNELS(cross_entropy_grad),
           {dloss, masked, evenLabels}, {result({6, 300})}, {0}),
      context);
  // The loss and its gradient from one pass (the --loom-fuse pair).
  run(make("cross_entropy_with_grad", KERNELS(cross_entropy_with_grad),
           {dloss, uniform({3, 4, 1000}, -3, 3),
            integers({3, 4}, 0, 1000, LOOM_DTYPE_I64)},
           {result({}, false), result({3, 4, 1000})}, {20}),
      context);
  run(make("cross_entropy_with_grad masked", KERNELS(cross_entropy_with_grad),
           {dloss, masked, evenLabels}, {result({}, false), result({6, 300})},
           {0}),
      context);
  // A vocabulary that is a multiple of 8 takes the kernels' 16-byte path
  // (1000 above), one that is not the scalar path (50, 300, 1001); masked
  // logits on the vector path too. 30000 f32 logits overflow the row a
  // block keeps in shared memory: the f32 run reads the rest of the row
  // again for the gradient. 1100 rows: some blocks take two. Their draws
  // are undone after them, so that later cases keep their inputs.
  std::mt19937 drawn = generator();
  auto [maskedVector, evenVectorLabels] = maskedLogits(6, 304);
  run(make("cross_entropy_with_grad masked vector",
           KERNELS(cross_entropy_with_grad),
           {dloss, maskedVector, evenVectorLabels},
           {result({}, false), result({6, 304})}, {0}),
      context);
  run(make("cross_entropy_with_grad odd vocabulary",
           KERNELS(cross_entropy_with_grad),
           {dloss, uniform({5, 1001}, -3, 3), integers({5}, 0, 1001)},
           {result({}, false), result({5, 1001})}, {0}),
      context);
  Tensor wide = uniform({4, 30000}, -3, 3);
  Tensor wideLabels = integers({4}, 0, 30000);
  run(make("cross_entropy_with_grad wide", KERNELS(cross_entropy_with_grad),
           {dloss, wide, wideLabels}, {result({}, false), result({4, 30000})},
           {0}),
      context);
  run(make("cross_entropy_grad wide", KERNELS(cross_entropy_grad),
           {dloss, wide, wideLabels}, {result({4, 30000})}, {0}),
      context);
  run(make("cross_entropy_with_grad many rows",
           KERNELS(cross_entropy_with_grad),
           {dloss, uniform({1100, 64}, -3, 3), integers({1100}, 0, 64)},
           {result({}, false), result({1100, 64})}, {0}),
      context);
  generator() = drawn;
}

/// AdamW's attributes: lr, beta1, beta2, eps, weight_decay.
std::vector<int64_t> adamwAttrs() {
  return {real(1e-3), real(0.9), real(0.999), real(1e-8), real(0.01)};
}

/// adamw_update_multi over parameters of `sizes` elements at step `step`
/// (i64): param, grad and param' bf16 in the bf16 run, the moments f32.
Case adamwMulti(std::string name, const std::vector<int64_t> &sizes,
                int64_t step) {
  Case c =
      make(std::move(name), KERNELS(adamw_update_multi), {}, {}, adamwAttrs());
  for (int64_t n : sizes) {
    c.ins.push_back(uniform({n}));
    c.ins.push_back(uniform({n}, -0.1, 0.1));
    c.ins.push_back(f32(uniform({n}, -0.01, 0.01)));
    c.ins.push_back(f32(uniform({n}, 0, 1e-4)));
    c.outs.push_back(result({n}));
    c.outs.push_back(result({n}, false));
    c.outs.push_back(result({n}, false));
  }
  c.ins.push_back(scalarInt(step));
  return c;
}

void optimizerCases(loom_cuda_context *context) {
  // param and grad bf16 in the bf16 run; the moments stay f32.
  run(make("adamw_update", KERNELS(adamw_update),
           {uniform({1000}), uniform({1000}, -0.1, 0.1),
            f32(uniform({1000}, -0.01, 0.01)), f32(uniform({1000}, 0, 1e-4)),
            scalarInt(3)},
           {result({1000}), result({1000}, false), result({1000}, false)},
           adamwAttrs()),
      context);
  // adamw_update_multi: a parameter of one element, one of less than a
  // block's chunk, one of several chunks.
  run(adamwMulti("adamw_update_multi 3 parameters", {1, 1000, 70000}, 3),
      context);
  // More parameters than one launch takes, of mixed sizes (a few empty).
  std::vector<int64_t> sizes;
  std::uniform_int_distribution<int64_t> size(1, 3000);
  for (int i = 0; i < 100; ++i)
    sizes.push_back(i % 25 == 7 ? 0 : size(generator()));
  run(adamwMulti("adamw_update_multi 100 parameters", sizes, 1000), context);
  // In the bf16 run each parameter mixes types its own way: a bf16 param
  // with an f32 grad, an f32 param with a bf16 grad into an f32 param', an
  // f32 param into a bf16 param' (and a [10, 100] param with [1000] state);
  // an i32 step.
  Case mixed =
      adamwMulti("adamw_update_multi mixed types", {500, 1000, 1000, 7}, 2);
  mixed.ins[1].lowPrecision = false;
  mixed.ins[4].lowPrecision = false;
  mixed.outs[3].lowPrecision = false;
  mixed.ins[8].lowPrecision = false;
  mixed.ins[8].shape = {10, 100};
  mixed.ins.back() = scalarInt(2, LOOM_DTYPE_I32);
  run(mixed, context);
  run(make("sgd_update", KERNELS(sgd_update),
           {uniform({1000}), uniform({1000}, -0.1, 0.1)}, {result({1000})},
           {real(0.05), real(0.01)}),
      context);
}

/// A device buffer (owned by `device`) holding `values` as `dtype`, or
/// null.
void *deviceCopy(DeviceBuffers &device, const std::vector<double> &values,
                 loom_dtype dtype) {
  std::vector<uint8_t> host = encode(values, dtype);
  void *pointer = nullptr;
  if (cudaMalloc(&pointer, host.size()) != cudaSuccess)
    return nullptr;
  device.pointers.push_back(pointer);
  if (cudaMemcpy(pointer, host.data(), host.size(), cudaMemcpyHostToDevice) !=
      cudaSuccess)
    return nullptr;
  return pointer;
}

/// A tensor's description in a meta: element type, rank 1, `n`.
void describe(std::vector<int64_t> &meta, loom_dtype dtype, int64_t n) {
  meta.insert(meta.end(), {dtype, 1, n});
}

/// Runs adamw_update_multi over parameters of `sizes` elements and
/// adamw_update on each parameter alone, on the same device operands;
/// compares the results byte for byte. Parameter i's param (and param')
/// is bf16 when i is odd, its grad when i / 2 is odd.
bool adamwMultiMatchesSingles(const std::vector<int64_t> &sizes,
                              loom_cuda_context *context) {
  int64_t params = static_cast<int64_t>(sizes.size());
  std::vector<int64_t> attrs = adamwAttrs();
  DeviceBuffers device;
  void *step = deviceCopy(device, {7.0}, LOOM_DTYPE_I32);
  if (!step)
    return false;
  std::vector<int64_t> multiMeta = {4 * params + 1, 3 * params}, resultMeta;
  std::vector<void *> operands, results;
  // Per parameter: its adamw_update call's meta and buffers (the operands
  // shared with the multi call, results of its own), its results' types.
  std::vector<std::vector<int64_t>> singleMeta(params);
  std::vector<std::array<void *, 8>> singleBuffers(params);
  std::vector<std::array<loom_dtype, 3>> resultTypes(params);
  for (int64_t i = 0; i < params; ++i) {
    int64_t n = sizes[i];
    loom_dtype paramType = i % 2 ? LOOM_DTYPE_BF16 : LOOM_DTYPE_F32;
    loom_dtype gradType = i / 2 % 2 ? LOOM_DTYPE_BF16 : LOOM_DTYPE_F32;
    const loom_dtype inTypes[4] = {paramType, gradType, LOOM_DTYPE_F32,
                                   LOOM_DTYPE_F32};
    resultTypes[i] = {paramType, LOOM_DTYPE_F32, LOOM_DTYPE_F32};
    const Tensor ins[4] = {uniform({n}), uniform({n}, -0.1, 0.1),
                           uniform({n}, -0.01, 0.01), uniform({n}, 0, 1e-4)};
    singleMeta[i] = {5, 3};
    for (int k = 0; k < 4; ++k) {
      void *pointer = deviceCopy(device, ins[k].values, inTypes[k]);
      if (!pointer)
        return false;
      operands.push_back(pointer);
      singleBuffers[i][k] = pointer;
      describe(multiMeta, inTypes[k], n);
      describe(singleMeta[i], inTypes[k], n);
    }
    singleBuffers[i][4] = step;
    singleMeta[i].insert(singleMeta[i].end(), {LOOM_DTYPE_I32, 0});
    for (int k = 0; k < 3; ++k) {
      describe(resultMeta, resultTypes[i][k], n);
      describe(singleMeta[i], resultTypes[i][k], n);
      // NaN-filled, as runCuda's.
      std::vector<double> fill(n, NAN);
      void *multi = deviceCopy(device, fill, resultTypes[i][k]);
      void *single = deviceCopy(device, fill, resultTypes[i][k]);
      if (!multi || !single)
        return false;
      results.push_back(multi);
      singleBuffers[i][5 + k] = single;
    }
    singleMeta[i].insert(singleMeta[i].end(), attrs.begin(), attrs.end());
  }
  operands.push_back(step);
  multiMeta.insert(multiMeta.end(), {LOOM_DTYPE_I32, 0});
  multiMeta.insert(multiMeta.end(), resultMeta.begin(), resultMeta.end());
  multiMeta.insert(multiMeta.end(), attrs.begin(), attrs.end());
  operands.insert(operands.end(), results.begin(), results.end());

  int32_t status = loom_cuda_adamw_update_multi(nullptr, operands.data(),
                                                multiMeta.data(), context);
  for (int64_t i = 0; i < params && status == 0; ++i)
    status = loom_cuda_adamw_update(nullptr, singleBuffers[i].data(),
                                    singleMeta[i].data(), context);
  if (status == 0)
    status = loom_cuda_context_synchronize(context);
  if (status != 0) {
    std::printf("  a kernel failed (%d): %s\n", status, loom_cuda_last_error());
    return false;
  }
  for (int64_t i = 0; i < params && !kHostOnly; ++i)
    for (int k = 0; k < 3; ++k) {
      loom_dtype dtype = resultTypes[i][k];
      int64_t bytes = sizes[i] * loom_dtype_bytes(dtype);
      std::vector<uint8_t> multi(bytes + 8), single(bytes + 8);
      CHECK_CUDA(cudaMemcpy(multi.data(), results[3 * i + k], bytes,
                            cudaMemcpyDeviceToHost));
      CHECK_CUDA(cudaMemcpy(single.data(), singleBuffers[i][5 + k], bytes,
                            cudaMemcpyDeviceToHost));
      std::vector<double> values = decode(single.data(), sizes[i], dtype);
      bool written =
          std::none_of(values.begin(), values.end(),
                       [](double value) { return std::isnan(value); });
      if (!written || std::memcmp(multi.data(), single.data(), bytes) != 0) {
        std::printf("  parameter %lld (%lld elements), result %d: %s\n",
                    static_cast<long long>(i), static_cast<long long>(sizes[i]),
                    k,
                    written ? "the results differ" : "adamw_update left a NaN");
        return false;
      }
    }
  return true;
}

/// adamw_update_multi gives each parameter exactly adamw_update's results:
/// parameters from one element to several chunks, two large enough to fill
/// a launch's blocks (one continues in the next launch), more parameters
/// than a launch holds, every mix of f32 and bf16 param and grad.
void adamwMultiIdentityCases(loom_cuda_context *context) {
  std::string name = "adamw_update_multi = adamw_update per parameter";
  if (filter && name.find(filter) == std::string::npos)
    return;
  std::vector<int64_t> sizes = {1, 1000, 70000, 5000000, 5000000};
  for (int64_t i = 0; i < 30; ++i)
    sizes.push_back(1 + i * 677 % 5000);
  bool ok = adamwMultiMatchesSingles(sizes, context);
  std::printf("%s %s\n", ok ? "PASS" : "FAIL", name.c_str());
  (ok ? passes : failures) += 1;
}

//===----------------------------------------------------------------------===//
// Failures
//===----------------------------------------------------------------------===//

void expectFailure(const char *name, bool failed, const char *message,
                   const char *want) {
  bool ok = failed && std::strstr(message, want) != nullptr;
  std::printf("%s %s%s%s\n", ok ? "PASS" : "FAIL", name,
              ok ? "" : ": expected a failure naming: ", ok ? "" : want);
  if (!ok)
    std::printf("  got status %d, message \"%s\"\n", failed, message);
  (ok ? passes : failures) += 1;
}

/// The meta of an op on tensors of these types and shapes.
std::vector<int64_t> metaFor(std::vector<Tensor> ins, std::vector<Tensor> outs,
                             std::vector<int64_t> attrs) {
  Case c = make("", nullptr, nullptr, std::move(ins), std::move(outs),
                std::move(attrs));
  return metaOf(c, Precision::BF16);
}

/// Errors come back as statuses with the CPU kernels' messages: at once
/// for what the host sees, at loom_cuda_context_synchronize for what only
/// the device sees.
void failureCases(loom_cuda_context *context) {
  if (filter && std::string("errors").find(filter) == std::string::npos)
    return;
  DeviceBuffers device;
  for (int i = 0; i < 3; ++i) {
    void *pointer = nullptr;
    cudaMalloc(&pointer, 4096);
    cudaMemset(pointer, 0, 4096);
    device.pointers.push_back(pointer);
  }
  void *data = device.pointers[0], *ids = device.pointers[1],
       *out = device.pointers[2];
  int32_t badIds[4] = {1, 2, 50, 3};
  cudaMemcpy(ids, badIds, sizeof badIds, cudaMemcpyHostToDevice);

  void *lookup[3] = {data, ids, out};
  std::vector<int64_t> embedding =
      metaFor({f32(uniform({50, 8})), integers({4}, 0, 1)},
              {result({4, 8}, false)}, {});
  int32_t launched = 0, synced = 0;
  // What only the device sees (a fake device runs no kernel to see it).
  if (!kHostOnly) {
    launched = loom_cuda_embedding(nullptr, lookup, embedding.data(), context);
    synced = loom_cuda_context_synchronize(context);
    expectFailure("errors: embedding id out of range",
                  launched == 0 && synced != 0, loom_cuda_last_error(),
                  "embedding: id 50 at flat index 2 is outside [0, 50)");
    expectFailure("errors: the error word is cleared",
                  loom_cuda_context_synchronize(context) == 0, "", "");
  }

  // A step of 0 (data is zeros): the CPU kernel's check, on the device.
  void *adamBuffers[8] = {data, data, data, data, data, out, out, out};
  std::vector<int64_t> adamw =
      metaFor({f32(uniform({8})), f32(uniform({8})), f32(uniform({8})),
               f32(uniform({8})), scalarInt(0)},
              {result({8}, false), result({8}, false), result({8}, false)},
              {real(1e-3), real(0.9), real(0.999), real(1e-8), real(0.0)});
  if (!kHostOnly) {
    launched =
        loom_cuda_adamw_update(nullptr, adamBuffers, adamw.data(), context);
    synced = loom_cuda_context_synchronize(context);
    expectFailure("errors: adamw step 0", launched == 0 && synced != 0,
                  loom_cuda_last_error(),
                  "adamw_update: step 0 is not 1-based");
  }

  // adamw_update_multi on two parameters of 8 elements (step 0 again).
  std::vector<Tensor> multiIns, multiOuts;
  for (int i = 0; i < 2; ++i) {
    for (int k = 0; k < 4; ++k)
      multiIns.push_back(f32(uniform({8})));
    for (int k = 0; k < 3; ++k)
      multiOuts.push_back(result({8}, false));
  }
  multiIns.push_back(scalarInt(0));
  void *multiBuffers[15] = {data, data, data, data, data, data, data, data,
                            data, out,  out,  out,  out,  out,  out};
  auto multiCall = [&](std::vector<Tensor> ins) {
    std::vector<int64_t> meta =
        metaFor(std::move(ins), multiOuts,
                {real(1e-3), real(0.9), real(0.999), real(1e-8), real(0.0)});
    return loom_cuda_adamw_update_multi(nullptr, multiBuffers, meta.data(),
                                        context);
  };
  if (!kHostOnly) {
    launched = multiCall(multiIns);
    synced = loom_cuda_context_synchronize(context);
    expectFailure("errors: adamw_update_multi step 0",
                  launched == 0 && synced != 0, loom_cuda_last_error(),
                  "adamw_update_multi: step 0 is not 1-based");
  }
  expectFailure(
      "errors: adamw_update_multi with 4N operands",
      multiCall(std::vector<Tensor>(multiIns.begin() + 1, multiIns.end())) != 0,
      loom_cuda_last_error(),
      "loom_cuda_adamw_update_multi: 8 operands and 6 results, "
      "expected 4N + 1 and 3N");
  std::vector<Tensor> ragged = multiIns;
  ragged[7] = f32(uniform({7})); // parameter 1's v
  expectFailure("errors: adamw_update_multi sizes differ",
                multiCall(ragged) != 0, loom_cuda_last_error(),
                "loom_cuda_adamw_update_multi: parameter 1: the operands and "
                "results differ in size (8 and 7 elements)");
  std::vector<Tensor> bf16Moment = multiIns;
  bf16Moment[2] = uniform({8}); // bf16 in metaFor's types
  expectFailure("errors: adamw_update_multi bf16 moment",
                multiCall(bf16Moment) != 0, loom_cuda_last_error(),
                "loom_cuda_adamw_update_multi: parameter 0: the moments must "
                "be f32");

  void *product[3] = {data, data, out};
  std::vector<int64_t> mixed = metaFor({f32(uniform({4, 4})), uniform({4, 4})},
                                       {result({4, 4}, false)}, {0, 0, 0});
  expectFailure("errors: matmul f32 x bf16",
                loom_cuda_matmul(nullptr, product, mixed.data(), context) != 0,
                loom_cuda_last_error(),
                "loom_cuda_matmul: operands of element");

  void *biased[4] = {data, data, data, out};
  std::vector<int64_t> shortBias =
      metaFor({uniform({4, 8}), uniform({8, 6}), uniform({5})},
              {result({4, 6})}, {0, 0, LOOM_EPILOGUE_BIAS});
  expectFailure("errors: matmul bias of the wrong length",
                loom_cuda_matmul(nullptr, biased, shortBias.data(), context) !=
                    0,
                loom_cuda_last_error(),
                "loom_cuda_matmul: the bias must be [6] of the result's "
                "element type");
  std::vector<int64_t> oneResult =
      metaFor({uniform({4, 8}), uniform({8, 6}), uniform({6})},
              {result({4, 6})}, {0, 0, LOOM_EPILOGUE_BIAS_GELU_AUX});
  expectFailure("errors: matmul bias_gelu_aux with one result",
                loom_cuda_matmul(nullptr, biased, oneResult.data(), context) !=
                    0,
                loom_cuda_last_error(),
                "loom_cuda_matmul: epilogue bias_gelu_aux takes 3 operands "
                "and 2 results, got 3 and 1");

  // A path LOOM_CUDA_ATTENTION does not name fails the call, whatever it
  // would have run on.
  void *attention[5] = {data, data, data, out, out};
  std::vector<int64_t> heads = metaFor(
      {uniform({1, 4, 2, 16}), uniform({1, 4, 2, 16}), uniform({1, 4, 2, 16})},
      {result({1, 4, 2, 16}), result({1, 2, 4}, false)},
      {1, real(0.25), 0, real(0.0), 0, 0, 0});
  setenv("LOOM_CUDA_ATTENTION", "fastest", 1);
  expectFailure(
      "errors: attention on an unknown path",
      loom_cuda_attention(nullptr, attention, heads.data(), context) != 0,
      loom_cuda_last_error(),
      "loom_cuda_attention: LOOM_CUDA_ATTENTION=fastest: expected cudnn, "
      "tiles or simt");
  unsetenv("LOOM_CUDA_ATTENTION");

  // fused_elementwise's program, checked on the host.
  void *chain[3] = {data, data, out};
  auto fused = [&](std::vector<int64_t> attrs) {
    std::vector<int64_t> meta = metaFor({uniform({4, 4}), uniform({4, 4})},
                                        {result({4, 4})}, std::move(attrs));
    return loom_cuda_fused_elementwise(nullptr, chain, meta.data(), context);
  };
  expectFailure("errors: fused unknown opcode",
                fused(program({{99, 0, 1}}, {2})) != 0, loom_cuda_last_error(),
                "loom_cuda_fused_elementwise: instruction 0 ");
  expectFailure("errors: fused register not before its own",
                fused(program({{LOOM_FUSED_ADD, 0, 1}, {LOOM_FUSED_MUL, 3, 0}},
                              {3})) != 0,
                loom_cuda_last_error(),
                "loom_cuda_fused_elementwise: instruction 1 ");
  expectFailure("errors: fused too many instructions",
                fused(program(std::vector<std::array<int64_t, 3>>(
                                  LOOM_FUSED_MAX_INSTRUCTIONS + 1,
                                  {LOOM_FUSED_ADD, 0, 1}),
                              {2})) != 0,
                loom_cuda_last_error(), "loom_cuda_fused_elementwise: 65 ");
  expectFailure("errors: fused result register out of range",
                fused(program({{LOOM_FUSED_ADD, 0, 1}}, {3})) != 0,
                loom_cuda_last_error(),
                "loom_cuda_fused_elementwise: result 0 ");

  loom_cuda_context *small = nullptr;
  if (loom_cuda_context_create(nullptr, 64, &small) == 0) {
    void *norm[6] = {data, data, data, out, out, out};
    std::vector<int64_t> grad =
        metaFor({uniform({50, 8}), uniform({50, 8}), uniform({8})},
                {result({50, 8}), result({8}), result({8})}, {real(1e-5)});
    expectFailure("errors: too little scratch",
                  loom_cuda_layernorm_grad(nullptr, norm, grad.data(), small) !=
                      0,
                  loom_cuda_last_error(), "needs 464 bytes of scratch");
    loom_cuda_context_destroy(small);
  }
}

/// loom_cuda_upload: a host buffer (a compiled program's constant) into
/// device memory, bit for bit, for each element type; a size mismatch
/// fails on the host.
void uploadCases(loom_cuda_context *context) {
  if (filter && std::string("upload").find(filter) == std::string::npos)
    return;
  for (loom_dtype dtype : {LOOM_DTYPE_F32, LOOM_DTYPE_BF16, LOOM_DTYPE_I64}) {
    Tensor t = dtype == LOOM_DTYPE_I64 ? integers({5, 7}, -1000, 1000, dtype)
                                       : uniform({5, 7});
    t.dtype = dtype == LOOM_DTYPE_I64 ? dtype : LOOM_DTYPE_F32;
    std::vector<uint8_t> host = encode(t.values, dtype);
    int64_t bytes = t.size() * loom_dtype_bytes(dtype);
    std::vector<int64_t> meta = {1, 1, dtype, 2, 5, 7, dtype, 2, 5, 7};
    std::string name =
        std::string("upload ") + (dtype == LOOM_DTYPE_F32    ? "f32"
                                  : dtype == LOOM_DTYPE_BF16 ? "bf16"
                                                             : "i64");
    DeviceBuffers device;
    void *out = nullptr;
    cudaMalloc(&out, bytes);
    device.pointers.push_back(out);
    void *buffers[2] = {host.data(), out};
    int32_t status = loom_cuda_upload(nullptr, buffers, meta.data(), context);
    if (status == 0)
      status = loom_cuda_context_synchronize(context);
    std::vector<uint8_t> back(bytes);
    if (status == 0)
      cudaMemcpy(back.data(), out, bytes, cudaMemcpyDeviceToHost);
    bool ok = status == 0 && std::memcmp(back.data(), host.data(), bytes) == 0;
    std::printf("%s %s\n", ok ? "PASS" : "FAIL", name.c_str());
    if (!ok)
      std::printf("  status %d: %s\n", status, loom_cuda_last_error());
    (ok ? passes : failures) += 1;
  }
  std::vector<float> host(6);
  std::vector<int64_t> meta = {1, 1, LOOM_DTYPE_F32, 1, 6, LOOM_DTYPE_F32,
                               1, 7};
  void *buffers[2] = {host.data(), nullptr};
  expectFailure("upload: sizes differ",
                loom_cuda_upload(nullptr, buffers, meta.data(), context) != 0,
                loom_cuda_last_error(),
                "loom_cuda_upload: the operand has 24 bytes, the result 28");
}

//===----------------------------------------------------------------------===//
// Collectives
//===----------------------------------------------------------------------===//

/// A loopback communicator group: `members` members that all hold this
/// rank's buffers, this rank being member `index` (and at `coordinates` on
/// the grid, for all_slice). So all_reduce multiplies a sum by `members`
/// and keeps a max or a min, all_gather repeats the block `members` times,
/// reduce_scatter gives block `index` reduced over the members, and
/// all_to_all gives every received block j (member j's block `index`) this
/// rank's block `index`. A non-zero `status` is what every callback
/// returns, touching nothing. The CPU kernels get the host callbacks; the
/// CUDA kernels get device callbacks that synchronize `stream` (the
/// context's), copy their device buffers to the host, run the host
/// callback and copy the result back before returning: the host-staged
/// path of loom_cuda_kernels.h's contract. A split collective's start only
/// records the transfer and its wait runs it, the latest a backend may: a
/// kernel that read or wrote the transfer's buffers after the start would
/// give other bytes than the blocking call.
struct Loopback {
  int64_t members = 1;
  int64_t index = 0;
  int64_t coordinates[2] = {0, 0};
  int32_t status = 0;
  cudaStream_t stream = nullptr;
  /// The split collectives started and not yet waited for, by slot.
  std::map<int32_t, std::function<int32_t()>> started;
};

Loopback &loopbackOf(void *ctx) { return *static_cast<Loopback *>(ctx); }

/// The reduction over `members` members of copies of `value`.
double reduceCopies(double value, int64_t members, loom_reduction op) {
  return op == LOOM_REDUCE_SUM ? value * static_cast<double>(members) : value;
}

/// `count` elements of `dtype` from `src` reduced over the members into
/// `dst` (which may be `src`), rounded to `dtype`.
void reduceInto(const void *src, void *dst, int64_t count, loom_dtype dtype,
                int64_t members, loom_reduction op) {
  std::vector<double> values =
      decode(static_cast<const uint8_t *>(src), count, dtype);
  for (double &value : values)
    value = reduceCopies(value, members, op);
  std::vector<uint8_t> bytes = encode(values, dtype);
  std::memcpy(dst, bytes.data(), count * loom_dtype_bytes(dtype));
}

int32_t hostAllReduce(void *ctx, int32_t, void *buf, int64_t count,
                      loom_dtype dtype, loom_reduction op) {
  const Loopback &group = loopbackOf(ctx);
  if (group.status)
    return group.status;
  reduceInto(buf, buf, count, dtype, group.members, op);
  return 0;
}

int32_t hostAllGather(void *ctx, int32_t, const void *send, void *recv,
                      int64_t count, loom_dtype dtype) {
  const Loopback &group = loopbackOf(ctx);
  if (group.status)
    return group.status;
  int64_t bytes = count * loom_dtype_bytes(dtype);
  for (int64_t m = 0; m < group.members; ++m)
    std::memcpy(static_cast<uint8_t *>(recv) + m * bytes, send, bytes);
  return 0;
}

int32_t hostReduceScatter(void *ctx, int32_t, const void *send, void *recv,
                          int64_t count, loom_dtype dtype, loom_reduction op) {
  const Loopback &group = loopbackOf(ctx);
  if (group.status)
    return group.status;
  int64_t bytes = count * loom_dtype_bytes(dtype);
  reduceInto(static_cast<const uint8_t *>(send) + group.index * bytes, recv,
             count, dtype, group.members, op);
  return 0;
}

int32_t hostAllToAll(void *ctx, int32_t, const void *send, void *recv,
                     int64_t count, loom_dtype dtype) {
  const Loopback &group = loopbackOf(ctx);
  if (group.status)
    return group.status;
  int64_t bytes = count * loom_dtype_bytes(dtype);
  for (int64_t m = 0; m < group.members; ++m)
    std::memcpy(static_cast<uint8_t *>(recv) + m * bytes,
                static_cast<const uint8_t *>(send) + group.index * bytes,
                bytes);
  return 0;
}

int64_t loopbackCoordinate(void *ctx, int32_t axis) {
  return loopbackOf(ctx).coordinates[axis];
}

/// The status of a device callback whose staging copy failed.
constexpr int32_t kStagingFailed = 99;

/// `bytes` of device memory at `device` after the stream's work.
bool stageIn(const Loopback &group, const void *device, int64_t bytes,
             std::vector<uint8_t> &host) {
  host.assign(bytes + 8, 0);
  return cudaStreamSynchronize(group.stream) == cudaSuccess &&
         cudaMemcpy(host.data(), device, bytes, cudaMemcpyDeviceToHost) ==
             cudaSuccess;
}

/// `host` back into `device`, there when the callback returns.
bool stageOut(const Loopback &group, void *device,
              const std::vector<uint8_t> &host, int64_t bytes) {
  return cudaMemcpyAsync(device, host.data(), bytes, cudaMemcpyHostToDevice,
                         group.stream) == cudaSuccess &&
         cudaStreamSynchronize(group.stream) == cudaSuccess;
}

int32_t deviceAllReduce(void *ctx, int32_t g, void *buf, int64_t count,
                        loom_dtype dtype, loom_reduction op) {
  const Loopback &group = loopbackOf(ctx);
  if (group.status)
    return group.status;
  int64_t bytes = count * loom_dtype_bytes(dtype);
  std::vector<uint8_t> host;
  if (!stageIn(group, buf, bytes, host))
    return kStagingFailed;
  hostAllReduce(ctx, g, host.data(), count, dtype, op);
  return stageOut(group, buf, host, bytes) ? 0 : kStagingFailed;
}

int32_t deviceAllGather(void *ctx, int32_t g, const void *send, void *recv,
                        int64_t count, loom_dtype dtype) {
  const Loopback &group = loopbackOf(ctx);
  if (group.status)
    return group.status;
  int64_t bytes = count * loom_dtype_bytes(dtype);
  std::vector<uint8_t> in, out(bytes * group.members + 8);
  if (!stageIn(group, send, bytes, in))
    return kStagingFailed;
  hostAllGather(ctx, g, in.data(), out.data(), count, dtype);
  return stageOut(group, recv, out, bytes * group.members) ? 0 : kStagingFailed;
}

int32_t deviceReduceScatter(void *ctx, int32_t g, const void *send, void *recv,
                            int64_t count, loom_dtype dtype,
                            loom_reduction op) {
  const Loopback &group = loopbackOf(ctx);
  if (group.status)
    return group.status;
  int64_t bytes = count * loom_dtype_bytes(dtype);
  std::vector<uint8_t> in, out(bytes + 8);
  if (!stageIn(group, send, bytes * group.members, in))
    return kStagingFailed;
  hostReduceScatter(ctx, g, in.data(), out.data(), count, dtype, op);
  return stageOut(group, recv, out, bytes) ? 0 : kStagingFailed;
}

int32_t deviceAllToAll(void *ctx, int32_t g, const void *send, void *recv,
                       int64_t count, loom_dtype dtype) {
  const Loopback &group = loopbackOf(ctx);
  if (group.status)
    return group.status;
  int64_t bytes = count * loom_dtype_bytes(dtype) * group.members;
  std::vector<uint8_t> in, out(bytes + 8);
  if (!stageIn(group, send, bytes, in))
    return kStagingFailed;
  hostAllToAll(ctx, g, in.data(), out.data(), count, dtype);
  return stageOut(group, recv, out, bytes) ? 0 : kStagingFailed;
}

/// The status of a start on a slot already in flight, and of a wait on a
/// slot with nothing in flight.
constexpr int32_t kSlotBusy = 97;
constexpr int32_t kNothingInFlight = 98;

/// Records `transfer` under `slot` of the group `ctx` (after its `status`).
int32_t start(void *ctx, int32_t slot, std::function<int32_t()> transfer) {
  Loopback &group = loopbackOf(ctx);
  if (group.status)
    return group.status;
  return group.started.emplace(slot, std::move(transfer)).second ? 0
                                                                 : kSlotBusy;
}

/// Runs the transfer started under `slot`.
int32_t waitFor(void *ctx, int32_t slot) {
  auto &started = loopbackOf(ctx).started;
  auto it = started.find(slot);
  if (it == started.end())
    return kNothingInFlight;
  std::function<int32_t()> transfer = std::move(it->second);
  started.erase(it);
  return transfer();
}

/// The device callbacks' starts: the CUDA kernels' split collectives (the
/// CPU kernels here only run blocking ones).
int32_t deviceAllReduceStart(void *ctx, int32_t slot, int32_t g, void *buf,
                             int64_t count, loom_dtype dtype,
                             loom_reduction op) {
  return start(ctx, slot,
               [=] { return deviceAllReduce(ctx, g, buf, count, dtype, op); });
}

int32_t deviceAllGatherStart(void *ctx, int32_t slot, int32_t g,
                             const void *send, void *recv, int64_t count,
                             loom_dtype dtype) {
  return start(ctx, slot, [=] {
    return deviceAllGather(ctx, g, send, recv, count, dtype);
  });
}

int32_t deviceReduceScatterStart(void *ctx, int32_t slot, int32_t g,
                                 const void *send, void *recv, int64_t count,
                                 loom_dtype dtype, loom_reduction op) {
  return start(ctx, slot, [=] {
    return deviceReduceScatter(ctx, g, send, recv, count, dtype, op);
  });
}

/// A loopback group with its two comms and frames (host callbacks for the
/// CPU kernel, device callbacks for the CUDA kernel).
struct LoopbackGroup {
  Loopback state;
  loom_comm hostComm = {}, deviceComm = {};
  loom_call_frame hostFrame = {}, deviceFrame = {};

  LoopbackGroup(int64_t members, int64_t index, cudaStream_t stream) {
    state.members = members;
    state.index = index;
    state.stream = stream;
    hostComm.ctx = deviceComm.ctx = &state;
    hostComm.all_reduce = hostAllReduce;
    hostComm.all_gather = hostAllGather;
    hostComm.reduce_scatter = hostReduceScatter;
    hostComm.all_to_all = hostAllToAll;
    deviceComm.all_reduce = deviceAllReduce;
    deviceComm.all_gather = deviceAllGather;
    deviceComm.reduce_scatter = deviceReduceScatter;
    deviceComm.all_to_all = deviceAllToAll;
    deviceComm.all_reduce_start = deviceAllReduceStart;
    deviceComm.all_gather_start = deviceAllGatherStart;
    deviceComm.reduce_scatter_start = deviceReduceScatterStart;
    deviceComm.wait = waitFor;
    hostComm.grid_coordinate = deviceComm.grid_coordinate = loopbackCoordinate;
    hostFrame.comm = &hostComm;
    deviceFrame.comm = &deviceComm;
  }
  LoopbackGroup(const LoopbackGroup &) = delete;
  LoopbackGroup &operator=(const LoopbackGroup &) = delete;

  /// `c` run on this group.
  Case on(Case c) const {
    c.frame = &hostFrame;
    c.cudaFrame = &deviceFrame;
    return c;
  }
};

/// The attributes of a collective: group 0, then `rest`.
std::vector<int64_t> collective(std::vector<int64_t> rest) {
  rest.insert(rest.begin(), 0);
  return rest;
}

/// The attributes of all_reduce, reduce_scatter or all_gather: group 0,
/// `rest`, then the slot (-1: the call communicates and waits).
std::vector<int64_t> transfer(std::vector<int64_t> rest, int64_t slot = -1) {
  std::vector<int64_t> attrs = collective(std::move(rest));
  attrs.push_back(slot);
  return attrs;
}

/// Each collective against the CPU kernel on a loopback group, with the
/// moved dimension leading (outer 1: the callback works on the kernel's
/// buffers) and inside (outer > 1: packed and unpacked around it).
void collectiveCases(loom_cuda_context *context, cudaStream_t stream) {
  LoopbackGroup four(4, 1, stream), three(3, 2, stream);
  // all_reduce: group, reduction, slot.
  run(four.on(make("all_reduce sum", KERNELS(all_reduce), {uniform({4, 6})},
                   {result({4, 6})}, transfer({LOOM_REDUCE_SUM}))),
      context);
  run(three.on(make("all_reduce sum of 3", KERNELS(all_reduce), {uniform({37})},
                    {result({37})}, transfer({LOOM_REDUCE_SUM}))),
      context);
  run(four.on(make("all_reduce max", KERNELS(all_reduce), {uniform({4, 6})},
                   {result({4, 6})}, transfer({LOOM_REDUCE_MAX}))),
      context);
  // In the bf16 run an f32 operand into a bf16 result: converted first.
  run(four.on(make("all_reduce f32 -> bf16", KERNELS(all_reduce),
                   {f32(uniform({4, 6}))}, {result({4, 6})},
                   transfer({LOOM_REDUCE_MIN}))),
      context);

  // reduce_scatter: group, reduction, members, scatter_axis, slot.
  run(four.on(make("reduce_scatter leading", KERNELS(reduce_scatter),
                   {uniform({8, 5})}, {result({2, 5})},
                   transfer({LOOM_REDUCE_SUM, 4, 0}))),
      context);
  run(four.on(make("reduce_scatter packed", KERNELS(reduce_scatter),
                   {uniform({3, 8, 5})}, {result({3, 2, 5})},
                   transfer({LOOM_REDUCE_SUM, 4, 1}))),
      context);
  run(three.on(make("reduce_scatter packed last axis", KERNELS(reduce_scatter),
                    {uniform({2, 3, 9})}, {result({2, 3, 3})},
                    transfer({LOOM_REDUCE_MAX, 3, 2}))),
      context);
  // In the bf16 run the f32 operand is packed into bf16 blocks.
  run(four.on(make("reduce_scatter f32 -> bf16 leading",
                   KERNELS(reduce_scatter), {f32(uniform({8, 5}))},
                   {result({2, 5})}, transfer({LOOM_REDUCE_SUM, 4, 0}))),
      context);
  run(four.on(make("reduce_scatter f32 -> bf16 packed", KERNELS(reduce_scatter),
                   {f32(uniform({3, 8, 5}))}, {result({3, 2, 5})},
                   transfer({LOOM_REDUCE_SUM, 4, 1}))),
      context);

  // all_gather: group, members, gather_axis, slot.
  run(three.on(make("all_gather leading", KERNELS(all_gather),
                    {uniform({2, 5})}, {result({6, 5})}, transfer({3, 0}))),
      context);
  run(four.on(make("all_gather packed", KERNELS(all_gather),
                   {uniform({3, 2, 5})}, {result({3, 8, 5})},
                   transfer({4, 1}))),
      context);
  run(four.on(make("all_gather last axis", KERNELS(all_gather),
                   {uniform({4, 3})}, {result({4, 12})}, transfer({4, 1}))),
      context);

  // all_to_all: group, members, split_axis, concat_axis.
  run(four.on(make("all_to_all leading", KERNELS(all_to_all), {uniform({8, 3})},
                   {result({8, 3})}, collective({4, 0, 0}))),
      context);
  run(four.on(make("all_to_all packed", KERNELS(all_to_all),
                   {uniform({3, 8, 5})}, {result({3, 2, 20})},
                   collective({4, 1, 2}))),
      context);
  run(three.on(make("all_to_all split inside, concat leading",
                    KERNELS(all_to_all), {uniform({4, 6})}, {result({12, 2})},
                    collective({3, 1, 0}))),
      context);
  run(three.on(make(
          "all_to_all i64 split leading, concat inside", KERNELS(all_to_all),
          {integers({6, 4}, -1000, 1000, LOOM_DTYPE_I64)},
          {result({2, 12}, false, LOOM_DTYPE_I64)}, collective({3, 0, 1}))),
      context);

  // all_slice: group, slice_axis, grid axes, their sizes. On a 2 x 4 grid
  // at (1, 3): member 7 of 8 on both axes, member 3 of 4 on axis 1.
  LoopbackGroup grid(8, 7, stream);
  grid.state.coordinates[0] = 1;
  grid.state.coordinates[1] = 3;
  std::vector<int64_t> attrs = collective({1});
  appendArray(attrs, {0, 1});
  appendArray(attrs, {2, 4});
  run(grid.on(make("all_slice 2 axes", KERNELS(all_slice),
                   {uniform({6, 16, 5})}, {result({6, 2, 5})}, attrs)),
      context);
  attrs = collective({0});
  appendArray(attrs, {1});
  appendArray(attrs, {4});
  run(grid.on(make("all_slice leading", KERNELS(all_slice), {uniform({8, 5})},
                   {result({2, 5})}, attrs)),
      context);
}

/// Runs `c` (all_reduce, reduce_scatter or all_gather on a loopback
/// group, its attributes ending with the slot) blocking, then split: the
/// start under slot 0 and the collective_wait call that ends it, which
/// lists the transfer's buffers as the lowering does (all_reduce's result,
/// else the operand and the result). Both must give the same bytes, in
/// both runs, and leave nothing in flight.
void runSplit(const Case &c, loom_cuda_context *context) {
  if (filter && c.name.find(filter) == std::string::npos)
    return;
  Case split = c;
  split.attrs.back() = 0;
  bool reduces = c.cuda == loom_cuda_all_reduce;
  Loopback &group = loopbackOf(c.cudaFrame->comm->ctx);
  for (Precision precision : {Precision::F32, Precision::BF16}) {
    std::vector<Tensor> ins = inputsFor(c, precision);
    std::vector<Tensor> listed = {c.outs[0]};
    if (!reduces)
      listed.insert(listed.begin(), ins[0]);
    std::vector<int64_t> waitMeta =
        metaOf(make("", nullptr, nullptr, listed, {}, {0}), precision);
    auto wait = [&](void *const *buffers) {
      if (int32_t status = loom_cuda_collective_wait(
              c.cudaFrame, reduces ? buffers + 1 : buffers, waitMeta.data(),
              context)) {
        std::printf("  collective_wait failed (%d): %s\n", status,
                    loom_cuda_last_error());
        return false;
      }
      return true;
    };
    std::vector<std::vector<uint8_t>> want, got;
    bool ok = runCudaBytes(c, ins, precision, context, want) &&
              runCudaBytes(split, ins, precision, context, got, wait);
    if (ok && !kHostOnly && want != got) {
      std::printf("  the split call's results differ from the blocking "
                  "call's\n");
      ok = false;
    }
    if (!group.started.empty()) {
      // Their buffers are gone: never run them.
      std::printf("  %zu transfer(s) left in flight\n", group.started.size());
      group.started.clear();
      ok = false;
    }
    std::printf("%s split %s [%s]\n", ok ? "PASS" : "FAIL", c.name.c_str(),
                nameOf(precision));
    (ok ? passes : failures) += 1;
  }
}

/// The collectives the lowering splits, split and blocking: all_reduce
/// (its operand copied into its result, converted in the bf16 run, before
/// the start), and reduce_scatter / all_gather moving the leading
/// dimension or one after dimensions of 1 (contiguous member blocks).
void splitCases(loom_cuda_context *context, cudaStream_t stream) {
  LoopbackGroup four(4, 1, stream), three(3, 2, stream);
  runSplit(
      four.on(make("all_reduce sum", KERNELS(all_reduce), {uniform({4, 6})},
                   {result({4, 6})}, transfer({LOOM_REDUCE_SUM}))),
      context);
  runSplit(four.on(make("all_reduce f32 -> bf16", KERNELS(all_reduce),
                        {f32(uniform({4, 6}))}, {result({4, 6})},
                        transfer({LOOM_REDUCE_MAX}))),
           context);
  runSplit(four.on(make("reduce_scatter leading", KERNELS(reduce_scatter),
                        {uniform({8, 5})}, {result({2, 5})},
                        transfer({LOOM_REDUCE_SUM, 4, 0}))),
           context);
  runSplit(
      three.on(make("reduce_scatter after a dimension of 1",
                    KERNELS(reduce_scatter), {uniform({1, 9, 5})},
                    {result({1, 3, 5})}, transfer({LOOM_REDUCE_SUM, 3, 1}))),
      context);
  runSplit(
      three.on(make("all_gather leading", KERNELS(all_gather),
                    {uniform({2, 5})}, {result({6, 5})}, transfer({3, 0}))),
      context);
  runSplit(four.on(make("all_gather after a dimension of 1",
                        KERNELS(all_gather), {uniform({1, 2, 5})},
                        {result({1, 8, 5})}, transfer({4, 1}))),
           context);
}

/// A callback's failure comes back as its status, with the CPU kernel's
/// message (after the kernel freed its packed buffer); a frame without a
/// comm fails before any work.
void collectiveFailureCases(loom_cuda_context *context, cudaStream_t stream) {
  if (filter && std::string("errors").find(filter) == std::string::npos)
    return;
  LoopbackGroup failing(4, 0, stream);
  failing.state.status = 7;
  DeviceBuffers device;
  for (int i = 0; i < 2; ++i) {
    void *pointer = nullptr;
    cudaMalloc(&pointer, 4096);
    cudaMemset(pointer, 0, 4096);
    device.pointers.push_back(pointer);
  }
  std::vector<int64_t> meta =
      metaFor({uniform({3, 2, 5})}, {result({3, 8, 5})}, transfer({4, 1}));
  int32_t status = loom_cuda_all_gather(
      &failing.deviceFrame, device.pointers.data(), meta.data(), context);
  expectFailure("errors: all_gather callback status", status == 7,
                loom_cuda_last_error(),
                "all_gather on group 0: the communication callback returned 7");
  expectFailure("errors: the stream is clean after a failed collective",
                loom_cuda_context_synchronize(context) == 0, "", "");

  meta =
      metaFor({uniform({4, 6})}, {result({4, 6})}, transfer({LOOM_REDUCE_SUM}));
  loom_call_frame noComm = {};
  expectFailure("errors: all_reduce without a comm",
                loom_cuda_all_reduce(&noComm, device.pointers.data(),
                                     meta.data(), context) != 0,
                loom_cuda_last_error(),
                "all_reduce: the call frame has no communication callback");
}

/// A slot on a collective whose blocks would need packing is refused
/// before anything starts; collective_wait fails without a transfer in
/// flight under its slot or without a comm.
void splitFailureCases(loom_cuda_context *context, cudaStream_t stream) {
  if (filter && std::string("errors").find(filter) == std::string::npos)
    return;
  LoopbackGroup four(4, 0, stream);
  DeviceBuffers device;
  for (int i = 0; i < 2; ++i) {
    void *pointer = nullptr;
    cudaMalloc(&pointer, 4096);
    cudaMemset(pointer, 0, 4096);
    device.pointers.push_back(pointer);
  }
  const char *contiguous = "a split collective (slot 0) needs an operand of "
                           "contiguous member blocks of the result's element "
                           "type";
  std::vector<int64_t> meta =
      metaFor({uniform({3, 8, 5})}, {result({3, 2, 5})},
              transfer({LOOM_REDUCE_SUM, 4, 1}, /*slot=*/0));
  int32_t status = loom_cuda_reduce_scatter(
      &four.deviceFrame, device.pointers.data(), meta.data(), context);
  expectFailure("errors: split reduce_scatter with outer 3",
                status != 0 && four.state.started.empty(),
                loom_cuda_last_error(), contiguous);
  // metaFor writes the bf16 run's types: an f32 operand, a bf16 result.
  meta = metaFor({f32(uniform({8, 5}))}, {result({2, 5})},
                 transfer({LOOM_REDUCE_SUM, 4, 0}, /*slot=*/0));
  status = loom_cuda_reduce_scatter(&four.deviceFrame, device.pointers.data(),
                                    meta.data(), context);
  expectFailure("errors: split reduce_scatter f32 -> bf16",
                status != 0 && four.state.started.empty(),
                loom_cuda_last_error(), contiguous);
  meta = metaFor({uniform({3, 2, 5})}, {result({3, 8, 5})},
                 transfer({4, 1}, /*slot=*/0));
  status = loom_cuda_all_gather(&four.deviceFrame, device.pointers.data(),
                                meta.data(), context);
  expectFailure("errors: split all_gather with outer 3",
                status != 0 && four.state.started.empty(),
                loom_cuda_last_error(), contiguous);

  meta = metaFor({result({4, 6})}, {}, {0});
  status = loom_cuda_collective_wait(&four.deviceFrame, device.pointers.data(),
                                     meta.data(), context);
  expectFailure("errors: collective_wait with nothing in flight",
                status == kNothingInFlight, loom_cuda_last_error(),
                "collective_wait for slot 0: the communication callback "
                "returned 98");
  loom_call_frame noComm = {};
  status = loom_cuda_collective_wait(&noComm, device.pointers.data(),
                                     meta.data(), context);
  expectFailure("errors: collective_wait without a comm", status != 0,
                loom_cuda_last_error(),
                "collective_wait: the call frame has no communication "
                "callback for it");
  expectFailure("errors: the stream is clean after failed split collectives",
                loom_cuda_context_synchronize(context) == 0, "", "");
}

} // namespace

/// LOOM_CUDA_PROFILE: a context created with it set writes, when it is
/// destroyed, the calls of the steps after the first (each ended by a
/// synchronize) per label, here two matmuls and an add per step.
void profileCases(cudaStream_t stream) {
  if (filter && std::string("profile").find(filter) == std::string::npos)
    return;
  char path[] = "/tmp/loom-cuda-profile-XXXXXX";
  int fd = mkstemp(path);
  if (fd < 0) {
    std::printf("FAIL profile: mkstemp\n");
    ++failures;
    return;
  }
  close(fd);
  setenv("LOOM_CUDA_PROFILE", path, 1);
  loom_cuda_context *context = nullptr;
  int32_t status = loom_cuda_context_create(stream, int64_t{1} << 20, &context);
  unsetenv("LOOM_CUDA_PROFILE");
  DeviceBuffers device;
  for (int i = 0; i < 3; ++i) {
    void *pointer = nullptr;
    cudaMalloc(&pointer, 1 << 16);
    cudaMemset(pointer, 0, 1 << 16);
    device.pointers.push_back(pointer);
  }
  void *product[3] = {device.pointers[0], device.pointers[1],
                      device.pointers[2]};
  std::vector<int64_t> matmul =
      metaFor({uniform({64, 96}), uniform({96, 80})}, {result({64, 80})},
              {0, 0, LOOM_EPILOGUE_NONE});
  std::vector<int64_t> add =
      metaFor({uniform({64, 80}), uniform({64, 80})}, {result({64, 80})}, {});
  // Attention's label names the path that ran.
  void *heads[5] = {device.pointers[0], device.pointers[0], device.pointers[0],
                    device.pointers[1], device.pointers[2]};
  std::vector<int64_t> attention =
      metaFor({uniform({1, 64, 2, 16}), uniform({1, 64, 2, 16}),
               uniform({1, 64, 2, 16})},
              {result({1, 64, 2, 16}), result({1, 2, 64}, false)},
              {1, real(0.25), 0, real(0.0), 0, 0, 0});
  for (int step = 0; step < 3 && status == 0; ++step) {
    status |= loom_cuda_matmul(nullptr, product, matmul.data(), context);
    status |= loom_cuda_matmul(nullptr, product, matmul.data(), context);
    status |= loom_cuda_add(nullptr, product, add.data(), context);
    status |= loom_cuda_attention(nullptr, heads, attention.data(), context);
    status |= loom_cuda_context_synchronize(context);
  }
  loom_cuda_context_destroy(context);
  std::string table;
  if (FILE *in = std::fopen(path, "r")) {
    char chunk[512];
    while (size_t n = std::fread(chunk, 1, sizeof chunk, in))
      table.append(chunk, n);
    std::fclose(in);
  }
  std::remove(path);
  auto row = [&](const std::string &label) {
    size_t at = table.find("\n" + label + " ");
    return at == std::string::npos
               ? std::string()
               : table.substr(at + 1, table.find('\n', at + 1) - at - 1);
  };
  const std::string matmulLabel = "matmul 1 x [64 x 80 x 96] none";
  std::string matmulRow = row(matmulLabel);
  std::string addRow = row("add");
  // The calls per step follow the label.
  double matmulCalls = 0, addCalls = 0;
  std::sscanf(matmulRow.c_str() +
                  std::min(matmulRow.size(), matmulLabel.size()),
              "%lf", &matmulCalls);
  std::sscanf(addRow.c_str() + std::min(addRow.size(), size_t{3}), "%lf",
              &addCalls);
  std::string attentionLabel =
      cudnnTakesAttention() ? "attention cudnn" : "attention tiles";
  bool ok = status == 0 && table.find("2 steps timed") != std::string::npos &&
            matmulCalls == 2.0 && addCalls == 1.0 &&
            !row(attentionLabel).empty();
  std::printf("%s profile\n", ok ? "PASS" : "FAIL");
  if (!ok)
    std::printf("  status %d (%s), table:\n%s\n", status,
                loom_cuda_last_error(), table.c_str());
  (ok ? passes : failures) += 1;
}

/// Every row of loom/loom_kernels.def is an entry point of the library
/// (loom_cuda_kernels.h declares them from the table; a row without a
/// kernel would only fail when a program calls it).
void kernelTableCases() {
  if (filter && std::string("kernel table").find(filter) == std::string::npos)
    return;
  std::string missing;
#define LOOM_KERNEL(name, attributes)                                          \
  if (!dlsym(RTLD_DEFAULT, "loom_cuda_" #name))                                \
    missing += " loom_cuda_" #name;
#define LOOM_DEVICE_KERNEL(name, attributes) LOOM_KERNEL(name, attributes)
#include "loom/loom_kernels.def"
  bool ok = missing.empty();
  std::printf("%s kernel table\n", ok ? "PASS" : "FAIL");
  if (!ok)
    std::printf("  not exported:%s\n", missing.c_str());
  (ok ? passes : failures) += 1;
}

int main(int argc, char **argv) {
  int count = 0;
  if (cudaGetDeviceCount(&count) != cudaSuccess || count == 0) {
    std::printf("skipped: no CUDA device\n");
    return 77;
  }
  if (argc > 1)
    filter = argv[1];
  cudaStream_t stream = nullptr;
  if (cudaStreamCreate(&stream) != cudaSuccess) {
    std::printf("cudaStreamCreate failed\n");
    return 1;
  }
  loom_cuda_context *context = nullptr;
  if (loom_cuda_context_create(stream, int64_t{64} << 20, &context) != 0) {
    std::printf("loom_cuda_context_create: %s\n", loom_cuda_last_error());
    return 1;
  }
  kernelTableCases();
  elementwiseCases(context);
  fusedCases(context, "");
  setenv("LOOM_CUDA_FUSED", "general", 1);
  fusedCases(context, " (general)");
  unsetenv("LOOM_CUDA_FUSED");
  layoutCases(context);
  reductionCases(context);
  matmulCases(context);
  matmulEpilogueCases(context);
  matmulStagedCases(context, stream);
  normCases(context);
  dropoutCases(context);
  for (const char *mode : {"cudnn", "tiles", "simt"})
    attentionCases(context, mode);
  attentionModelCases(stream);
  lookupAndLossCases(context);
  optimizerCases(context);
  adamwMultiIdentityCases(context);
  uploadCases(context);
  profileCases(stream);
  collectiveCases(context, stream);
  splitCases(context, stream);
  failureCases(context);
  collectiveFailureCases(context, stream);
  splitFailureCases(context, stream);
  loom_cuda_context_destroy(context);
  cudaStreamDestroy(stream);
  std::printf("%d passed, %d failed\n", passes, failures);
  return failures == 0 ? 0 : 1;
}
