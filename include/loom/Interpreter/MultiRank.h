//===- MultiRank.h - The reference interpreter on N ranks -------*- C++ -*-===//
//
// The second link of Loom's chain of numerical trust (docs/design.md, principle
// 4): runs an SPMD function (the per-device program a partitioner writes)
// on every device of a `shard.grid` at once, one std::thread per rank, with
// in-process implementations of the upstream `shard` collectives. A
// partitioned program run here must give what the unpartitioned one gives
// in interp::run.
//
// A rank is a device of the grid; its multi-index is its position in the
// grid and its rank the row-major linear index of that position. A
// collective `on @grid grid_axes = [a, b]` acts within the group of devices
// that share every coordinate outside {a, b}; the members of a group are
// ordered by the row-major index of their coordinates on (a, b), in the
// order grid_axes lists them, which is the order in which all_gather
// concatenates and reduce_scatter, all_to_all and all_slice split.
//
// Supported shard ops: all_reduce, reduce (the result everywhere),
// reduce_scatter (reductions sum, max, min, product, average and, on
// integers, bitwise_and/or/xor; the input is converted to the result's
// element type first), all_gather, gather (the result everywhere),
// all_to_all, all_slice, broadcast, scatter, send, recv (with a source),
// process_multi_index, process_linear_index and grid_shape, with static or
// dynamic (index operand) roots, sources and destinations. Every other op
// runs exactly as in interp::run, with the same kernels and run loop.
//
// Reductions combine the members' values in member order in double (int64
// for integers), whatever the order in which the threads arrive, so a run
// is bit-reproducible. The ranks execute the same straight-line code, so
// every collective is a rendezvous of all ranks (a generation-counted
// barrier over a mutex and a condition variable); send is buffered and
// recv waits for the matching send. An error on one rank (an unsupported
// op, collective inputs whose shapes differ between members, ranks that
// wait for each other forever, a rank that returns while others wait)
// aborts every rank: runRanks returns the first error, which names the
// rank, the op and its location.
//
// Ops whose values depend on an element's global index (loom.dropout,
// dropout_grad, and attention / attention_grad with dropout) read the
// running rank's position in the grid: a partitioned op carries
// `loom.mask_split_axes` (see DropoutMask.h), and its kernel draws each
// element's mask at globalIndicesOfShard's index.
//
//===----------------------------------------------------------------------===//

#ifndef LOOM_INTERPRETER_MULTIRANK_H
#define LOOM_INTERPRETER_MULTIRANK_H

#include "loom/Interpreter/Interpreter.h"

#include "mlir/Dialect/Shard/IR/ShardOps.h"

#include <vector>

namespace loom::interp {

/// How a tensor is laid out over a grid, as a `shard.sharding`'s
/// `split_axes` say it: entry d lists the grid axes that split tensor
/// dimension d, major first (dimensions past the end are not split). A grid
/// axis that splits no dimension replicates the tensor along it.
using SplitAxes = llvm::ArrayRef<llvm::SmallVector<int16_t>>;

/// The split axes a `loom.split_axes` attribute (an array of arrays of
/// grid axes, as `--loom-partition` writes it) lists; empty for a null
/// attribute (replicated).
std::vector<llvm::SmallVector<int16_t>>
splitAxesFromAttr(mlir::ArrayAttr splitAxes);

/// The multi-index of `rank` in a grid of `gridShape` (row-major).
llvm::SmallVector<int64_t> gridMultiIndex(llvm::ArrayRef<int64_t> gridShape,
                                          int64_t rank);

/// The shard of `global` that `rank` holds when `global` is split as
/// `splitAxes` says over a grid of `gridShape`. Every split dimension must
/// divide evenly by the number of its shards.
llvm::Expected<Tensor> shardOfRank(const Tensor &global,
                                   llvm::ArrayRef<int64_t> gridShape,
                                   SplitAxes splitAxes, int64_t rank);

/// The row-major index in the global tensor of each element (in row-major
/// order) of the shard of local shape `localShape` that `rank` holds when
/// the global tensor is split as `splitAxes` says over a grid of
/// `gridShape`: along a dimension split over axes [a0, a1, ...], the
/// rank's shard index is the row-major index of its coordinates on
/// (a0, a1, ...), and its global position is shard index * local extent +
/// local position. The indices of shardOfRank's elements of an iota tensor.
llvm::Expected<std::vector<int64_t>>
globalIndicesOfShard(llvm::ArrayRef<int64_t> localShape,
                     llvm::ArrayRef<int64_t> gridShape, SplitAxes splitAxes,
                     int64_t rank);

/// The global tensor whose shards (shardOfRank) are `shardsPerRank`, one per
/// rank of a grid of `gridShape`. Copies that the sharding replicates must
/// agree exactly; an error names the first rank and element that differ.
llvm::Expected<Tensor> assembleFromShards(llvm::ArrayRef<Tensor> shardsPerRank,
                                          llvm::ArrayRef<int64_t> gridShape,
                                          SplitAxes splitAxes);

/// Runs the SPMD function `fn` on every device of `grid` (which must have a
/// static shape), rank r on `argsPerRank[r]` (checked like interp::run's
/// arguments), and returns each rank's results, indexed by rank. Every
/// shard op of `fn` must run on `grid`. The module holding `fn` is verified
/// once before the ranks start.
llvm::Expected<std::vector<std::vector<Tensor>>>
runRanks(mlir::func::FuncOp fn, mlir::shard::GridOp grid,
         llvm::ArrayRef<std::vector<Tensor>> argsPerRank, Precision precision);

} // namespace loom::interp

#endif // LOOM_INTERPRETER_MULTIRANK_H
