//===- KernelArgs.cpp - Reading a CUDA kernel's buffers and meta ----------===//

#include "KernelArgs.h"

#include <cstdarg>
#include <cstdio>

namespace loom::cuda {

namespace {
thread_local char lastError[512] = "";
} // namespace

KernelArgs::KernelArgs(void *const *buffers, const int64_t *meta) {
  operands = meta[0];
  results = meta[1];
  cursor = meta + 2;
  for (int64_t t = 0; t < operands + results && t < kMaxTensors; ++t) {
    View &view = views[t];
    view.data = buffers[t];
    view.dtype = static_cast<loom_dtype>(*cursor++);
    view.rank = *cursor++;
    for (int64_t d = 0; d < view.rank; ++d) {
      int64_t extent = *cursor++;
      if (d < kMaxRank)
        view.dims[d] = extent;
    }
  }
}

int32_t KernelArgs::expect(const char *op, int64_t wantOperands,
                           int64_t wantResults, uint32_t notFloat) const {
  if (operands != wantOperands || results != wantResults)
    return fail("loom_cuda_%s: %lld operands and %lld results, expected %lld "
                "and %lld",
                op, static_cast<long long>(operands),
                static_cast<long long>(results),
                static_cast<long long>(wantOperands),
                static_cast<long long>(wantResults));
  for (int64_t t = 0; t < operands + results; ++t) {
    if (views[t].rank > kMaxRank)
      return fail("loom_cuda_%s: tensor %lld has rank %lld, over %d", op,
                  static_cast<long long>(t),
                  static_cast<long long>(views[t].rank), kMaxRank);
    if (!(notFloat >> t & 1) && !views[t].isFloat())
      return fail("loom_cuda_%s: tensor %lld has element type %d, neither "
                  "f32 nor bf16",
                  op, static_cast<long long>(t),
                  static_cast<int>(views[t].dtype));
  }
  return 0;
}

int32_t fail(const char *format, ...) {
  va_list args;
  va_start(args, format);
  std::vsnprintf(lastError, sizeof lastError, format, args);
  va_end(args);
  return 1;
}

void stridesOf(const View &view, int64_t *strides) {
  int64_t stride = 1;
  for (int64_t d = view.rank - 1; d >= 0; --d) {
    strides[d] = stride;
    stride *= view.dims[d];
  }
}

/// Along a dimension split over grid axes [a0, a1, ...] the rank's shard is
/// the row-major index of its coordinates on them; micro-batch k of M adds
/// k times the micro-batch's global element count (interp::maskIndices).
int32_t readMaskIndex(KernelArgs &args, const loom_call_frame *frame,
                      int64_t blockRank, const int64_t *localShape,
                      int64_t rank, const int64_t *entryOfDim, int64_t *strides,
                      int64_t *base) {
  int64_t microBatches = args.integer();
  int64_t gridRank = 0;
  const int64_t *gridShape = args.array(gridRank);
  if (blockRank > kMaxRank || rank > kMaxRank)
    return fail("dropout mask: rank over %d", kMaxRank);
  int64_t axisCount[kMaxRank] = {};
  const int64_t *axes[kMaxRank] = {};
  if (gridRank > 0)
    for (int64_t entry = 0; entry < blockRank; ++entry)
      axes[entry] = args.array(axisCount[entry]);

  const loom_comm *comm = frame ? frame->comm : nullptr;
  int64_t globalShape[kMaxRank], start[kMaxRank];
  int64_t shards = 1;
  for (int64_t d = 0; d < rank; ++d) {
    int64_t entry = entryOfDim ? entryOfDim[d] : d;
    int64_t count = 1, shard = 0;
    if (entry >= 0 && entry < blockRank)
      for (int64_t a = 0; a < axisCount[entry]; ++a) {
        int64_t axis = axes[entry][a];
        if (axis < 0 || axis >= gridRank)
          return fail("dropout mask: grid axis %lld is out of range",
                      static_cast<long long>(axis));
        if (!comm || !comm->grid_coordinate)
          return fail("dropout mask: a split tensor needs "
                      "comm->grid_coordinate");
        int64_t coordinate =
            comm->grid_coordinate(comm->ctx, static_cast<int32_t>(axis));
        if (coordinate < 0 || coordinate >= gridShape[axis])
          return fail("dropout mask: coordinate %lld on grid axis %lld is "
                      "out of range",
                      static_cast<long long>(coordinate),
                      static_cast<long long>(axis));
        shard = shard * gridShape[axis] + coordinate;
        count *= gridShape[axis];
      }
    globalShape[d] = localShape[d] * count;
    start[d] = shard * localShape[d];
    shards *= count;
  }
  int64_t stride = 1, offset = 0;
  for (int64_t d = rank - 1; d >= 0; --d) {
    strides[d] = stride;
    offset += start[d] * stride;
    stride *= globalShape[d];
  }
  if (microBatches > 1) {
    int64_t k = frame ? frame->micro_batch : 0;
    if (k < 0 || k >= microBatches)
      return fail("dropout mask: micro-batch %lld of %lld",
                  static_cast<long long>(k),
                  static_cast<long long>(microBatches));
    int64_t local = 1;
    for (int64_t d = 0; d < rank; ++d)
      local *= localShape[d];
    offset += k * local * shards;
  }
  *base = offset;
  return 0;
}

} // namespace loom::cuda

extern "C" const char *loom_cuda_last_error(void) {
  return loom::cuda::lastError;
}
