//===- CpuKernelTestSupport.h - Running ops through the CPU kernels -*- C++
//-*-===//
//
// The conformance tests of the CPU kernel library (runtime/cpu/kernels): a
// function of a few ops runs once in the reference interpreter (float64)
// and once op by op through the kernels, called exactly as compiled code
// calls them (encodeKernelCall's meta, buffers at the local shapes), and the
// results must agree within a stated tolerance.
//
//===----------------------------------------------------------------------===//

#ifndef LOOM_TEST_UNIT_CPUKERNELTESTSUPPORT_H
#define LOOM_TEST_UNIT_CPUKERNELTESTSUPPORT_H

#include "loom/Interpreter/Tensor.h"
#include "loom/loom_program.h"

#include "mlir/IR/BuiltinOps.h"
#include "mlir/IR/MLIRContext.h"
#include "llvm/Support/Error.h"

#include <vector>

namespace loom::testing {

/// A context with the loom, func and shard dialects loaded.
std::unique_ptr<mlir::MLIRContext> makeKernelTestContext();

/// Parses `source`, a module holding `func.func @f`; fails the test and
/// returns null when it does not parse.
mlir::OwningOpRef<mlir::ModuleOp> parseKernelTestModule(mlir::MLIRContext &ctx,
                                                        llvm::StringRef source);

/// Runs @f of `module` op by op through the CPU kernels on `args` (f32 /
/// i32 / i64 buffers of the argument types), with `comm` (may be null when
/// @f has no collectives) and `microBatch` in the call frame; returns @f's
/// results. A kernel's non-zero status is an error with its message. With
/// `split`, the collectives the lowering splits start under slots 0, 1, ...
/// and collective_wait ends each just before the first op that reads its
/// result.
llvm::Expected<std::vector<interp::Tensor>>
runThroughKernels(mlir::ModuleOp module, llvm::ArrayRef<interp::Tensor> args,
                  const loom_comm *comm = nullptr, int64_t microBatch = 0,
                  bool split = false);

/// Runs @f of `module` in the reference interpreter in float64.
llvm::Expected<std::vector<interp::Tensor>>
runReference(mlir::ModuleOp module, llvm::ArrayRef<interp::Tensor> args);

/// Expects every element of `got` within `atol + rtol * |want|` of `want`
/// (integers exactly), naming the result and element that is not.
void expectAllClose(llvm::ArrayRef<interp::Tensor> want,
                    llvm::ArrayRef<interp::Tensor> got, double rtol,
                    double atol);

/// Uniform random floats in [lo, hi) of `shape` (f32 element type), from a
/// fixed seed.
interp::Tensor randomFloats(llvm::ArrayRef<int64_t> shape, unsigned seed,
                            double lo = -1.0, double hi = 1.0);

} // namespace loom::testing

#endif // LOOM_TEST_UNIT_CPUKERNELTESTSUPPORT_H
