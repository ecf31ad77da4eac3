//===- ShardLayout.h - Pieces of tensors over a device grid -----*- C++ -*-===//
//
// The tensor arithmetic of the multi-rank interpreter: cutting a tensor
// into equal pieces along one dimension, concatenating pieces, and indexing
// a grid, shared by the shard-op semantics (MultiRank.cpp) and the
// shard/assemble helpers of MultiRank.h (ShardLayout.cpp).
//
//===----------------------------------------------------------------------===//

#ifndef LOOM_LIB_INTERPRETER_SHARDLAYOUT_H
#define LOOM_LIB_INTERPRETER_SHARDLAYOUT_H

#include "loom/Interpreter/Tensor.h"

namespace loom::interp {

/// Piece `k` of `pieces` equal pieces of `t` along dimension `axis`, whose
/// size `pieces` divides.
Tensor pieceAlong(const Tensor &t, int64_t axis, int64_t pieces, int64_t k);

/// `parts` (of one kind, equal in every dimension but `axis`) concatenated
/// along `axis`; the element type is the first part's.
Tensor concatAlong(llvm::ArrayRef<const Tensor *> parts, int64_t axis);

/// The row-major linear index of `index` in `shape`.
int64_t linearIndexOf(llvm::ArrayRef<int64_t> shape,
                      llvm::ArrayRef<int64_t> index);

} // namespace loom::interp

#endif // LOOM_LIB_INTERPRETER_SHARDLAYOUT_H
