//===- Matcher.h - Matching fused ops in ONNX graphs ------------*- C++ -*-===//
//
// The helpers the fusion patterns share (Patterns.cpp, AttentionPatterns.cpp):
// producers seen through float casts, products as bags of factors, and the
// check that a pattern's inner values are read by nothing else.
//
//===----------------------------------------------------------------------===//

#ifndef LOOM_LIB_IMPORT_ONNX_MATCHER_H
#define LOOM_LIB_IMPORT_ONNX_MATCHER_H

#include "GraphImporter.h"

namespace loom::onnx_import {

/// Whether `value` is `expected` within float32 rounding.
bool near(double value, double expected, double rtol = 1e-6);

/// A product as a bag of factors.
struct Product {
  double coefficient = 1;
  llvm::SmallVector<std::string, 4> factors;
  llvm::SmallVector<const OnnxNode *, 4> nodes;
};

class Matcher {
public:
  explicit Matcher(GraphImporter &im) : im(im) {}

  /// Skips float casts and identities, recording them in `nodes`.
  llvm::StringRef skip(llvm::StringRef value,
                       llvm::SmallVectorImpl<const OnnxNode *> *nodes);

  /// The run-time producer of `value` (after no-ops) if it is an `op`,
  /// recorded in `nodes`.
  const OnnxNode *def(llvm::StringRef value, llvm::StringRef op,
                      llvm::SmallVectorImpl<const OnnxNode *> &nodes);

  /// Whether two values are one, casts aside.
  bool same(llvm::StringRef a, llvm::StringRef b) {
    return skip(a, nullptr) == skip(b, nullptr);
  }

  /// The factors of `node`'s product, following nested Muls read only by
  /// it; scalar constants multiply into the coefficient.
  Product product(const OnnxNode &node);

  /// Whether the values computed inside the pattern (every node's outputs
  /// but the root's) are read only by the pattern's nodes.
  bool closed(llvm::ArrayRef<const OnnxNode *> nodes, const OnnxNode &root);

  GraphImporter &im;

private:
  void collect(const OnnxNode &node, Product &p, int depth);
};

bool fuseRope(Matcher &m, const OnnxNode &root);
bool fuseAttention(Matcher &m, const OnnxNode &root);
bool fuseCausalSoftmax(Matcher &m, const OnnxNode &root);

} // namespace loom::onnx_import

#endif // LOOM_LIB_IMPORT_ONNX_MATCHER_H
