//===- CommTestSupport.h - What the loom_comm tests share -------*- C++ -*-===//
//
// The harness of the plain (no GoogleTest) MPI programs that test loom_comm
// implementations: runtime/cpu/comm/MpiCommTest.cpp (MpiComm) and
// test/Unit/CudaCommTest.cpp (StagedComm, NcclComm). Values are held as
// doubles and encoded into each dtype at the boundary; the tests use small
// integers, which every dtype (bf16 included) and their sums hold exactly.
//
//===----------------------------------------------------------------------===//

#ifndef LOOM_RUNTIME_CPU_COMM_COMMTESTSUPPORT_H
#define LOOM_RUNTIME_CPU_COMM_COMMTESTSUPPORT_H

#include "loom/loom_program.h"

#include <cstdint>
#include <cstdio>
#include <cstring>
#include <string>
#include <vector>

namespace loom::rt::commtest {

/// This process's rank, for messages, and the checks that failed.
inline int worldRank = 0;
inline int failures = 0;

inline void expect(bool ok, const std::string &what) {
  if (ok)
    return;
  ++failures;
  std::fprintf(stderr, "rank %d: FAIL: %s\n", worldRank, what.c_str());
}

/// Elements of one dtype, stored as doubles and converted at the boundary.
struct Typed {
  loom_dtype dtype;
  const char *name;
  int64_t bytes;
};
inline const Typed kDtypes[] = {{LOOM_DTYPE_F32, "f32", 4},
                                {LOOM_DTYPE_F64, "f64", 8},
                                {LOOM_DTYPE_I32, "i32", 4},
                                {LOOM_DTYPE_I64, "i64", 8},
                                {LOOM_DTYPE_BF16, "bf16", 2}};

inline std::vector<unsigned char> encode(const Typed &t,
                                         const std::vector<double> &values) {
  std::vector<unsigned char> bytes(values.size() * t.bytes);
  for (size_t i = 0; i < values.size(); ++i) {
    double v = values[i];
    void *at = bytes.data() + i * t.bytes;
    if (t.dtype == LOOM_DTYPE_F32) {
      float f = static_cast<float>(v);
      std::memcpy(at, &f, 4);
    } else if (t.dtype == LOOM_DTYPE_F64) {
      std::memcpy(at, &v, 8);
    } else if (t.dtype == LOOM_DTYPE_I32) {
      int32_t x = static_cast<int32_t>(v);
      std::memcpy(at, &x, 4);
    } else if (t.dtype == LOOM_DTYPE_I64) {
      int64_t x = static_cast<int64_t>(v);
      std::memcpy(at, &x, 8);
    } else { // bf16: the values are exact, so truncation is exact too
      float f = static_cast<float>(v);
      uint32_t bits;
      std::memcpy(&bits, &f, 4);
      uint16_t high = static_cast<uint16_t>(bits >> 16);
      std::memcpy(at, &high, 2);
    }
  }
  return bytes;
}

inline std::vector<double> decode(const Typed &t,
                                  const std::vector<unsigned char> &bytes) {
  std::vector<double> values(bytes.size() / t.bytes);
  for (size_t i = 0; i < values.size(); ++i) {
    const void *at = bytes.data() + i * t.bytes;
    if (t.dtype == LOOM_DTYPE_F32) {
      float f;
      std::memcpy(&f, at, 4);
      values[i] = f;
    } else if (t.dtype == LOOM_DTYPE_F64) {
      std::memcpy(&values[i], at, 8);
    } else if (t.dtype == LOOM_DTYPE_I32) {
      int32_t x;
      std::memcpy(&x, at, 4);
      values[i] = x;
    } else if (t.dtype == LOOM_DTYPE_I64) {
      int64_t x;
      std::memcpy(&x, at, 8);
      values[i] = static_cast<double>(x);
    } else {
      uint16_t high;
      std::memcpy(&high, at, 2);
      uint32_t bits = static_cast<uint32_t>(high) << 16;
      float f;
      std::memcpy(&f, &bits, 4);
      values[i] = f;
    }
  }
  return values;
}

inline void expectValues(const std::vector<double> &got,
                         const std::vector<double> &want,
                         const std::string &what) {
  bool same = got.size() == want.size();
  for (size_t i = 0; same && i < got.size(); ++i)
    same = got[i] == want[i];
  std::string text = what + ": got [";
  for (size_t i = 0; i < got.size(); ++i)
    text += (i ? " " : "") + std::to_string(got[i]);
  text += "], want [";
  for (size_t i = 0; i < want.size(); ++i)
    text += (i ? " " : "") + std::to_string(want[i]);
  expect(same, text + "]");
}

} // namespace loom::rt::commtest

#endif // LOOM_RUNTIME_CPU_COMM_COMMTESTSUPPORT_H
