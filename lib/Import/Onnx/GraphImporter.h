//===- GraphImporter.h - The state of one ONNX import -----------*- C++ -*-===//
//
// An import runs in two passes over the graph:
//
//   1. Analysis, in node order: every value gets its static type (the
//      graph specialized to the micro-batch and sequence length), and a
//      node whose operands are all known is folded on the host. A float
//      initializer is a parameter; layout ops of parameters (transposes,
//      reshapes, slices, ...) stay "weight-like": their IR is built from
//      the parameter, so it trains. Arithmetic whose operands are all
//      known (a rotary table from an inverse-frequency buffer, a causal
//      mask) is folded into a constant.
//   2. Emission, on demand from the graph's output: a value's IR is a
//      function argument, a constant, or the lowering of its producer,
//      first offered to the fusion patterns (Patterns.cpp) rooted there,
//      then lowered op by op (LowerOps.cpp). Dead nodes never become IR.
//
// Errors are sticky: the first one is kept, every later step returns a
// null Value, and the import reports that one line.
//
//===----------------------------------------------------------------------===//

#ifndef LOOM_LIB_IMPORT_ONNX_GRAPHIMPORTER_H
#define LOOM_LIB_IMPORT_ONNX_GRAPHIMPORTER_H

#include "Evaluate.h"

#include "loom/Import/OnnxImporter.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/Builders.h"
#include "llvm/ADT/DenseMap.h"

namespace loom::onnx_import {

enum class ValueKind {
  Input,     ///< token ids or labels
  Parameter, ///< a float initializer (or a weights-file tensor)
  Constant,  ///< folded at import
  Computed,  ///< produced by a node at run time (or a layout op of params)
};

struct ValueState {
  ValueType type;
  ValueKind kind = ValueKind::Computed;
  /// The producing node's index (Computed values and folded results).
  int producer = -1;
  /// Whether the data is known at import (constants, parameters that are
  /// not protected by the weights file, layout ops of those).
  bool known = false;
  /// A parameter, or layout ops of parameters only: its IR is built from
  /// the parameter, never a constant.
  bool weightLike = false;
  /// The data, once computed (always for constants).
  std::optional<HostTensor> data;
  /// For parameters: the index in GraphImporter::parameters, and whether
  /// the graph holds the parameter's transpose.
  int parameter = -1;
  bool transposedView = false;
  /// Readers in the graph (node inputs and graph outputs).
  int uses = 0;
  mlir::Value ir;
};

/// A parameter of @forward.
struct Parameter {
  std::string name;
  llvm::SmallVector<int64_t, 4> shape;
  /// Where its values come from: an initializer, or the weights file.
  const RawTensor *initializer = nullptr;
  const CheckpointTensor *weights = nullptr;
  /// Its position in the weights file (ordering), or -1.
  int64_t weightsIndex = -1;
  /// Its order of appearance in the graph (ordering without a weights
  /// file).
  int64_t graphIndex = 0;
  mlir::BlockArgument argument;
  /// The argument in the compute type (a bf16 cast of it, or itself).
  mlir::Value compute;
  bool readByFolding = false;

  std::vector<float> values() const;
};

class GraphImporter {
public:
  GraphImporter(mlir::MLIRContext &context, const OnnxGraph &graph,
                llvm::StringRef path, const OnnxImportOptions &options);

  llvm::Expected<OnnxImport> run();

  //===--------------------------------------------------------------------===//
  // For the op lowering and the patterns
  //===--------------------------------------------------------------------===//

  const OnnxGraph &graph;
  const OnnxImportOptions &options;
  OnnxImportReport report;

  /// The state of a value; null for "" (an omitted input).
  ValueState *state(llvm::StringRef name);
  const ValueType &typeOf(llvm::StringRef name) { return state(name)->type; }
  /// The node computing `name` at run time, or null when the value is an
  /// input, a parameter or a constant.
  const OnnxNode *producer(llvm::StringRef name);
  /// The data of a value known at import, or null.
  const HostTensor *constant(llvm::StringRef name);
  /// The single value of a constant whose elements are all equal.
  std::optional<double> scalar(llvm::StringRef name);
  /// The node's operands: types, and data for the constants.
  llvm::SmallVector<Operand, 4> operandsOf(const OnnxNode &node);
  /// Whether `name` has exactly one reader (so a pattern may absorb it).
  bool singleUse(llvm::StringRef name) { return state(name)->uses == 1; }

  /// The value's IR, built on demand; null after an error.
  mlir::Value ir(llvm::StringRef name);
  /// Records the IR of a node's output.
  void define(llvm::StringRef name, mlir::Value value);

  mlir::OpBuilder &builder() { return b; }
  mlir::Location locationOf(const OnnxNode &node);
  /// The IR element type of a value of `type`: the compute type for
  /// floats, i32 for integers (token ids and labels).
  mlir::Type elementType(DType type);
  mlir::Type computeType() { return compute; }
  mlir::RankedTensorType tensorType(const ValueType &type);
  /// An arith.constant of `data` in the IR type of `type`.
  mlir::Value constantOf(const HostTensor &data, const ValueType &type,
                         mlir::Location loc);
  /// A splat float constant of `shape` in the compute type.
  mlir::Value splat(double value, llvm::ArrayRef<int64_t> shape,
                    mlir::Location loc);

  /// Records the first error, at `node`; returns a null Value.
  mlir::Value fail(const OnnxNode &node, const llvm::Twine &message);
  mlir::Value fail(const llvm::Twine &message);
  bool failed() const { return error.has_value(); }

  void noteFused(llvm::StringRef kind) { ++report.fused[kind.str()]; }
  void noteUnfused(llvm::StringRef kind, const OnnxNode &node,
                   const llvm::Twine &why);

  std::string nodeText(const OnnxNode &node) const;

private:
  llvm::Error setUpInputs();
  /// Parameters.cpp: the float initializers (and weights-file inputs) as
  /// parameters, with the weights file's names and ties restored.
  llvm::Error setUpParameters();
  llvm::Error analyze();
  llvm::Error analyzeNode(int index);
  const HostTensor *dataOf(ValueState &value);
  mlir::Value parameterIR(ValueState &value);
  llvm::Error buildFunction();
  mlir::Value lossOf(llvm::StringRef output);
  llvm::Error finish(mlir::func::FuncOp draft);

  mlir::MLIRContext &context;
  std::string path;
  mlir::OpBuilder b;
  mlir::Type compute;
  int64_t microBatch = 0, seqLen = 0;
  llvm::StringMap<ValueState> values;
  std::vector<Parameter> parameters;
  std::optional<Checkpoint> weights;
  std::string tokensName, labelsName;
  mlir::BlockArgument tokens, labels;
  mlir::OwningOpRef<mlir::ModuleOp> module;
  mlir::Block *body = nullptr;
  std::optional<std::string> error;
};

/// Lowers `node` op by op, defining its outputs. False after an error.
bool lowerNode(GraphImporter &importer, const OnnxNode &node);

/// Tries the fusion patterns rooted at `node`; true when one matched and
/// defined the node's outputs.
bool fusePatterns(GraphImporter &importer, const OnnxNode &node);

/// Simplifies the imported function: transposes and reshapes that undo
/// each other (the layouts the patterns and the graph convert between),
/// matmuls through flattening reshapes, transposed weights into
/// transpose_rhs; then removes dead ops.
void simplifyImported(mlir::func::FuncOp function);

/// Marks the ops and parameters of each transformer layer of the imported
/// function with kLayerAttr, from its structure (Layers.cpp); leaves a
/// graph that is not a chain of layers unmarked.
void markLayers(mlir::func::FuncOp function);

} // namespace loom::onnx_import

#endif // LOOM_LIB_IMPORT_ONNX_GRAPHIMPORTER_H
