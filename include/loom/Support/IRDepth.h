//===- IRDepth.h - Bounding the nesting of MLIR text before parsing -*- C++
//-*-===//
//
// MLIR's parser recurses once per nested bracket of a type or attribute
// (`(((...) -> ()) -> ())`, `[[[...]]]`), so a file of a few thousand
// brackets overflows the stack. The tools that read IR (loom-opt,
// loom-compile, loom-run) scan it first with checkIRDepth, which needs no
// recursion. Loom's own IR nests a few levels.
//
//===----------------------------------------------------------------------===//

#ifndef LOOM_SUPPORT_IRDEPTH_H
#define LOOM_SUPPORT_IRDEPTH_H

#include "llvm/ADT/StringRef.h"
#include "llvm/Support/Error.h"

namespace loom {

/// Deeper than any module Loom writes or reads, far shallower than a stack.
constexpr unsigned kMaxIRDepth = 256;

/// An error "NAME:LINE:COL: the IR nests deeper than N brackets ..." at the
/// first '(', '[', '{' or '<' that opens level `maxDepth + 1` (brackets in
/// string literals and comments do not count, nor the '>' of "->"), or
/// success. Malformed text is left to the parser.
llvm::Error checkIRDepth(llvm::StringRef text, llvm::StringRef name,
                         unsigned maxDepth = kMaxIRDepth);

} // namespace loom

#endif // LOOM_SUPPORT_IRDEPTH_H
