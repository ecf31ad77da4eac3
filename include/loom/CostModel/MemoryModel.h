//===- MemoryModel.h - What a device holds during a training step -*- C++ -*-//
//
// The memory half of the cost model:
//  - model states (parameters, gradients, optimizer states) per parameter
//    under the precision policy, split over the data-parallel axis by ZeRO;
//  - activations kept for the backward pass, found by liveness in
//    @forward_backward: a forward value the backward reads is held from its
//    definition across the forward/backward boundary;
//  - the working set (temporaries) at the busiest point of the program.
//
//===----------------------------------------------------------------------===//

#ifndef LOOM_COSTMODEL_MEMORYMODEL_H
#define LOOM_COSTMODEL_MEMORYMODEL_H

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "llvm/ADT/DenseSet.h"
#include "llvm/ADT/SmallVector.h"

namespace loom::cost {

/// ZeRO stages (Rajbhandari et al., "ZeRO: Memory Optimizations Toward
/// Training Trillion Parameter Models", SC'20, §5): 1 splits optimizer
/// states over the data-parallel devices, 2 also gradients, 3 also
/// parameters.
enum class ZeroStage {
  None = 0,
  OptimizerStates = 1,
  Gradients = 2,
  Parameters = 3
};

/// Which activations the backward pass recomputes instead of keeping
/// (Korthikanti et al., "Reducing Activation Recomputation in Large
/// Transformer Models", MLSys'23, §4–5).
enum class Recompute {
  None,
  /// The attention core (ops tagged `loom.attention_core` by
  /// --loom-decompose-attention): scores, softmax, dropout, P·V.
  Selective,
  /// Everything but each layer's input.
  Full,
};

/// "none", "selective" or "full" (loom-plan's spelling).
llvm::StringRef stringifyRecompute(Recompute recompute);

/// Bytes per parameter of each model state.
struct StateBytesPerParam {
  double params = 0, grads = 0, optimizer = 0;
};

enum class OptimizerKind { AdamW, SGD };

/// Mixed precision (bf16 compute copies of f32 master weights) or f32
/// throughout. Mixed-precision Adam is 2 + 4 + 12 bytes: bf16 parameters,
/// f32 gradients (what the compute copies' casts give back, and what
/// Megatron-LM accumulates), fp32 master parameters, momentum and variance
/// (ZeRO §3.1 counts fp16 gradients, 2 + 2 + 12).
StateBytesPerParam stateBytesPerParam(bool mixedPrecision,
                                      OptimizerKind optimizer);

struct ModelStateMemory {
  double params = 0, grads = 0, optimizerStates = 0;
  double total() const { return params + grads + optimizerStates; }
};

/// Model-state bytes per device for `numParams` parameters on the device
/// (after tensor/pipeline splitting), ZeRO over `dataParallel` devices.
ModelStateMemory modelStateMemory(double numParams,
                                  const StateBytesPerParam &perParam,
                                  ZeroStage zero, int64_t dataParallel);

/// The forward ops of @forward_backward: those its loss (result 0) depends
/// on. Everything else is the backward.
llvm::DenseSet<mlir::Operation *> forwardOps(mlir::func::FuncOp fn);

/// The values of `fn` that depend on the batch: on an integer tensor
/// argument of rank at least one (tokens and labels; the step counter is
/// rank 0).
llvm::DenseSet<mlir::Value> batchDependentValues(mlir::func::FuncOp fn);

/// One forward value the backward pass reads.
struct SavedValue {
  mlir::Value value;
  double bytes = 0;
  /// A dropout mask a Megatron-style kernel stores (1 byte per element)
  /// rather than a tensor of the program: see ActivationOptions.
  bool isDropoutMask = false;
  /// Its producer is tagged `loom.attention_core` (selective recompute).
  bool attentionCore = false;
};

struct ActivationOptions {
  /// Loom's dropout regenerates its mask from a counter-based RNG and keeps
  /// nothing; Megatron-LM's kernels store a 1-byte mask per element. True
  /// counts those masks, to compare with published numbers.
  bool storeDropoutMasks = false;
};

/// The activations @forward_backward (the output of --loom-autodiff) keeps
/// for its backward pass: values computed by the forward (the ops the loss
/// depends on) from the data arguments that an op outside the forward reads.
/// A reshape is a view of its operand and shares its storage.
llvm::SmallVector<SavedValue>
findSavedActivations(mlir::func::FuncOp forwardBackward,
                     const ActivationOptions &options);

/// The bytes of `saved` a policy keeps: Selective drops the attention core;
/// Full is not expressible per value (callers keep layer inputs instead).
double keptBytes(llvm::ArrayRef<SavedValue> saved, Recompute recompute);

/// The largest total of values live at one point of `fn` in program order,
/// excluding arguments, the function's results and the `exclude` values
/// (e.g. saved activations, counted separately): the working set.
double peakTemporaryBytes(mlir::func::FuncOp fn,
                          llvm::ArrayRef<SavedValue> exclude);

} // namespace loom::cost

#endif // LOOM_COSTMODEL_MEMORYMODEL_H
