//===- Optimizer.cpp - One training step (--loom-optimizer)
//----------------===//
//
// Wraps the gradient function in @train_step: call it, then update every
// parameter with a fused optimizer op. The parameters are the arguments the
// gradient function returns a gradient for; everything else (tokens,
// labels) passes through, and the dropout step is fed by the update step.
//
//===----------------------------------------------------------------------===//

#include "passes/Optimizer/Passes.h"

#include "dialects/Loom/LoomDialect.h"
#include "dialects/Loom/LoomOps.h"
#include "loom/Support/Diagnostics.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"

#define DEBUG_TYPE "loom-optimizer"

namespace loom {
#define GEN_PASS_DEF_LOOMOPTIMIZER
#include "passes/Optimizer/Passes.h.inc"
} // namespace loom

using namespace mlir;

namespace loom {
namespace {

/// A 0-d integer argument is the dropout step.
bool isStepType(Type type) {
  auto tensor = dyn_cast<RankedTensorType>(type);
  return tensor && tensor.getRank() == 0 &&
         isa<IntegerType>(tensor.getElementType());
}

/// How the arguments of the gradient function map onto @train_step's.
struct Signature {
  SmallVector<unsigned> params; ///< gradient-function args with a gradient
  SmallVector<unsigned> others; ///< tokens, labels, ...
  std::optional<unsigned> step; ///< the dropout step, if any
};

struct OptimizerPass : impl::LoomOptimizerBase<OptimizerPass> {
  using LoomOptimizerBase::LoomOptimizerBase;

  void runOnOperation() override {
    ModuleOp module = getOperation();
    if (failed(checkOptions()))
      return signalPassFailure();
    auto grads = module.lookupSymbol<func::FuncOp>(funcName);
    if (!grads) {
      emitLineError(module) << "--loom-optimizer: no function '" << funcName
                            << "' (run --loom-autodiff first)";
      return signalPassFailure();
    }
    if (module.lookupSymbol("train_step")) {
      emitLineError(grads) << "--loom-optimizer: 'train_step' already exists";
      return signalPassFailure();
    }
    FailureOr<Signature> signature = analyze(grads);
    if (failed(signature))
      return signalPassFailure();
    buildTrainStep(grads, *signature);
  }

private:
  bool isAdamW() const { return kind == "adamw"; }

  LogicalResult checkOptions() {
    ModuleOp module = getOperation();
    auto fail = [&](const Twine &message) {
      return emitLineError(module) << "--loom-optimizer: " << message;
    };
    if (kind != "adamw" && kind != "sgd")
      return fail("unknown kind '" + kind + "' (expected adamw or sgd)");
    if (!(lr >= 0))
      return fail("lr must be non-negative");
    if (!(weightDecay >= 0))
      return fail("weight-decay must be non-negative");
    if (isAdamW() && !(beta1 >= 0 && beta1 < 1 && beta2 >= 0 && beta2 < 1))
      return fail("beta1 and beta2 must be in [0, 1)");
    if (isAdamW() && !(eps > 0))
      return fail("eps must be positive");
    return success();
  }

  /// Finds the parameters: argument i has a gradient when a result names it.
  FailureOr<Signature> analyze(func::FuncOp grads) {
    Signature sig;
    unsigned result = 1; // result 0 is the loss
    for (unsigned i = 0, e = grads.getNumArguments(); i < e; ++i) {
      Type type = grads.getArgument(i).getType();
      if (isFloatTensorType(type)) {
        if (result >= grads.getNumResults() ||
            !grads.getResultAttr(result, kGradOfAttr))
          return emitLineError(grads)
                 << "--loom-optimizer: '" << funcName
                 << "' is not a gradient function: result " << result
                 << " should be the gradient of argument " << i;
        if (!cast<RankedTensorType>(type).getElementType().isF32())
          return emitLineError(grads)
                 << "--loom-optimizer: parameter " << i << " is " << type
                 << "; master weights must be f32 (use a bf16 compute copy)";
        sig.params.push_back(i);
        ++result;
      } else if (isStepType(type) && !sig.step) {
        sig.step = i;
      } else {
        sig.others.push_back(i);
      }
    }
    return sig;
  }

  DictionaryAttr optimizerAttr(Builder &b) {
    SmallVector<NamedAttribute> attrs{
        b.getNamedAttr("kind", b.getStringAttr(kind)),
        b.getNamedAttr("lr", b.getF64FloatAttr(lr))};
    if (isAdamW()) {
      attrs.push_back(b.getNamedAttr("beta1", b.getF64FloatAttr(beta1)));
      attrs.push_back(b.getNamedAttr("beta2", b.getF64FloatAttr(beta2)));
      attrs.push_back(b.getNamedAttr("eps", b.getF64FloatAttr(eps)));
    }
    attrs.push_back(
        b.getNamedAttr("weight_decay", b.getF64FloatAttr(weightDecay)));
    return b.getDictionaryAttr(attrs);
  }

  void buildTrainStep(func::FuncOp grads, const Signature &sig) {
    MLIRContext *ctx = grads.getContext();
    OpBuilder b(ctx);
    Location loc = grads.getLoc();

    // Argument list: params, [m, v,] step, others.
    Type stepType = sig.step ? grads.getArgument(*sig.step).getType()
                             : RankedTensorType::get({}, b.getI64Type());
    SmallVector<Type> argTypes;
    SmallVector<DictionaryAttr> argAttrs;
    // A parameter's moments and updated value keep its name and layer.
    auto addArg = [&](Type type, StringRef role, StringAttr name,
                      Attribute layer = {}) {
      SmallVector<NamedAttribute> attrs{
          b.getNamedAttr(kRoleAttr, b.getStringAttr(role))};
      if (name)
        attrs.push_back(b.getNamedAttr(kNameAttr, name));
      if (layer)
        attrs.push_back(b.getNamedAttr(kLayerAttr, layer));
      argTypes.push_back(type);
      argAttrs.push_back(b.getDictionaryAttr(attrs));
    };
    auto paramName = [&](unsigned arg) {
      return grads.getArgAttrOfType<StringAttr>(arg, kNameAttr);
    };
    SmallVector<StringRef> groups{"param"};
    if (isAdamW())
      groups.append({"m", "v"});
    for (StringRef role : groups)
      for (unsigned arg : sig.params)
        addArg(grads.getArgument(arg).getType(), role, paramName(arg),
               grads.getArgAttr(arg, kLayerAttr));
    addArg(stepType, "step", b.getStringAttr("step"));
    for (unsigned arg : sig.others)
      addArg(grads.getArgument(arg).getType(), "data", paramName(arg));

    SmallVector<Type> resultTypes;
    SmallVector<DictionaryAttr> resultAttrs;
    // The updated state comes back with the roles and names it came in with.
    for (size_t i = 0, e = groups.size() * sig.params.size(); i < e; ++i) {
      resultTypes.push_back(argTypes[i]);
      resultAttrs.push_back(argAttrs[i]);
    }
    resultTypes.push_back(grads.getResultTypes()[0]);
    resultAttrs.push_back(b.getDictionaryAttr(
        b.getNamedAttr(kRoleAttr, b.getStringAttr("loss"))));

    b.setInsertionPointAfter(grads);
    auto fn = func::FuncOp::create(b, loc, "train_step",
                                   b.getFunctionType(argTypes, resultTypes));
    fn.setAllArgAttrs(argAttrs);
    fn.setAllResultAttrs(resultAttrs);
    fn->setAttr(kOptimizerAttr, optimizerAttr(b));
    Block *entry = fn.addEntryBlock();
    b.setInsertionPointToStart(entry);

    size_t numParams = sig.params.size();
    auto input = [&](size_t group, size_t i) {
      return entry->getArgument(group * numParams + i);
    };
    Value step = entry->getArgument(groups.size() * numParams);

    // Call the gradient function with its arguments in their places.
    SmallVector<Value> callArgs(grads.getNumArguments());
    for (auto [i, arg] : llvm::enumerate(sig.params))
      callArgs[arg] = input(0, i);
    if (sig.step)
      callArgs[*sig.step] = step;
    for (auto [i, arg] : llvm::enumerate(sig.others))
      callArgs[arg] = entry->getArgument(groups.size() * numParams + 1 + i);
    auto call = func::CallOp::create(b, loc, grads, callArgs);

    SmallVector<Value> newParams, newM, newV;
    for (size_t i = 0; i < numParams; ++i) {
      Value param = input(0, i), grad = call.getResult(1 + i);
      if (!isAdamW()) {
        newParams.push_back(SGDUpdateOp::create(
            b, loc, param.getType(), param, grad, b.getF64FloatAttr(lr),
            b.getF64FloatAttr(weightDecay)));
        continue;
      }
      auto update = AdamWUpdateOp::create(
          b, loc, param.getType(), param.getType(), param.getType(), param,
          grad, input(1, i), input(2, i), step, b.getF64FloatAttr(lr),
          b.getF64FloatAttr(beta1), b.getF64FloatAttr(beta2),
          b.getF64FloatAttr(eps), b.getF64FloatAttr(weightDecay));
      newParams.push_back(update.getNewParam());
      newM.push_back(update.getNewM());
      newV.push_back(update.getNewV());
    }
    SmallVector<Value> results(newParams);
    llvm::append_range(results, newM);
    llvm::append_range(results, newV);
    results.push_back(call.getResult(0));
    func::ReturnOp::create(b, loc, results);
  }
};

} // namespace
} // namespace loom
