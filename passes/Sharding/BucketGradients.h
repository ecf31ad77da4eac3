//===- BucketGradients.h - Fuse gradient all-reduces into buckets -*- C++
//-*-===//
//
// Internal to the sharding passes (used by --loom-partition).
//
//===----------------------------------------------------------------------===//

#ifndef LOOM_PASSES_SHARDING_BUCKETGRADIENTS_H
#define LOOM_PASSES_SHARDING_BUCKETGRADIENTS_H

#include "mlir/IR/Block.h"

namespace loom {

/// Groups the gradient all-reduces of `block` (sum all-reduces whose every
/// user is an optimizer update; same axes and element type, in program
/// order) into buckets of at most `bucketBytes`, and replaces each bucket
/// of two or more by one all-reduce of their flattened concatenation,
/// placed after the last of its gradients is computed.
void bucketGradientAllReduces(mlir::Block &block, double bucketBytes);

} // namespace loom

#endif // LOOM_PASSES_SHARDING_BUCKETGRADIENTS_H
