//===- KernelTableTest.cpp - loom_kernels.def against its users -----------===//
//
// The kernel table (runtime/include/loom/loom_kernels.def) is the one list
// of kernels and of their metas' attributes. These tests check that its
// C++ form (runtime/common/KernelAttrs.h) round-trips every row's
// attributes through the encoder the compiler uses and the decoder the
// kernels use, that names and kernels map one to one, and that the CPU
// kernel library exports exactly the rows it should.
//
//===----------------------------------------------------------------------===//

#include "KernelAttrs.h"

#include <gtest/gtest.h>

#include <dlfcn.h>

#include <string>
#include <vector>

using namespace loom::kernels;

namespace {

/// Sets each field to a value of its own, recording what it set.
struct Filler {
  std::vector<double> expected;
  std::vector<std::vector<int64_t>> arrays;
  int64_t next = 7;

  void integer(int64_t &value) {
    value = -(next += 3);
    expected.push_back(static_cast<double>(value));
  }
  void real(double &value) {
    value = 0.25 + static_cast<double>(next += 5);
    expected.push_back(value);
  }
  void unit(bool &value) {
    value = (next += 1) % 2 == 0;
    expected.push_back(value ? 1.0 : 0.0);
  }
  void array(AttrArray &value) {
    arrays.push_back({next, next + 1, next + 2});
    next += 11;
    value = {arrays.back().data(), 3};
    expected.push_back(static_cast<double>(arrays.back()[0]));
  }
};

/// Checks each field against what Filler recorded, in order.
struct Checker {
  const std::vector<double> &expected;
  size_t at = 0;
  bool ok = true;

  void check(double got) {
    ok = ok && at < expected.size() && expected[at] == got;
    ++at;
  }
  void integer(int64_t &value) { check(static_cast<double>(value)); }
  void real(double &value) { check(value); }
  void unit(bool &value) { check(value ? 1.0 : 0.0); }
  void array(AttrArray &value) {
    ok = ok && value.size == 3 && value[1] == value[0] + 1 &&
         value[2] == value[0] + 2;
    check(value.size ? static_cast<double>(value[0]) : -1.0);
  }
};

/// Encodes kernel K's attributes as the compiler does, decodes them as the
/// kernels do, and compares; the decoder must stop where the encoding ends
/// (a tail follows it).
template <Kernel K> void expectRoundTrip() {
  Attrs<K> written;
  Filler filler;
  visitAttrs(filler, written);
  std::vector<int64_t> meta;
  appendAttrs<K>(meta, written);
  meta.push_back(123456789); // the tail's first value

  AttributeReader reader(meta.data());
  Attrs<K> read = readAttrs<K>(reader);
  Checker checker{filler.expected};
  visitAttrs(checker, read);
  EXPECT_TRUE(checker.ok) << kernelName(K);
  EXPECT_EQ(checker.at, filler.expected.size()) << kernelName(K);
  EXPECT_EQ(static_cast<int>(filler.expected.size()), attrCount(K))
      << kernelName(K);
  EXPECT_EQ(reader.integer(), 123456789) << kernelName(K);
}

std::vector<Kernel> allKernels() {
  return {
#define LOOM_KERNEL(name, attributes) Kernel::name,
#define LOOM_DEVICE_KERNEL(name, attributes) Kernel::name,
#include "loom/loom_kernels.def"
  };
}

TEST(KernelTableTest, EveryRowRoundTripsItsAttributes) {
#define LOOM_KERNEL(name, attributes) expectRoundTrip<Kernel::name>();
#define LOOM_DEVICE_KERNEL(name, attributes) expectRoundTrip<Kernel::name>();
#include "loom/loom_kernels.def"
}

TEST(KernelTableTest, NamesAndKernelsMapOneToOne) {
  std::vector<Kernel> kernels = allKernels();
  EXPECT_GE(kernels.size(), 50u);
  for (Kernel kernel : kernels) {
    Kernel found;
    ASSERT_TRUE(kernelNamed(kernelName(kernel), found)) << kernelName(kernel);
    EXPECT_EQ(found, kernel) << kernelName(kernel);
  }
  Kernel found;
  EXPECT_FALSE(kernelNamed("no_such_kernel", found));
  EXPECT_TRUE(kernelNamed("upload", found));
  EXPECT_FALSE(onCpu(found));
}

TEST(KernelTableTest, TheCpuLibraryExportsEveryCpuRow) {
  for (Kernel kernel : allKernels()) {
    std::string symbol = std::string("loom_cpu_") + kernelName(kernel);
    EXPECT_EQ(dlsym(RTLD_DEFAULT, symbol.c_str()) != nullptr, onCpu(kernel))
        << symbol;
  }
}

} // namespace
