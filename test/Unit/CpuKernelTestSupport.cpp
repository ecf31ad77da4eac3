//===- CpuKernelTestSupport.cpp - Running ops through the CPU kernels -----===//

#include "CpuKernelTestSupport.h"

#include "passes/Lowering/KernelCall.h"

#include "loom/Interpreter/Interpreter.h"
#include "loom/loom_cpu_kernels.h"

#include "dialects/Loom/LoomDialect.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/Dialect/Shard/IR/ShardDialect.h"
#include "mlir/Parser/Parser.h"
#include "llvm/ADT/DenseMap.h"
#include "llvm/ADT/MapVector.h"
#include "llvm/Support/FormatVariadic.h"

#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <dlfcn.h>
#include <random>

using namespace mlir;
using loom::interp::Tensor;

namespace loom::testing {

namespace {

using KernelFn = int32_t (*)(const loom_call_frame *, void *const *,
                             const int64_t *);

/// A 64-byte aligned buffer holding one tensor in its element type.
struct Buffer {
  std::vector<std::max_align_t> storage;
  void *data() { return storage.data(); }
};

Buffer bufferFor(RankedTensorType type) {
  int64_t bytes = type.getNumElements() *
                  std::max<int64_t>(1, type.getElementTypeBitWidth() / 8);
  Buffer buffer;
  buffer.storage.resize(bytes / sizeof(std::max_align_t) + 1);
  return buffer;
}

void store(const Tensor &tensor, RankedTensorType type, Buffer &buffer) {
  Type element = type.getElementType();
  for (int64_t i = 0, e = type.getNumElements(); i < e; ++i) {
    if (element.isF32())
      static_cast<float *>(buffer.data())[i] =
          static_cast<float>(tensor.f()[i]);
    else if (element.isF64())
      static_cast<double *>(buffer.data())[i] = tensor.f()[i];
    else if (element.isInteger(32))
      static_cast<int32_t *>(buffer.data())[i] =
          static_cast<int32_t>(tensor.i()[i]);
    else
      static_cast<int64_t *>(buffer.data())[i] = tensor.i()[i];
  }
}

Tensor load(RankedTensorType type, Buffer &buffer) {
  Type element = type.getElementType();
  int64_t n = type.getNumElements();
  if (isa<FloatType>(element)) {
    std::vector<double> values(n);
    for (int64_t i = 0; i < n; ++i)
      values[i] = element.isF64() ? static_cast<double *>(buffer.data())[i]
                                  : static_cast<float *>(buffer.data())[i];
    return Tensor::floats(element, type.getShape(), std::move(values));
  }
  std::vector<int64_t> values(n);
  for (int64_t i = 0; i < n; ++i)
    values[i] = element.isInteger(32)
                    ? static_cast<int32_t *>(buffer.data())[i]
                    : static_cast<int64_t *>(buffer.data())[i];
  return Tensor::ints(element, type.getShape(), std::move(values));
}

} // namespace

std::unique_ptr<MLIRContext> makeKernelTestContext() {
  auto ctx = std::make_unique<MLIRContext>();
  ctx->loadDialect<loom::LoomDialect, func::FuncDialect, shard::ShardDialect>();
  return ctx;
}

OwningOpRef<ModuleOp> parseKernelTestModule(MLIRContext &ctx,
                                            StringRef source) {
  auto module = parseSourceString<ModuleOp>(source, &ctx);
  EXPECT_TRUE(module) << "the test module does not parse";
  return module;
}

llvm::Expected<std::vector<Tensor>>
runThroughKernels(ModuleOp module, ArrayRef<Tensor> args, const loom_comm *comm,
                  int64_t microBatch, bool split) {
  auto fn = module.lookupSymbol<func::FuncOp>("f");
  if (!fn)
    return llvm::createStringError("no @f");
  llvm::DenseMap<Value, Buffer> buffers;
  for (auto [arg, tensor] : llvm::zip_equal(fn.getArguments(), args)) {
    auto type = cast<RankedTensorType>(arg.getType());
    Buffer buffer = bufferFor(type);
    store(tensor, type, buffer);
    buffers[arg] = std::move(buffer);
  }
  loom_call_frame frame{nullptr, nullptr, nullptr, comm, microBatch};
  lowering::GroupTable groups;
  auto call = [&](const lowering::KernelCall &call,
                  std::vector<void *> &pointers) -> llvm::Error {
    auto kernel =
        reinterpret_cast<KernelFn>(dlsym(RTLD_DEFAULT, call.symbol.c_str()));
    if (!kernel)
      return llvm::createStringError("no kernel " + call.symbol);
    if (int32_t status = kernel(&frame, pointers.data(), call.meta.data()))
      return llvm::createStringError(llvm::formatv(
          "{0} returned {1}: {2}", call.symbol, status, loom_cpu_last_error()));
    return llvm::Error::success();
  };
  // Split collectives in flight, by the value they compute: its slot. The
  // wait comes just before the first op that reads the value, as
  // --loom-lower-cpu places it (its buffers are not listed: the kernel
  // does not read them).
  llvm::MapVector<Value, int32_t> inFlight;
  int32_t nextSlot = 0;
  auto waitFor = [&](Value value) -> llvm::Error {
    auto wait = lowering::waitCall({}, inFlight.lookup(value));
    std::vector<void *> none(1, nullptr);
    inFlight.erase(value);
    return call(wait, none);
  };
  std::vector<Tensor> results;
  for (Operation &op : fn.getBody().front()) {
    for (Value operand : op.getOperands())
      if (inFlight.count(operand))
        if (llvm::Error error = waitFor(operand))
          return std::move(error);
    if (auto ret = dyn_cast<func::ReturnOp>(op)) {
      for (Value value : ret.getOperands())
        results.push_back(
            load(cast<RankedTensorType>(value.getType()), buffers[value]));
      break;
    }
    auto encoded = lowering::encodeKernelCall(&op, groups);
    if (failed(encoded))
      return llvm::createStringError("no kernel call for an op of @f");
    if (split && lowering::splittable(&op)) {
      lowering::setSlot(*encoded, nextSlot);
      inFlight[op.getResult(0)] = nextSlot++;
    }
    std::vector<void *> pointers;
    for (Value operand : op.getOperands())
      pointers.push_back(buffers[operand].data());
    for (Value result : op.getResults()) {
      buffers[result] = bufferFor(cast<RankedTensorType>(result.getType()));
      pointers.push_back(buffers[result].data());
    }
    if (llvm::Error error = call(*encoded, pointers))
      return std::move(error);
  }
  return results;
}

llvm::Expected<std::vector<Tensor>> runReference(ModuleOp module,
                                                 ArrayRef<Tensor> args) {
  auto fn = module.lookupSymbol<func::FuncOp>("f");
  if (!fn)
    return llvm::createStringError("no @f");
  return interp::run(fn, args, interp::Precision::F64);
}

void expectAllClose(ArrayRef<Tensor> want, ArrayRef<Tensor> got, double rtol,
                    double atol) {
  ASSERT_EQ(want.size(), got.size());
  for (size_t r = 0; r < want.size(); ++r) {
    ASSERT_EQ(want[r].shape(), got[r].shape()) << "result " << r;
    if (!want[r].isFloat()) {
      EXPECT_EQ(want[r].i(), got[r].i()) << "result " << r;
      continue;
    }
    int failures = 0;
    for (size_t i = 0; i < want[r].f().size() && failures < 5; ++i) {
      double w = want[r].f()[i], g = got[r].f()[i];
      if (!(std::fabs(w - g) <= atol + rtol * std::fabs(w))) {
        ADD_FAILURE() << "result " << r << " element " << i << ": kernel " << g
                      << ", reference " << w;
        ++failures;
      }
    }
  }
}

Tensor randomFloats(ArrayRef<int64_t> shape, unsigned seed, double lo,
                    double hi) {
  std::mt19937 rng(seed);
  std::uniform_real_distribution<double> dist(lo, hi);
  int64_t n = 1;
  for (int64_t d : shape)
    n *= d;
  std::vector<double> values(n);
  for (double &v : values)
    v = static_cast<float>(dist(rng));
  return Tensor::floats(nullptr, shape, std::move(values));
}

} // namespace loom::testing
