//===- TrainStep.cpp - The calling convention of @train_step -------------===//

#include "loom/Training/TrainStep.h"

#include "dialects/Loom/LoomDialect.h"
#include "dialects/Loom/LoomOps.h"

#include "mlir/Dialect/Shard/IR/ShardOps.h"
#include "mlir/IR/BuiltinTypes.h"
#include "llvm/ADT/SetVector.h"
#include "llvm/ADT/StringExtras.h"

using namespace llvm;
using namespace mlir;

namespace loom {

namespace {

StringRef attrString(func::FuncOp fn, unsigned arg, StringRef name) {
  auto attr = fn.getArgAttrOfType<StringAttr>(arg, name);
  return attr ? attr.getValue() : StringRef();
}

std::string shapeString(ArrayRef<int64_t> shape) {
  return "[" +
         join(map_range(shape, [](int64_t d) { return itostr(d); }), ", ") +
         "]";
}

} // namespace

Expected<TrainStepLayout> analyzeTrainStep(func::FuncOp fn) {
  auto fail = [&](const Twine &message) {
    return createStringError(inconvertibleErrorCode(),
                             "@" + fn.getSymName() + ": " + message);
  };
  TrainStepLayout layout;
  std::optional<unsigned> step, tokens, labels;
  size_t moments = 0;
  for (unsigned i = 0, e = fn.getNumArguments(); i < e; ++i) {
    StringRef role = attrString(fn, i, kRoleAttr);
    StringRef name = attrString(fn, i, kNameAttr);
    auto type = dyn_cast<RankedTensorType>(fn.getArgument(i).getType());
    if (!type)
      return fail("argument " + Twine(i) + " is not a ranked tensor");
    if (role == "param") {
      if (i != layout.params.size())
        return fail("parameter '" + name + "' (argument " + Twine(i) +
                    ") does not precede the other arguments");
      layout.params.push_back(
          {name.str(), SmallVector<int64_t>(type.getShape())});
    } else if (role == "m" || role == "v") {
      ++moments;
    } else if (role == "step") {
      step = i;
    } else if (role == "data" && name == "tokens") {
      tokens = i;
    } else if (role == "data" && name == "labels") {
      labels = i;
    } else {
      return fail("argument " + Twine(i) +
                  " has no known loom.role "
                  "(is this the output of --loom-optimizer?)");
    }
  }
  if (layout.params.empty())
    return fail("no argument has loom.role = \"param\"");
  if (moments != 0 && moments != 2 * layout.params.size())
    return fail("expected one m and one v per parameter");
  if (!step || !tokens || !labels)
    return fail("missing the step, tokens or labels argument");
  layout.hasMoments = moments != 0;
  layout.stepArg = *step;
  layout.tokensArg = *tokens;
  layout.labelsArg = *labels;
  auto tokensType = cast<RankedTensorType>(fn.getArgument(*tokens).getType());
  if (tokensType.getRank() != 2 ||
      tokensType != fn.getArgument(*labels).getType())
    return fail("tokens and labels must both be [micro-batch, sequence]");
  layout.microBatch = tokensType.getDimSize(0);
  layout.seqLen = tokensType.getDimSize(1);
  layout.lossResult = layout.numStateArgs();
  if (fn.getNumResults() != layout.numStateArgs() + 1)
    return fail("expected " + Twine(layout.numStateArgs() + 1) +
                " results (the updated state and the loss)");
  return layout;
}

const CheckpointTensor *findParameter(const Checkpoint &ckpt, StringRef name) {
  if (const CheckpointTensor *tensor = ckpt.find(name))
    return tensor;
  if (name.consume_front("transformer."))
    return ckpt.find(name);
  return nullptr;
}

Expected<std::vector<const CheckpointTensor *>>
bindParameters(ArrayRef<TrainedParam> params, const Checkpoint &ckpt,
               StringRef fileName) {
  std::vector<const CheckpointTensor *> bound;
  for (const TrainedParam &param : params) {
    const CheckpointTensor *tensor = findParameter(ckpt, param.name);
    if (!tensor)
      return createStringError(inconvertibleErrorCode(),
                               fileName + ": no tensor '" + param.name + "'");
    if (!tensor->isFloat())
      return createStringError(inconvertibleErrorCode(),
                               fileName + ": tensor '" + param.name +
                                   "' has dtype " + tensor->dtype +
                                   ", a parameter needs a float dtype");
    if (ArrayRef<int64_t>(tensor->shape) != ArrayRef<int64_t>(param.shape))
      return createStringError(inconvertibleErrorCode(),
                               fileName + ": tensor '" + param.name +
                                   "' has shape " + shapeString(tensor->shape) +
                                   ", the model expects " +
                                   shapeString(param.shape));
    bound.push_back(tensor);
  }
  return bound;
}

SmallVector<Value> embeddingTablesOf(Value ids) {
  SmallVector<Value> tables;
  llvm::SetVector<Value> seen;
  SmallVector<Value> work = {ids};
  auto visit = [&](Value value) {
    if (seen.insert(value))
      work.push_back(value);
  };
  while (!work.empty()) {
    Value value = work.pop_back_val();
    for (OpOperand &use : value.getUses()) {
      Operation *user = use.getOwner();
      if (auto embedding = dyn_cast<EmbeddingOp>(user)) {
        if (use.get() == embedding.getIds())
          tables.push_back(embedding.getTable());
      } else if (auto call = dyn_cast<func::CallOp>(user)) {
        auto callee = SymbolTable::lookupNearestSymbolFrom<func::FuncOp>(
            call, call.getCalleeAttr());
        if (callee && !callee.isExternal() &&
            use.getOperandNumber() < callee.getNumArguments())
          visit(callee.getArgument(use.getOperandNumber()));
      } else if (isa<ReshapeOp, TransposeOp>(user) ||
                 user->getName().getDialectNamespace() == "shard") {
        for (Value result : user->getResults())
          visit(result);
      }
    }
  }
  return tables;
}

std::optional<int64_t> tokenVocabulary(ModuleOp module) {
  SmallVector<int64_t> gridShape;
  for (auto grid : module.getOps<shard::GridOp>())
    gridShape.assign(grid.getShape().begin(), grid.getShape().end());
  // A partitioned step's table argument holds one device's rows; the ids
  // index the whole table.
  auto wholeRows = [&](Value table) {
    int64_t rows = cast<RankedTensorType>(table.getType()).getDimSize(0);
    auto arg = dyn_cast<BlockArgument>(table);
    auto fn = arg ? dyn_cast<func::FuncOp>(arg.getOwner()->getParentOp())
                  : func::FuncOp();
    auto split =
        fn ? fn.getArgAttrOfType<ArrayAttr>(arg.getArgNumber(), kSplitAxesAttr)
           : ArrayAttr();
    if (split && !split.empty())
      for (Attribute axis : cast<ArrayAttr>(split[0]))
        if (int64_t a = cast<IntegerAttr>(axis).getInt();
            a >= 0 && a < static_cast<int64_t>(gridShape.size()))
          rows *= gridShape[a];
    return rows;
  };
  std::optional<int64_t> vocab;
  for (auto fn : module.getOps<func::FuncOp>()) {
    if (fn.isExternal())
      continue;
    for (unsigned i = 0, e = fn.getNumArguments(); i < e; ++i) {
      if (attrString(fn, i, kRoleAttr) != "data" ||
          attrString(fn, i, kNameAttr) != "tokens")
        continue;
      for (Value table : embeddingTablesOf(fn.getArgument(i)))
        vocab = std::min(vocab.value_or(INT64_MAX), wholeRows(table));
    }
  }
  return vocab;
}

} // namespace loom
