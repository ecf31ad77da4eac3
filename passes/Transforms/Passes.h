//===- Passes.h - Graph transforms ------------------------------*- C++ -*-===//

#ifndef LOOM_PASSES_TRANSFORMS_PASSES_H
#define LOOM_PASSES_TRANSFORMS_PASSES_H

#include "mlir/Pass/Pass.h"

namespace loom {

#define GEN_PASS_DECL
#include "passes/Transforms/Passes.h.inc"

#define GEN_PASS_REGISTRATION
#include "passes/Transforms/Passes.h.inc"

} // namespace loom

#endif // LOOM_PASSES_TRANSFORMS_PASSES_H
