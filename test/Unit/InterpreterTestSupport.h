//===- InterpreterTestSupport.h - Shared helpers of the interpreter tests ===//
//
// The fixture and helpers of InterpreterOpsTest.cpp (forward ops against
// hand-written formulas), InterpreterGradientTest.cpp (gradients against
// central differences) and InterpreterTest.cpp (rounding, dropout, errors,
// imported models).
//
//===----------------------------------------------------------------------===//

#ifndef LOOM_TEST_UNIT_INTERPRETERTESTSUPPORT_H
#define LOOM_TEST_UNIT_INTERPRETERTESTSUPPORT_H

#include "loom/DropoutMask.h"
#include "loom/Import/ModelImporter.h"
#include "loom/Interpreter/Interpreter.h"

#include "dialects/Loom/LoomOps.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/BuiltinOps.h"
#include "mlir/IR/MLIRContext.h"
#include "mlir/Parser/Parser.h"
#include "llvm/ADT/APFloat.h"
#include "llvm/Support/MemoryBuffer.h"

#include <gtest/gtest.h>

#include <cmath>
#include <random>

namespace loom::interp::testing {

using namespace mlir;

constexpr double kExact = 1e-12;

inline Tensor floats(ArrayRef<int64_t> shape, std::vector<double> values) {
  return Tensor::floats(nullptr, shape, std::move(values));
}

inline Tensor ints(ArrayRef<int64_t> shape, std::vector<int64_t> values) {
  return Tensor::ints(nullptr, shape, std::move(values));
}

inline int64_t count(ArrayRef<int64_t> shape) {
  int64_t n = 1;
  for (int64_t d : shape)
    n *= d;
  return n;
}

/// 0, 1, 2, ... in `shape`.
inline Tensor iota(ArrayRef<int64_t> shape) {
  std::vector<double> values(count(shape));
  for (size_t e = 0; e < values.size(); ++e)
    values[e] = static_cast<double>(e);
  return floats(shape, values);
}

inline void expectAllNear(const std::vector<double> &actual,
                          const std::vector<double> &expected,
                          double tolerance) {
  ASSERT_EQ(actual.size(), expected.size());
  for (size_t e = 0; e < actual.size(); ++e)
    EXPECT_NEAR(actual[e], expected[e], tolerance) << "at flat index " << e;
}

class InterpreterTest : public ::testing::Test {
protected:
  InterpreterTest() {
    context.loadDialect<func::FuncDialect, arith::ArithDialect,
                        loom::LoomDialect>();
  }

  /// Parses a module (named test.mlir in locations) and returns its
  /// function `name`; fails the test on a parse or verifier error.
  func::FuncOp parse(llvm::StringRef source, llvm::StringRef name = "main") {
    ParserConfig config(&context);
    modules.push_back(parseSourceString<ModuleOp>(source, config, "test.mlir"));
    if (!modules.back()) {
      ADD_FAILURE() << "cannot parse:\n" << source.str();
      return nullptr;
    }
    auto fn = modules.back()->lookupSymbol<func::FuncOp>(name);
    EXPECT_TRUE(fn) << "no function @" << name.str();
    return fn;
  }

  /// Runs `fn`; fails the test (and returns nothing) on an error.
  std::vector<Tensor> run(func::FuncOp fn, std::vector<Tensor> args,
                          Precision precision = Precision::F64) {
    if (!fn)
      return {};
    auto results = loom::interp::run(fn, args, precision);
    if (!results) {
      ADD_FAILURE() << llvm::toString(results.takeError());
      return {};
    }
    return std::move(*results);
  }

  /// Runs `fn` expecting an error; returns its message.
  std::string runError(func::FuncOp fn, std::vector<Tensor> args,
                       Precision precision = Precision::F64) {
    auto results = loom::interp::run(fn, args, precision);
    if (results) {
      ADD_FAILURE() << "expected an error";
      return "";
    }
    return llvm::toString(results.takeError());
  }

  /// Normally distributed values with standard deviation `scale`.
  Tensor random(ArrayRef<int64_t> shape, double scale = 1.0) {
    std::normal_distribution<double> normal(0.0, scale);
    std::vector<double> values(count(shape));
    for (double &v : values)
      v = normal(rng);
    return floats(shape, values);
  }

  MLIRContext context;
  std::vector<OwningOpRef<ModuleOp>> modules;
  std::mt19937_64 rng{20240611};
};

} // namespace loom::interp::testing

#endif // LOOM_TEST_UNIT_INTERPRETERTESTSUPPORT_H
