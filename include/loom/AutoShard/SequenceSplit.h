//===- SequenceSplit.h - Where the planner may split the sequence -*- C++ -*-//
//
// Splitting a transformer's sequence dimension is a choice with a name in
// the literature: Megatron-LM's sequence parallelism (Korthikanti et al.,
// "Reducing Activation Recomputation in Large Transformer Models", 2022)
// splits it only in the ops between the tensor-parallel GEMMs (layer norms,
// dropout, residual adds), so that each all-reduce becomes a
// reduce-scatter before them and an all-gather after; DeepSpeed-Ulysses
// and context parallelism split it through attention as well. The planner
// may pick any of them (`any`); `megatron` allows the first only, `none`
// none of them: Megatron-LM's plain tensor parallelism.
//
// Which factor of an op's sharding rule is the sequence follows from the
// dataflow: sequence dimensions are seeded at attention (dimension 1 of
// query, key, value and output) and at the token arguments (`loom.role =
// "data"`, dimension 1), and carried through every op's rule: a factor
// that maps a sequence dimension of one tensor is the sequence in all the
// tensors it maps. A factor that also carries a batch of more than one
// sequence (a reshape that merges batch and sequence) is not counted as
// sequence: splitting it is data parallelism as long as the batch divides.
//
// Both Megatron forms keep the residual stream's width (the normalized
// dimension of layer norms, carried the same way) whole outside the GEMMs;
// otherwise the solver would find a third form, reduce-scatter over the
// hidden dimension, residual add on the shards, all-gather before the
// norm, which the cost model prices like Megatron's sequence parallelism.
// `any` allows it; weights and optimizer state are never restricted.
//
//===----------------------------------------------------------------------===//

#ifndef LOOM_AUTOSHARD_SEQUENCESPLIT_H
#define LOOM_AUTOSHARD_SEQUENCESPLIT_H

#include "loom/AutoShard/Problem.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "llvm/ADT/DenseMap.h"
#include "llvm/Support/Error.h"

namespace loom::autoshard {

enum class SequenceSplit {
  /// Wherever the solver finds it cheaper.
  Any,
  /// Only in ops that do no GEMM work (everything but matmul and
  /// attention), as Megatron-LM's sequence parallelism does; the residual
  /// width only inside GEMMs.
  Megatron,
  /// The sequence nowhere, the residual width only inside GEMMs.
  None,
};

/// "any", "megatron" or "none"; an error lists them.
llvm::Expected<SequenceSplit> parseSequenceSplit(llvm::StringRef text);

/// Bits of findResidualFactors' entries: the sequence alone, the residual
/// width, the sequence alone or merged with the batch (tokens).
inline constexpr uint8_t kSequenceFactor = 1, kModelFactor = 2,
                         kTokenFactor = 4;

/// For every op of `fn` (one block) with a sharding rule, per factor of
/// its rule: kSequenceFactor if it holds the sequence (and no batch of more
/// than one sequence), kTokenFactor if it holds the sequence with or
/// without the batch, kModelFactor if it holds the residual stream's width
/// in an activation.
llvm::DenseMap<mlir::Operation *, llvm::SmallVector<uint8_t>>
findResidualFactors(mlir::func::FuncOp fn);

/// Forbids (infinite cost) the strategies of `problem`'s op nodes that
/// split the sequence or the residual width where `mode` does not allow
/// it. Returns how many strategies were forbidden.
int64_t restrictSequenceSplits(ShardingProblem &problem, SequenceSplit mode,
                               mlir::func::FuncOp fn);

/// Makes mesh axis `axis` a context-parallel axis (Megatron-Core's and
/// torchtitan's context parallelism): forbids the strategies of
/// `problem`'s op nodes that split anything but tokens over it, and the
/// attention strategies that leave their queries' sequence whole on it, so
/// every attention runs on its device's rows of each sequence against the
/// keys and values gathered around the axis. Returns how many strategies
/// were forbidden.
int64_t restrictContextAxis(ShardingProblem &problem, int64_t axis,
                            mlir::func::FuncOp fn);

} // namespace loom::autoshard

#endif // LOOM_AUTOSHARD_SEQUENCESPLIT_H
