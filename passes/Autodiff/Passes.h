//===- Passes.h - Autodiff passes -------------------------------*- C++ -*-===//

#ifndef LOOM_PASSES_AUTODIFF_PASSES_H
#define LOOM_PASSES_AUTODIFF_PASSES_H

#include "mlir/Pass/Pass.h"

namespace loom {

#define GEN_PASS_DECL
#include "passes/Autodiff/Passes.h.inc"

#define GEN_PASS_REGISTRATION
#include "passes/Autodiff/Passes.h.inc"

} // namespace loom

#endif // LOOM_PASSES_AUTODIFF_PASSES_H
