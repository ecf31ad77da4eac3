//===- CudaEmulation.h - Runs CUDA device code on the host -------*- C++
//-*-===//
//
// Enough of the CUDA vocabulary for runtime/cuda/kernels/AttentionTiles.cuh
// and NormRows.cuh to run on a machine without a GPU: every thread of a
// block is a host thread, __syncthreads and __syncwarp are barriers, a
// shuffle goes through a per-warp exchange, and the WMMA fragments hold
// their whole 16 x 16 tile in every lane (the real ones spread it over the
// warp in an unspecified layout, which is why the kernels only load,
// store, fill and multiply them). Blocks run one after another.
//
// What it checks beyond the results: WMMA pointers lie in the block's
// shared memory with their whole tile, are 32-byte aligned and have a
// leading dimension that is a multiple of 16 bytes, as the CUDA
// programming guide requires; a violation aborts the test with a message.
//
//===----------------------------------------------------------------------===//

#ifndef LOOM_TEST_UNIT_CUDAEMULATION_H
#define LOOM_TEST_UNIT_CUDAEMULATION_H

#include <cmath>
#include <condition_variable>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <memory>
#include <mutex>
#include <thread>
#include <type_traits>
#include <vector>

namespace emu {

struct Dim3 {
  unsigned x = 0, y = 0, z = 0;
};

/// A barrier for a fixed number of threads, reusable.
class Barrier {
public:
  explicit Barrier(int count) : count(count) {}
  void wait() {
    std::unique_lock<std::mutex> lock(mutex);
    int mine = generation;
    if (++arrived == count) {
      arrived = 0;
      ++generation;
      changed.notify_all();
      return;
    }
    changed.wait(lock, [&] { return generation != mine; });
  }

private:
  std::mutex mutex;
  std::condition_variable changed;
  int count, arrived = 0, generation = 0;
};

/// What the threads of the running block share.
struct Block {
  std::vector<unsigned char> storage;
  unsigned char *shared = nullptr;
  size_t sharedBytes = 0;
  std::unique_ptr<Barrier> all;
  std::vector<std::unique_ptr<Barrier>> warps;
  std::vector<float> exchange; // 32 per warp
};

inline thread_local Dim3 threadIdxValue, blockIdxValue, gridDimValue;
inline thread_local Block *block = nullptr;

[[noreturn]] inline void fail(const char *what) {
  std::fprintf(stderr, "CUDA emulation: %s\n", what);
  std::abort();
}

inline int lane() { return threadIdxValue.x % 32; }
inline int warpOf() { return threadIdxValue.x / 32; }

/// Runs `kernel()` on `grid` blocks of `threads` threads (a multiple of 32)
/// with `sharedBytes` of dynamic shared memory.
inline void launch(Dim3 grid, int threads, size_t sharedBytes,
                   const std::function<void()> &kernel) {
  if (threads % 32 != 0)
    fail("threads per block must be a multiple of 32");
  for (unsigned z = 0; z < grid.z; ++z)
    for (unsigned y = 0; y < grid.y; ++y)
      for (unsigned x = 0; x < grid.x; ++x) {
        Block b;
        // Garbage, not zeros, so that a read before a write shows.
        b.storage.assign(sharedBytes + 128, 0xa5);
        b.shared = b.storage.data() +
                   (128 - reinterpret_cast<uintptr_t>(b.storage.data()) % 128);
        b.sharedBytes = sharedBytes;
        b.all = std::make_unique<Barrier>(threads);
        for (int w = 0; w < threads / 32; ++w)
          b.warps.push_back(std::make_unique<Barrier>(32));
        b.exchange.assign(threads, 0.0f);
        std::vector<std::thread> running;
        for (int t = 0; t < threads; ++t)
          running.emplace_back([&, t] {
            threadIdxValue = {static_cast<unsigned>(t), 0, 0};
            blockIdxValue = {x, y, z};
            gridDimValue = grid;
            block = &b;
            kernel();
          });
        for (std::thread &thread : running)
          thread.join();
      }
}

/// Aborts unless [p, p + rows * ld elements) lies in shared memory, p is
/// 32-byte aligned and ld * size a multiple of 16 bytes.
inline void checkTile(const void *p, unsigned ld, size_t size) {
  auto at = static_cast<const unsigned char *>(p);
  if (reinterpret_cast<uintptr_t>(p) % 32 != 0)
    fail("a WMMA pointer is not 32-byte aligned");
  if ((ld * size) % 16 != 0)
    fail("a WMMA leading dimension is not a multiple of 16 bytes");
  if (at < block->shared ||
      at + (15 * ld + 16) * size > block->shared + block->sharedBytes)
    fail("a WMMA tile reaches outside shared memory");
}

} // namespace emu

// --- the names device code uses ----------------------------------------------

#define threadIdx (::emu::threadIdxValue)
#define blockIdx (::emu::blockIdxValue)
#define gridDim (::emu::gridDimValue)

inline void __syncthreads() { emu::block->all->wait(); }
inline void __syncwarp(unsigned = 0xffffffffu) {
  emu::block->warps[emu::warpOf()]->wait();
}
inline float __shfl_xor_sync(unsigned, float value, int offset) {
  float *slots = emu::block->exchange.data() + 32 * emu::warpOf();
  __syncwarp();
  slots[emu::lane()] = value;
  __syncwarp();
  float other = slots[emu::lane() ^ offset];
  __syncwarp();
  return other;
}

/// bf16 as its 16 bits; conversions round to nearest even, as
/// __float2bfloat16_rn does.
struct Bf16 {
  uint16_t bits;
};
inline Bf16 toBf16(float value) {
  uint32_t u;
  std::memcpy(&u, &value, 4);
  if (std::isnan(value))
    return {static_cast<uint16_t>((u >> 16) | 0x40)};
  u += 0x7fff + ((u >> 16) & 1);
  return {static_cast<uint16_t>(u >> 16)};
}
inline float toFloat(Bf16 value) {
  uint32_t u = static_cast<uint32_t>(value.bits) << 16;
  float f;
  std::memcpy(&f, &u, 4);
  return f;
}

/// 16 bytes moved at once; the pointer must be 16-byte aligned, as for a
/// uint4 load or store on the GPU.
struct Vec16 {
  unsigned char bytes[16];
};
inline Vec16 load16(const void *p) {
  if (reinterpret_cast<uintptr_t>(p) % 16 != 0)
    emu::fail("a 16-byte load from an address not 16-byte aligned");
  Vec16 value;
  std::memcpy(value.bytes, p, 16);
  return value;
}
inline void store16(void *p, Vec16 value) {
  if (reinterpret_cast<uintptr_t>(p) % 16 != 0)
    emu::fail("a 16-byte store to an address not 16-byte aligned");
  std::memcpy(p, value.bytes, 16);
}

namespace wmma {
struct matrix_a {};
struct matrix_b {};
struct accumulator {};
struct row_major {};
struct col_major {};
enum layout_t { mem_row_major, mem_col_major };

/// The whole tile, in every lane; x[i][j] is row i, column j of the
/// operand (A: M x K, B: K x N, accumulator: M x N).
template <typename Use, int M, int N, int K, typename T, typename Layout = void>
struct fragment {
  float x[16][16];
};

template <typename Use, typename T, typename Layout>
void load_matrix_sync(fragment<Use, 16, 16, 16, T, Layout> &f, const T *p,
                      unsigned ld) {
  emu::checkTile(p, ld, sizeof(T));
  for (int i = 0; i < 16; ++i)
    for (int j = 0; j < 16; ++j)
      f.x[i][j] = toFloat(std::is_same_v<Layout, row_major> ? p[i * ld + j]
                                                            : p[j * ld + i]);
}

inline void load_matrix_sync(fragment<accumulator, 16, 16, 16, float> &f,
                             const float *p, unsigned ld, layout_t layout) {
  emu::checkTile(p, ld, sizeof(float));
  for (int i = 0; i < 16; ++i)
    for (int j = 0; j < 16; ++j)
      f.x[i][j] = layout == mem_row_major ? p[i * ld + j] : p[j * ld + i];
}

/// Written by lane 0 between two warp barriers: every lane holds the same
/// tile.
inline void store_matrix_sync(float *p,
                              const fragment<accumulator, 16, 16, 16, float> &f,
                              unsigned ld, layout_t layout) {
  emu::checkTile(p, ld, sizeof(float));
  __syncwarp();
  if (emu::lane() == 0)
    for (int i = 0; i < 16; ++i)
      for (int j = 0; j < 16; ++j)
        (layout == mem_row_major ? p[i * ld + j] : p[j * ld + i]) = f.x[i][j];
  __syncwarp();
}

template <typename Use, typename T, typename Layout>
void fill_fragment(fragment<Use, 16, 16, 16, T, Layout> &f, float value) {
  for (auto &row : f.x)
    for (float &v : row)
      v = value;
}

/// d = a b + c, the products' sums in f32.
template <typename LayoutA, typename LayoutB, typename T>
void mma_sync(fragment<accumulator, 16, 16, 16, float> &d,
              const fragment<matrix_a, 16, 16, 16, T, LayoutA> &a,
              const fragment<matrix_b, 16, 16, 16, T, LayoutB> &b,
              const fragment<accumulator, 16, 16, 16, float> &c) {
  float result[16][16];
  for (int i = 0; i < 16; ++i)
    for (int j = 0; j < 16; ++j) {
      float sum = c.x[i][j];
      for (int k = 0; k < 16; ++k)
        sum += a.x[i][k] * b.x[k][j];
      result[i][j] = sum;
    }
  std::memcpy(d.x, result, sizeof result);
}
} // namespace wmma

#define LOOM_TILE_DEVICE inline
#define LOOM_TILE_KERNEL
#define LOOM_TILE_SHARED(name) unsigned char *name = ::emu::block->shared
#define LOOM_ROWS_DEVICE inline
#define LOOM_ROWS_KERNEL

#endif // LOOM_TEST_UNIT_CUDAEMULATION_H
