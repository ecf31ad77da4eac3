//===- Autodiff.cpp - Reverse-mode differentiation (--loom-autodiff) -----===//
//
// Clones the loss function, then walks its ops from last to first, asking
// each op's gradient rule (GradientOpInterface) for the adjoints of its
// operands and summing the adjoints of values with several uses. The pass
// knows no op by name. The result is one straight-line function: the
// forward ops, then the backward ops, then a return of the loss and the
// argument gradients.
//
// Adjoints that are zero outside adjacent boxes along one dimension (the
// pads of the gradients of slices side by side, as of q, k and v cut from
// one projection) are joined into one concat of the boxes, padded only
// where they leave the value uncovered, instead of summed: GPT-2's
// [B, S, 2304] qkv gradient becomes concat(dq, dk, dv), where three
// zero-filled pads and their sum wrote and read it five times over.
//
//===----------------------------------------------------------------------===//

#include "passes/Autodiff/Autodiff.h"
#include "passes/Autodiff/Passes.h"

#include "dialects/Loom/GradientBuilders.h"
#include "dialects/Loom/LoomDialect.h"
#include "dialects/Loom/LoomOps.h"
#include "loom/Support/Diagnostics.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/IRMapping.h"
#include "llvm/ADT/SetVector.h"

#define DEBUG_TYPE "loom-autodiff"

namespace loom {
#define GEN_PASS_DEF_LOOMAUTODIFF
#include "passes/Autodiff/Passes.h.inc"
} // namespace loom

using namespace mlir;

namespace loom {
namespace {

/// A value that is zero outside one box along `axis`: the box holds
/// `parts` side by side from `low` on.
struct Box {
  SmallVector<Value> parts;
  int64_t axis = -1, low = 0, extent = 0;
};

/// `value` as a Box: a pad whose input fills every dimension of the
/// result but one (its parts the inputs of a concat along that dimension,
/// or the input itself); nothing otherwise.
std::optional<Box> boxOf(Value value) {
  auto pad = value.getDefiningOp<PadOp>();
  if (!pad)
    return std::nullopt;
  ArrayRef<int64_t> inner = pad.getX().getType().getShape(),
                    outer = pad.getType().getShape();
  Box box;
  for (int64_t d = 0; d < static_cast<int64_t>(outer.size()); ++d) {
    if (inner[d] == outer[d])
      continue;
    if (box.axis >= 0)
      return std::nullopt;
    box.axis = d;
  }
  if (box.axis < 0)
    return std::nullopt;
  box.low = pad.getLow()[box.axis];
  box.extent = inner[box.axis];
  auto concat = pad.getX().getDefiningOp<ConcatOp>();
  if (concat && static_cast<int64_t>(concat.getAxis()) == box.axis)
    box.parts.assign(concat.getInputs().begin(), concat.getInputs().end());
  else
    box.parts.push_back(pad.getX());
  return box;
}

/// a + b when both are boxes along one dimension that touch: the concat of
/// their parts, padded where the joined box leaves the value uncovered
/// (built with `b`); nothing otherwise.
Value joinBoxes(OpBuilder &builder, Location loc, Value a, Value b) {
  std::optional<Box> first = boxOf(a), second = boxOf(b);
  if (!first || !second || a.getType() != b.getType() ||
      first->axis != second->axis)
    return {};
  if (second->low + second->extent == first->low)
    std::swap(first, second);
  if (first->low + first->extent != second->low)
    return {};
  SmallVector<Value> parts = first->parts;
  parts.append(second->parts.begin(), second->parts.end());
  Value joined = ConcatOp::create(builder, loc, parts, first->axis);
  auto type = cast<RankedTensorType>(a.getType());
  if (first->low == 0 &&
      first->extent + second->extent == type.getDimSize(first->axis))
    return joined;
  SmallVector<int64_t> low(type.getRank(), 0);
  low[first->axis] = first->low;
  return PadOp::create(builder, loc, type, joined, low);
}

/// The gradient of every value the loss depends on, summed over uses.
class Adjoints {
public:
  explicit Adjoints(OpBuilder &b) : b(b) {}

  Value lookup(Value value) const { return grads.lookup(value); }

  void accumulate(Location loc, Value value, Value grad) {
    Value &slot = grads[value];
    if (!slot) {
      slot = grad;
      return;
    }
    if (Value joined = joinBoxes(b, loc, slot, grad)) {
      for (Value replaced : {slot, grad}) {
        auto pad = replaced.getDefiningOp<PadOp>();
        joinedAway.insert(pad);
        if (auto concat = pad.getX().getDefiningOp<ConcatOp>())
          joinedAway.insert(concat);
      }
      slot = joined;
      return;
    }
    slot = AddOp::create(b, loc, slot, grad).getResult();
  }

  /// Erases the pads and concats that joins replaced, once the backward
  /// pass is built (a gradient rule may hand one value to several
  /// operands, so they live until then).
  void eraseJoinedAway() {
    SmallVector<Operation *> ops = joinedAway.takeVector();
    for (bool erased = true; erased;) {
      erased = false;
      for (Operation *&op : ops)
        if (op && op->use_empty()) {
          op->erase();
          op = nullptr;
          erased = true;
        }
    }
  }

private:
  OpBuilder &b;
  DenseMap<Value, Value> grads;
  llvm::SetVector<Operation *> joinedAway;
};

/// Reports every op the backward pass inserts to the caller's hook, with
/// the forward op being differentiated.
class HookListener : public OpBuilder::Listener {
public:
  explicit HookListener(BackwardOpHook hook) : hook(hook) {}
  Operation *current = nullptr;

  void notifyOperationInserted(Operation *op, OpBuilder::InsertPoint) override {
    if (hook)
      hook(op, current);
  }

private:
  BackwardOpHook hook;
};

/// Checks that `fn` is a loss: one block, one 0-d float result.
LogicalResult verifyLossFunction(func::FuncOp fn) {
  if (fn.isExternal() || !fn.getBody().hasOneBlock())
    return emitLineError(fn) << "--loom-autodiff: '" << fn.getSymName()
                             << "' must have a body of one block";
  ArrayRef<Type> results = fn.getFunctionType().getResults();
  auto loss = results.size() == 1 ? dyn_cast<RankedTensorType>(results[0])
                                  : RankedTensorType();
  if (!loss || loss.getRank() != 0 || !isFloatTensorType(loss))
    return emitLineError(fn)
           << "--loom-autodiff: '" << fn.getSymName()
           << "' must return exactly one 0-d float tensor (the loss)";
  return success();
}

/// Walks the cloned body backwards and returns the argument gradients.
LogicalResult buildBackward(func::FuncOp fn, BackwardOpHook hook) {
  Block &body = fn.getBody().front();
  auto ret = cast<func::ReturnOp>(body.getTerminator());
  Value loss = ret.getOperand(0);
  Location loc = ret.getLoc();

  HookListener listener(hook);
  OpBuilder b(ret, &listener);
  Adjoints adjoints(b);
  adjoints.accumulate(
      loc, loss,
      buildSplat(b, loc, cast<RankedTensorType>(loss.getType()), 1.0));

  SmallVector<Operation *> forward;
  for (Operation &op : body.without_terminator())
    forward.push_back(&op);
  for (Operation *op : llvm::reverse(forward)) {
    SmallVector<Value> resultGrads;
    bool any = false;
    for (Value result : op->getResults()) {
      resultGrads.push_back(adjoints.lookup(result));
      any |= static_cast<bool>(resultGrads.back());
    }
    if (!any)
      continue;
    auto rule = dyn_cast<GradientOpInterface>(op);
    if (!rule)
      return op->emitError() << "--loom-autodiff: no gradient rule for '"
                             << op->getName() << "'";
    listener.current = op;
    SmallVector<Value> operandGrads(op->getNumOperands());
    if (failed(rule.buildOperandGradients(b, resultGrads, operandGrads)))
      return failure();
    for (auto [operand, grad] : llvm::zip(op->getOperands(), operandGrads))
      if (grad && isFloatTensorType(operand.getType()))
        adjoints.accumulate(op->getLoc(), operand, grad);
  }

  listener.current = nullptr;
  SmallVector<Value> results{loss};
  for (BlockArgument arg : body.getArguments()) {
    if (!isFloatTensorType(arg.getType()))
      continue;
    Value grad = adjoints.lookup(arg);
    if (!grad) // The loss does not depend on this argument.
      grad = buildSplat(b, loc, cast<RankedTensorType>(arg.getType()), 0.0);
    results.push_back(grad);
  }
  OpBuilder plain(ret);
  func::ReturnOp::create(plain, loc, results);
  ret.erase();
  adjoints.eraseJoinedAway();
  return success();
}

/// Gives the gradient function its type and names its results.
void setSignature(func::FuncOp fn, func::FuncOp forward) {
  Block &body = fn.getBody().front();
  auto ret = cast<func::ReturnOp>(body.getTerminator());
  fn.setFunctionType(FunctionType::get(fn.getContext(), body.getArgumentTypes(),
                                       ret.getOperandTypes()));
  MLIRContext *ctx = fn.getContext();
  SmallVector<Attribute> resultAttrs{DictionaryAttr::get(ctx)};
  for (BlockArgument arg : body.getArguments()) {
    if (!isFloatTensorType(arg.getType()))
      continue;
    auto name =
        forward.getArgAttrOfType<StringAttr>(arg.getArgNumber(), kNameAttr);
    if (!name)
      name = StringAttr::get(ctx, "arg" + Twine(arg.getArgNumber()));
    // A gradient has its parameter's layer.
    SmallVector<NamedAttribute, 2> attrs{
        NamedAttribute(StringAttr::get(ctx, kGradOfAttr), name)};
    if (Attribute layer = forward.getArgAttr(arg.getArgNumber(), kLayerAttr))
      attrs.push_back(NamedAttribute(StringAttr::get(ctx, kLayerAttr), layer));
    resultAttrs.push_back(DictionaryAttr::get(ctx, attrs));
  }
  fn.setAllResultAttrs(resultAttrs);
}

struct AutodiffPass : impl::LoomAutodiffBase<AutodiffPass> {
  using LoomAutodiffBase::LoomAutodiffBase;

  void runOnOperation() override {
    ModuleOp module = getOperation();
    auto forward = module.lookupSymbol<func::FuncOp>(funcName);
    if (!forward) {
      emitLineError(module)
          << "--loom-autodiff: no function '" << funcName << "'";
      return signalPassFailure();
    }
    std::string name = funcName + "_backward";
    if (module.lookupSymbol(name)) {
      emitLineError(forward)
          << "--loom-autodiff: '" << name << "' already exists";
      return signalPassFailure();
    }

    if (failed(buildGradientFunction(forward, name)))
      return signalPassFailure();
  }
};

} // namespace

FailureOr<func::FuncOp> buildGradientFunction(func::FuncOp forward,
                                              StringRef name,
                                              BackwardOpHook hook) {
  if (failed(verifyLossFunction(forward)))
    return failure();
  OpBuilder b(forward.getContext());
  b.setInsertionPointAfter(forward);
  auto fn = cast<func::FuncOp>(b.clone(*forward));
  fn.setSymName(name);
  if (failed(buildBackward(fn, hook))) {
    fn.erase();
    return failure();
  }
  setSignature(fn, forward);
  return fn;
}

} // namespace loom
