//===- Passes.h - Lowering passes -------------------------------*- C++ -*-===//

#ifndef LOOM_PASSES_LOWERING_PASSES_H
#define LOOM_PASSES_LOWERING_PASSES_H

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/LLVMIR/LLVMDialect.h"
#include "mlir/Pass/Pass.h"

namespace loom {

#define GEN_PASS_DECL
#include "passes/Lowering/Passes.h.inc"

#define GEN_PASS_REGISTRATION
#include "passes/Lowering/Passes.h.inc"

} // namespace loom

#endif // LOOM_PASSES_LOWERING_PASSES_H
