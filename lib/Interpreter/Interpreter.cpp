//===- Interpreter.cpp - Runs a func.func of loom ops ---------------------===//
//
// The driver: it checks the arguments against the function type, walks the
// function's single block in order, keeps one Tensor per SSA value, runs
// func.call, func.return and arith.constant itself, the ops of its OpHook
// (the multi-rank interpreter's shard ops) through the hook and every loom
// op through its kernel, and rounds each float result to its declared
// element type in the F32 mode. An `index` value (a shard op's process
// index) is a 0-d integer tensor of element type index.
//
//===----------------------------------------------------------------------===//

#include "loom/Interpreter/Interpreter.h"

#include "Driver.h"

#include "dialects/Loom/LoomDialect.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/IR/BuiltinAttributes.h"
#include "mlir/IR/SymbolTable.h"
#include "mlir/IR/Verifier.h"
#include "llvm/ADT/STLExtras.h"
#include "llvm/Support/raw_ostream.h"

using namespace mlir;

namespace loom::interp {

//===----------------------------------------------------------------------===//
// Helpers shared with the kernels
//===----------------------------------------------------------------------===//

const Kernel *KernelTable::lookup(Operation *op) const {
  auto it = kernels.find(op->getName().getTypeID());
  return it == kernels.end() ? nullptr : &it->second;
}

/// `file:line:col` when the location has one, as compilers print it;
/// otherwise the location in MLIR's syntax.
static void printLocation(llvm::raw_ostream &os, Location loc) {
  if (auto fileLoc = loc->findInstanceOf<FileLineColLoc>())
    os << fileLoc.getFilename().getValue() << ":" << fileLoc.getLine() << ":"
       << fileLoc.getColumn();
  else
    os << loc;
}

llvm::Error opError(Operation *op, const llvm::Twine &message) {
  std::string text;
  llvm::raw_string_ostream os(text);
  printLocation(os, op->getLoc());
  os << ": '" << op->getName() << "' " << message;
  return llvm::createStringError(text);
}

ArrayRef<int64_t> shapeOf(Value value) {
  return cast<RankedTensorType>(value.getType()).getShape();
}

Type elementTypeOf(Value value) {
  return cast<RankedTensorType>(value.getType()).getElementType();
}

Tensor floatsLike(Value value, std::vector<double> values) {
  return Tensor::floats(elementTypeOf(value), shapeOf(value),
                        std::move(values));
}

//===----------------------------------------------------------------------===//
// The driver
//===----------------------------------------------------------------------===//

/// Every op kernel, registered once.
static const KernelTable &allKernels() {
  static const KernelTable table = [] {
    KernelTable t;
    addElementwiseKernels(t);
    addLayoutKernels(t);
    addLinearKernels(t);
    addNormKernels(t);
    addAttentionKernels(t);
    addOptimizerKernels(t);
    return t;
  }();
  return table;
}

std::string shapeString(ArrayRef<int64_t> shape) {
  if (shape.empty())
    return "scalar";
  std::string text;
  llvm::raw_string_ostream os(text);
  llvm::interleave(shape, os, "x");
  return text;
}

/// The argument's `loom.name` (a parameter's Hugging Face name), quoted, or
/// nothing.
static std::string argumentName(func::FuncOp fn, unsigned index) {
  if (auto name = fn.getArgAttrOfType<StringAttr>(index, kNameAttr))
    return (" ('" + name.getValue() + "')").str();
  return "";
}

/// Checks that `arg` can stand for argument `index` of `fn`.
static llvm::Error checkArgument(func::FuncOp fn, unsigned index,
                                 const Tensor &arg) {
  auto fail = [&](const llvm::Twine &message) {
    return llvm::createStringError("argument #" + llvm::Twine(index) +
                                   argumentName(fn, index) + " of @" +
                                   fn.getSymName() + ": " + message);
  };
  auto type = dyn_cast<RankedTensorType>(fn.getArgumentTypes()[index]);
  if (!type || !type.hasStaticShape())
    return fail("the interpreter runs statically shaped tensors only");
  bool isFloat = isa<FloatType>(type.getElementType());
  if (!isFloat && !isa<IntegerType>(type.getElementType()))
    return fail("the element type is neither float nor integer");
  if (arg.isFloat() != isFloat)
    return fail(llvm::Twine("expected ") + (isFloat ? "float" : "integer") +
                " elements, got " + (arg.isFloat() ? "float" : "integer") +
                " ones");
  if (arg.shape() != type.getShape())
    return fail("expected shape " + shapeString(type.getShape()) + ", got " +
                shapeString(arg.shape()));
  if (static_cast<int64_t>(arg.size()) != arg.numElements())
    return fail("holds " + llvm::Twine(arg.size()) + " values for " +
                llvm::Twine(arg.numElements()) + " elements");
  if (arg.elementType() && arg.elementType() != type.getElementType()) {
    std::string text;
    llvm::raw_string_ostream os(text);
    os << "expected element type " << type.getElementType() << ", got "
       << arg.elementType();
    return fail(text);
  }
  return llvm::Error::success();
}

/// The tensor of an `arith.constant` with dense float or integer elements,
/// or of an `index` constant.
static llvm::Expected<Tensor> constantTensor(arith::ConstantOp op) {
  if (auto index = dyn_cast<IntegerAttr>(op.getValue());
      index && isa<IndexType>(op.getType()))
    return Tensor::ints(op.getType(), {}, {index.getInt()});
  auto elements = dyn_cast<DenseElementsAttr>(op.getValue());
  auto type = dyn_cast<RankedTensorType>(op.getType());
  if (!elements || !type)
    return opError(op, "is supported with dense tensor elements only");
  Type elementType = type.getElementType();
  if (isa<FloatType>(elementType)) {
    std::vector<double> values;
    values.reserve(type.getNumElements());
    for (APFloat value : elements.getValues<APFloat>()) {
      bool losesInfo;
      value.convert(APFloat::IEEEdouble(), APFloat::rmNearestTiesToEven,
                    &losesInfo);
      values.push_back(value.convertToDouble());
    }
    return Tensor::floats(elementType, type.getShape(), std::move(values));
  }
  if (elementType.isInteger() && elementType.getIntOrFloatBitWidth() <= 64) {
    std::vector<int64_t> values;
    values.reserve(type.getNumElements());
    for (const APInt &value : elements.getValues<APInt>())
      values.push_back(value.getSExtValue());
    return Tensor::ints(elementType, type.getShape(), std::move(values));
  }
  return opError(op, "has elements that are neither float nor integer");
}

namespace {

/// Runs the functions of one module in one precision mode.
class Interpreter {
public:
  explicit Interpreter(const DriverOptions &options)
      : precision(options.precision), options(options) {}

  /// Runs `fn` on `args`, checked against its type.
  llvm::Expected<std::vector<Tensor>> call(func::FuncOp fn,
                                           ArrayRef<Tensor> args);

private:
  /// Runs `fn`'s body once its arguments are checked.
  llvm::Expected<std::vector<Tensor>> runBody(func::FuncOp fn,
                                              ArrayRef<Tensor> args);
  /// Runs one op other than func.return.
  llvm::Expected<Results> runOp(Operation *op, Operands operands);
  /// Gives `t` the declared `type` of its value and, in the F32 mode,
  /// rounds its elements to it.
  void applyType(Tensor &t, Type type) const;

  Precision precision;
  const DriverOptions &options;
  /// The functions being run, to reject recursion (which never ends here).
  SmallVector<Operation *> callStack;
};

} // namespace

/// Whether `t` has the shape of a value of `type`: a ranked tensor type's,
/// or a 0-d integer for `index`.
static bool hasShapeOf(const Tensor &t, Type type) {
  if (static_cast<int64_t>(t.size()) != t.numElements())
    return false;
  if (isa<IndexType>(type))
    return t.rank() == 0 && !t.isFloat();
  auto tensorType = dyn_cast<RankedTensorType>(type);
  return tensorType && t.shape() == tensorType.getShape();
}

void Interpreter::applyType(Tensor &t, Type type) const {
  if (isa<IndexType>(type)) {
    t.setElementType(type);
    return;
  }
  Type elementType = cast<RankedTensorType>(type).getElementType();
  t.setElementType(elementType);
  if (precision != Precision::F32 || !t.isFloat() || elementType.isF64())
    return;
  if (elementType.isF32()) {
    for (double &v : t.f())
      v = static_cast<float>(v);
    return;
  }
  for (double &v : t.f())
    v = roundToElementType(v, elementType);
}

llvm::Expected<std::vector<Tensor>> Interpreter::call(func::FuncOp fn,
                                                      ArrayRef<Tensor> args) {
  if (fn.isExternal())
    return llvm::createStringError("@" + fn.getSymName() + " has no body");
  if (args.size() != fn.getNumArguments())
    return llvm::createStringError(
        "@" + fn.getSymName() + " takes " + llvm::Twine(fn.getNumArguments()) +
        " arguments, got " + llvm::Twine(args.size()));
  for (auto [index, arg] : llvm::enumerate(args))
    if (llvm::Error error = checkArgument(fn, index, arg))
      return std::move(error);
  if (llvm::is_contained(callStack, fn.getOperation()))
    return llvm::createStringError("@" + fn.getSymName() +
                                   " calls itself; the interpreter does not "
                                   "run recursive functions");
  if (!fn.getBody().hasOneBlock())
    return llvm::createStringError("@" + fn.getSymName() +
                                   " has more than one block; the "
                                   "interpreter runs straight-line code");
  // The kernels rely on the invariants the verifiers check.
  if (options.verify)
    if (llvm::Error error = verifyForInterpreter(fn))
      return std::move(error);
  callStack.push_back(fn);
  llvm::Expected<std::vector<Tensor>> results = runBody(fn, args);
  callStack.pop_back();
  return results;
}

llvm::Expected<std::vector<Tensor>>
Interpreter::runBody(func::FuncOp fn, ArrayRef<Tensor> args) {
  DenseMap<Value, Tensor> values;
  for (auto [arg, tensor] : llvm::zip(fn.getArguments(), args)) {
    Tensor &value = values[arg] = tensor;
    applyType(value, arg.getType());
  }
  for (Operation &op : fn.getBody().front()) {
    SmallVector<const Tensor *> operands;
    for (Value operand : op.getOperands())
      operands.push_back(&values.find(operand)->second);
    if (isa<func::ReturnOp>(op)) {
      std::vector<Tensor> results;
      for (const Tensor *operand : operands)
        results.push_back(*operand);
      return results;
    }
    llvm::Expected<Results> results = runOp(&op, operands);
    if (!results)
      return results.takeError();
    if (results->size() != op.getNumResults())
      return opError(&op, "internal error: the kernel gave " +
                              llvm::Twine(results->size()) + " results");
    for (auto [result, tensor] : llvm::zip(op.getResults(), *results)) {
      Type type = result.getType();
      if (!hasShapeOf(tensor, type))
        return opError(&op, "internal error: result #" +
                                llvm::Twine(result.getResultNumber()) +
                                " has shape " + shapeString(tensor.shape()));
      applyType(tensor, type);
      values[result] = std::move(tensor);
    }
  }
  return llvm::createStringError("@" + fn.getSymName() +
                                 " ends without func.return");
}

llvm::Expected<Results> Interpreter::runOp(Operation *op, Operands operands) {
  if (auto callOp = dyn_cast<func::CallOp>(op)) {
    auto callee = SymbolTable::lookupNearestSymbolFrom<func::FuncOp>(
        op, callOp.getCalleeAttr());
    if (!callee)
      return opError(op, "calls @" + callOp.getCallee() +
                             ", which is not a func.func of this module");
    std::vector<Tensor> args;
    for (const Tensor *operand : operands)
      args.push_back(*operand);
    llvm::Expected<std::vector<Tensor>> results = call(callee, args);
    if (!results)
      return opError(op, "failed: " + llvm::toString(results.takeError()));
    return Results(std::make_move_iterator(results->begin()),
                   std::make_move_iterator(results->end()));
  }
  if (auto constant = dyn_cast<arith::ConstantOp>(op)) {
    llvm::Expected<Tensor> tensor = constantTensor(constant);
    if (!tensor)
      return tensor.takeError();
    return Results{std::move(*tensor)};
  }
  if (options.hook && options.hook->handles(op))
    return options.hook->run(op, operands);
  const Kernel *kernel = allKernels().lookup(op);
  if (!kernel)
    return opError(op, "is not supported by the interpreter");
  return (*kernel)(op, operands);
}

llvm::Error verifyForInterpreter(Operation *op) {
  std::string diagnostics;
  ScopedDiagnosticHandler handler(op->getContext(), [&](Diagnostic &diag) {
    llvm::raw_string_ostream os(diagnostics);
    printLocation(os, diag.getLocation());
    os << ": " << diag << "\n";
    return success();
  });
  if (succeeded(verify(op)))
    return llvm::Error::success();
  std::string name = "the module";
  if (auto symbol =
          op->getAttrOfType<StringAttr>(SymbolTable::getSymbolAttrName()))
    name = ("@" + symbol.getValue()).str();
  return llvm::createStringError(name + " does not verify:\n" + diagnostics);
}

llvm::Expected<std::vector<Tensor>> runFunction(func::FuncOp fn,
                                                ArrayRef<Tensor> args,
                                                const DriverOptions &options) {
  return Interpreter(options).call(fn, args);
}

llvm::Expected<std::vector<Tensor>> run(func::FuncOp fn, ArrayRef<Tensor> args,
                                        Precision precision) {
  DriverOptions options;
  options.precision = precision;
  return runFunction(fn, args, options);
}

} // namespace loom::interp
