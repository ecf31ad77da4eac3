//===- Batch.cpp - Training batches cut from a token sequence -------------===//
//
// The rule is in Batch.h. The start offset is computed modulo N - seqLen at
// every step, so it equals the exact (arbitrary-precision) value the Python
// reference computes for any step, without overflow.
//
//===----------------------------------------------------------------------===//

#include "loom/Data/Batch.h"

using namespace llvm;

namespace loom {
namespace {

Error batchError(const Twine &message) {
  return createStringError(inconvertibleErrorCode(), message);
}

/// (a * b) mod m for non-negative a, b and positive m.
int64_t mulMod(int64_t a, int64_t b, int64_t m) {
  return static_cast<int64_t>((static_cast<unsigned __int128>(a % m) *
                               static_cast<unsigned __int128>(b % m)) %
                              static_cast<unsigned __int128>(m));
}

} // namespace

Expected<Batch> makeBatch(ArrayRef<uint32_t> ids, int64_t step,
                          int64_t microBatch, int64_t seqLen) {
  if (step < 0)
    return batchError("step " + Twine(step) + " is negative");
  if (microBatch <= 0)
    return batchError("micro-batch size " + Twine(microBatch) +
                      " is not positive");
  if (seqLen <= 0)
    return batchError("sequence length " + Twine(seqLen) + " is not positive");
  int64_t count = ids.size();
  if (count < seqLen + 1)
    return batchError("a sequence length of " + Twine(seqLen) + " needs " +
                      Twine(seqLen + 1) + " tokens (inputs and labels), " +
                      "but there are " + Twine(count));

  int64_t modulus = count - seqLen;
  Batch batch;
  batch.tokens.reserve(microBatch * seqLen);
  batch.labels.reserve(microBatch * seqLen);
  // (step * microBatch) mod modulus, then + b one row at a time.
  int64_t row = mulMod(step, microBatch, modulus);
  for (int64_t b = 0; b < microBatch; ++b, row = (row + 1) % modulus) {
    int64_t start = mulMod(row, seqLen, modulus);
    for (int64_t t = 0; t <= seqLen; ++t)
      if (ids[start + t] > INT32_MAX)
        return batchError("token id " + Twine(ids[start + t]) +
                          " at position " + Twine(start + t) +
                          " does not fit in int32");
    batch.tokens.insert(batch.tokens.end(), ids.begin() + start,
                        ids.begin() + start + seqLen);
    batch.labels.insert(batch.labels.end(), ids.begin() + start + 1,
                        ids.begin() + start + seqLen + 1);
  }
  return batch;
}

} // namespace loom
