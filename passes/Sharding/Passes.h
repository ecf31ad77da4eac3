//===- Passes.h - Sharding passes -------------------------------*- C++ -*-===//

#ifndef LOOM_PASSES_SHARDING_PASSES_H
#define LOOM_PASSES_SHARDING_PASSES_H

#include "mlir/Pass/Pass.h"

namespace loom {

#define GEN_PASS_DECL
#include "passes/Sharding/Passes.h.inc"

#define GEN_PASS_REGISTRATION
#include "passes/Sharding/Passes.h.inc"

} // namespace loom

#endif // LOOM_PASSES_SHARDING_PASSES_H
