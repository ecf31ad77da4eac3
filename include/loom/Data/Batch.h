//===- Batch.h - Training batches cut from a token sequence -----*- C++ -*-===//
//
// Batches are cut from one token sequence of N ids by a fixed rule, which
// the PyTorch reference scripts implement too, so that Loom and the
// reference train on exactly the same tokens. Row b (0 <= b < microBatch) of
// step s (0-based) starts at
//
//   start = ((s * microBatch + b) * seqLen) mod (N - seqLen)
//
// and holds tokens[b][t] = ids[start + t], labels[b][t] = ids[start + t + 1]
// for 0 <= t < seqLen. Consecutive rows and steps read consecutive windows
// and wrap around to the beginning; the modulus N - seqLen keeps the last
// label, ids[start + seqLen], inside the sequence.
//
//===----------------------------------------------------------------------===//

#ifndef LOOM_DATA_BATCH_H
#define LOOM_DATA_BATCH_H

#include "llvm/ADT/ArrayRef.h"
#include "llvm/Support/Error.h"

#include <cstdint>
#include <vector>

namespace loom {

/// One micro-batch: row-major [microBatch, seqLen] input tokens and the
/// next-token labels.
struct Batch {
  std::vector<int32_t> tokens, labels;
};

/// The micro-batch of step `step` (see above). Errors: a negative step, a
/// non-positive microBatch or seqLen, fewer than seqLen + 1 ids, or an id
/// the batch uses that does not fit in int32.
llvm::Expected<Batch> makeBatch(llvm::ArrayRef<uint32_t> ids, int64_t step,
                                int64_t microBatch, int64_t seqLen);

} // namespace loom

#endif // LOOM_DATA_BATCH_H
