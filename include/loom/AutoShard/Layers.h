//===- Layers.h - Repeated transformer layers of a function -----*- C++ -*-===//
//
// A transformer repeats one layer n times; its training step repeats the
// layer's forward ops, their gradients and the optimizer updates of its
// parameters. The planner solves one representative layer and ties the
// others to it (same strategy per op), so that the ILP does not grow with
// depth. docs/ilp.md, "Repeated layers", explains how layers are found and
// what the tie gives up.
//
//===----------------------------------------------------------------------===//

#ifndef LOOM_AUTOSHARD_LAYERS_H
#define LOOM_AUTOSHARD_LAYERS_H

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "llvm/ADT/DenseMap.h"

namespace loom::autoshard {

/// Which op and argument of a function stands for which: every member of a
/// repeated layer that is not a representative maps to the op (argument)
/// at the same place in its layer's representative.
struct LayerTies {
  llvm::DenseMap<mlir::Operation *, mlir::Operation *> ops;
  llvm::DenseMap<unsigned, unsigned> arguments;
  /// Layers found (loom.layer), and how many are solved for:
  /// a layer whose structure differs from every earlier representative
  /// (typically the first and the last one, whose neighbours are the
  /// embedding and the head) is a representative itself.
  int numLayers = 0;
  int numRepresentatives = 0;
};

/// The layer index in a parameter name (`transformer.h.<i>.attn...`,
/// `model.layers.<i>.mlp...`, `blocks.<i>....`), or -1.
int layerOfName(llvm::StringRef name);

/// Finds the repeated layers of `fn` (one block): layers are numbered by
/// the `loom.layer` of the arguments and results (in IR without any, by
/// their `loom.name` or `loom.grad_of`), every op is assigned to a layer by the
/// dataflow, and a layer is tied to an earlier one when both are the same
/// sequence of ops wired the same way. Nothing is tied when fewer than two
/// layers are found.
LayerTies findRepeatedLayers(mlir::func::FuncOp fn);

} // namespace loom::autoshard

#endif // LOOM_AUTOSHARD_LAYERS_H
