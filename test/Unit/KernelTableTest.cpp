//===- KernelTableTest.cpp - loom_kernels.def against its users -----------===//
//
// The kernel table (runtime/include/loom/loom_kernels.def) is the one list
// of kernels and of their metas' attributes. These tests check that its
// C++ form (runtime/common/KernelAttrs.h) round-trips every row's
// attributes through the encoder the compiler uses and the decoder the
// kernels use, that names and kernels map one to one, that the CPU
// kernel library exports exactly the rows it should, and that the fusible
// rows' opcodes are the ABI's and name ops the lowering encodes.
//
//===----------------------------------------------------------------------===//

#include "KernelAttrs.h"

#include "dialects/Loom/LoomDialect.h"
#include "loom/loom_cpu_kernels.h"
#include "passes/Lowering/KernelCall.h"

#include "mlir/IR/Builders.h"
#include "mlir/IR/BuiltinTypes.h"
#include "mlir/IR/MLIRContext.h"
#include "mlir/IR/Operation.h"
#include "mlir/IR/Verifier.h"

#include <gtest/gtest.h>

#include <dlfcn.h>

#include <set>
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

/// The fusible rows: kernel, opcode, operands.
struct FusibleRow {
  Kernel kernel;
  int opcode, operands;
};

std::vector<FusibleRow> fusibleRows() {
  return {
#define LOOM_KERNEL(name, attributes)
#define LOOM_FUSIBLE_KERNEL(name, code, number, operands)                      \
  {Kernel::name, number, operands},
#include "loom/loom_kernels.def"
  };
}

TEST(KernelTableTest, FusedOpcodesAreUniqueAndKeepTheirAbiNumbers) {
  std::vector<FusibleRow> rows = fusibleRows();
  EXPECT_GE(rows.size(), 17u);
  std::set<int> seen;
  for (const FusibleRow &row : rows) {
    EXPECT_TRUE(seen.insert(row.opcode).second) << kernelName(row.kernel);
    EXPECT_EQ(fusedOpcodeOf(row.kernel), row.opcode) << kernelName(row.kernel);
    EXPECT_EQ(fusedOperandCount(row.opcode), row.operands)
        << kernelName(row.kernel);
    EXPECT_TRUE(row.operands == 1 || row.operands == 2);
    EXPECT_EQ(attrCount(row.kernel), 0) << kernelName(row.kernel);
  }
  // Compiled programs carry these numbers: they never change.
  EXPECT_EQ(LOOM_FUSED_ADD, 0);
  EXPECT_EQ(LOOM_FUSED_CAST, 10);
  EXPECT_EQ(LOOM_FUSED_SILU_GRAD, 14);
  EXPECT_EQ(LOOM_FUSED_GELU_ERF_GRAD, 16);
  EXPECT_EQ(fusedOperandCount(*seen.rbegin() + 1), 0);
  EXPECT_EQ(fusedOperandCount(-1), 0);
  EXPECT_EQ(fusedOpcodeOf(Kernel::matmul), -1);
  EXPECT_EQ(fusedOpcodeOf(Kernel::copy), -1);
}

/// Each fusible row names a loom op of as many operands, which the lowering
/// (and so --loom-fuse) gives the row's opcode.
TEST(KernelTableTest, FusibleRowsNameOpsTheLoweringEncodes) {
  mlir::MLIRContext context;
  context.loadDialect<loom::LoomDialect>();
  mlir::OpBuilder b(&context);
  auto type = mlir::RankedTensorType::get({4}, b.getF32Type());
  mlir::OperationState source(b.getUnknownLoc(), "test.source");
  source.addTypes(type);
  context.allowUnregisteredDialects();
  mlir::Operation *value = mlir::Operation::create(source);
  for (const FusibleRow &row : fusibleRows()) {
    std::string name = std::string("loom.") + kernelName(row.kernel);
    ASSERT_TRUE(mlir::RegisteredOperationName::lookup(name, &context)) << name;
    mlir::OperationState state(b.getUnknownLoc(), name);
    for (int i = 0; i < row.operands; ++i)
      state.addOperands(value->getResult(0));
    state.addTypes(type);
    mlir::Operation *op = mlir::Operation::create(state);
    EXPECT_EQ(loom::lowering::fusedOpcode(op), row.opcode) << name;
    // The op's verifier checks its operand count (a cast from f32 to f32
    // is refused for its types, not its count).
    if (row.kernel != Kernel::cast)
      EXPECT_TRUE(mlir::succeeded(mlir::verify(op))) << name;
    op->destroy();
  }
  mlir::OperationState matmul(b.getUnknownLoc(), "loom.matmul");
  mlir::Operation *op = mlir::Operation::create(matmul);
  EXPECT_EQ(loom::lowering::fusedOpcode(op), -1);
  op->destroy();
  value->destroy();
}

} // namespace
