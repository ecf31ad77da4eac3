//===- DropoutMask.h - The counter-based random mask of dropout -*- C++ -*-===//
//
// Whether `loom.dropout` keeps an element is a pure function of the op's
// attributes, the step and the element's index, so that the interpreter,
// compiled CPU code and CUDA kernels draw the same mask, a sharded run draws
// the masks of the unsharded one, and `loom.dropout_grad` recomputes the mask
// instead of storing it. The function is
//
//   (r0, r1, r2, r3) = Philox4x32-10(
//       counter = {lo(step), hi(step), lo(index), hi(index)},
//       key     = {lo(seed), lo(key)})
//   keeps(element) = (double)r0 / 2^32 >= rate
//
// where `seed` and `key` are the op's attributes, `step` the value of its
// step operand, `index` the element's row-major index in the global
// (unsharded) tensor, and lo/hi the low/high 32 bits of the 64-bit
// two's-complement value (so seeds and keys count modulo 2^32). Only r0 is
// used. A kept element is scaled by 1 / (1 - rate), a dropped one is 0.
//
// On a device of a partitioned program the op sees a shard, and carries
// `loom.mask_split_axes = [[0], [], [1]]` (one list of mesh axes per
// dimension of the masked tensor: `x` / `dy`, or attention's q-shaped
// [B, S, H, D], whose dims 0, 2, 1 split the mask's b, h, s; its key
// axis t is whole) and `loom.mask_grid = @mesh`. The element's global
// index follows from its local index, the device's coordinates in the grid
// and the split axes: along a dimension split over mesh axes [a0, a1]
// (major first), the device's shard index is the row-major index of its
// coordinates on (a0, a1), and the global position is shard index * local
// extent + local position; `index` is the row-major index of the global
// position in the global shape. This is shard.all_gather's order (and
// interp::shardOfRank's, interp::globalIndicesOfShard's). An op of a
// pipelined step carries `loom.mask_micro_batches = M`: it runs on one of M
// micro-batches cut from the batch along dimension 0, and micro-batch k
// adds k times the micro-batch's global element count to the index.
//
// Philox4x32-10 is the counter-based generator of Random123 (Salmon, Moraes,
// Dror and Shaw, "Parallel Random Numbers: As Easy as 1, 2, 3", SC'11): ten
// rounds of two 32x32->64-bit multiplications (multipliers 0xD2511F53 and
// 0xCD9E8D57) in a Feistel network, with a Weyl key schedule (0x9E3779B9,
// 0xBB67AE85). The unit tests check it against Random123's known-answer
// vectors.
//
// Plain functions on integers, header-only, so CUDA code includes it too.
//
//===----------------------------------------------------------------------===//

#ifndef LOOM_DROPOUTMASK_H
#define LOOM_DROPOUTMASK_H

#include <cstdint>

#if defined(__CUDACC__)
#define LOOM_HOST_DEVICE __host__ __device__
#else
#define LOOM_HOST_DEVICE
#endif

namespace loom {

/// Four 32-bit words: a Philox counter or output block.
struct Philox4x32 {
  uint32_t word[4];
};

/// One Philox round: two multiplications whose high halves are mixed with
/// the other two words and the round key.
LOOM_HOST_DEVICE inline Philox4x32 philoxRound(Philox4x32 x, uint32_t key0,
                                               uint32_t key1) {
  uint64_t product0 = static_cast<uint64_t>(0xD2511F53u) * x.word[0];
  uint64_t product1 = static_cast<uint64_t>(0xCD9E8D57u) * x.word[2];
  Philox4x32 y;
  y.word[0] = static_cast<uint32_t>(product1 >> 32) ^ x.word[1] ^ key0;
  y.word[1] = static_cast<uint32_t>(product1);
  y.word[2] = static_cast<uint32_t>(product0 >> 32) ^ x.word[3] ^ key1;
  y.word[3] = static_cast<uint32_t>(product0);
  return y;
}

/// Random123's philox4x32 with 10 rounds.
LOOM_HOST_DEVICE inline Philox4x32 philox4x32_10(Philox4x32 counter,
                                                 uint32_t key0, uint32_t key1) {
  for (int round = 0; round < 10; ++round) {
    if (round > 0) {
      key0 += 0x9E3779B9u;
      key1 += 0xBB67AE85u;
    }
    counter = philoxRound(counter, key0, key1);
  }
  return counter;
}

/// The 32 random bits (r0 above) that decide element `index` of the dropout
/// site (`seed`, `key`) at `step`.
LOOM_HOST_DEVICE inline uint32_t dropoutBits(uint64_t seed, uint64_t key,
                                             uint64_t step, uint64_t index) {
  Philox4x32 counter = {
      {static_cast<uint32_t>(step), static_cast<uint32_t>(step >> 32),
       static_cast<uint32_t>(index), static_cast<uint32_t>(index >> 32)}};
  return philox4x32_10(counter, static_cast<uint32_t>(seed),
                       static_cast<uint32_t>(key))
      .word[0];
}

/// Whether dropout with probability `rate` keeps element `index`: its bits,
/// read as a uniform number in [0, 1), are at least `rate`.
LOOM_HOST_DEVICE inline bool dropoutKeeps(uint64_t seed, uint64_t key,
                                          uint64_t step, uint64_t index,
                                          double rate) {
  return static_cast<double>(dropoutBits(seed, key, step, index)) *
             (1.0 / 4294967296.0) >=
         rate;
}

} // namespace loom

#endif // LOOM_DROPOUTMASK_H
