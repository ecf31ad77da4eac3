//===- LoomAttributes.cpp - Verifying the loom.* protocol attributes ------===//
//
// The importer, the passes and the executors talk through discardable
// `loom.*` attributes (LoomDialect.h). A pass that reads one trusts its
// type: --loom-split-stages cast a malformed `loom.pipeline` entry, and an
// out-of-range `loom.split_axes` reached the runtime's shard placement. So
// the dialect checks each attribute where it appears, when the IR is
// verified (after parsing and after every pass), before any pass reads it:
//
//   on ops        loom.stage (i64 >= 0), loom.backward (unit, with a
//                 stage), loom.tied_gradient (unit, on loom.add only),
//                 loom.attention_core (unit), loom.mask_split_axes,
//                 loom.mask_grid, loom.mask_micro_batches (>= 1),
//                 loom.partial_axes (distinct axes >= 0), loom.layer
//                 (i64 >= 0)
//   on a module   loom.state (consistent with loom.pipeline and
//                 loom.schedule), loom.pipeline (its whole dictionary),
//                 loom.schedule, loom.groups
//   on functions  loom.stage_function, loom.optimizer, and the lowering's
//                 loom.args, loom.results, loom.workspace_bytes,
//                 loom.peak_live_bytes, loom.target
//   on arguments  loom.name, loom.role (a known role), loom.grad_of,
//   and results   loom.layer (i64 >= 0), loom.value, loom.tied_stages,
//   loom.split_axes (one list
//                 of distinct axes per dimension of a ranked tensor, each
//                 axis on the module's grid when it has one)
//
// Any other `loom.*` name is an error: a misspelt attribute would otherwise
// be ignored silently.
//
//===----------------------------------------------------------------------===//

#include "dialects/Loom/LoomOps.h"

#include "mlir/Dialect/Shard/IR/ShardOps.h"
#include "mlir/Interfaces/FunctionInterfaces.h"

#include "llvm/ADT/SmallSet.h"
#include "llvm/ADT/StringSwitch.h"

using namespace mlir;

namespace loom {
namespace {

constexpr llvm::StringLiteral kRoles[] = {
    "param", "m",          "v",          "step",
    "data",  "loss",       "activation", "activation_grad",
    "saved", "accumulator"};
constexpr llvm::StringLiteral kStageKinds[] = {
    "forward", "backward", "backward_input", "backward_weight", "optimizer"};
constexpr llvm::StringLiteral kRecomputeModes[] = {"none", "selective", "full"};
constexpr llvm::StringLiteral kSchedules[] = {"gpipe", "1f1b",
                                              "interleaved-1f1b", "zb-h1"};

/// An error at `op`'s location that does not print `op`: the error of a
/// module's or a function's attribute would otherwise dump all of it.
InFlightDiagnostic opError(Operation *op) {
  return mlir::emitError(op->getLoc()) << "'" << op->getName() << "' op ";
}

bool isNonNegativeInteger(Attribute attr) {
  // `attr` may be a missing key of a dictionary.
  auto integer = dyn_cast_if_present<IntegerAttr>(attr);
  return integer && integer.getType().isInteger() &&
         !integer.getValue().isNegative();
}

bool isPositiveInteger(Attribute attr) {
  return isNonNegativeInteger(attr) &&
         !cast<IntegerAttr>(attr).getValue().isZero();
}

/// An array of non-negative integers, at most `maxSize` of them.
bool isIndexArray(Attribute attr, size_t maxSize = SIZE_MAX) {
  auto array = dyn_cast<ArrayAttr>(attr);
  return array && array.size() <= maxSize &&
         llvm::all_of(array, isNonNegativeInteger);
}

/// One list of mesh axes per dimension, no axis twice: `[[0], [], [1]]`.
/// Returns the message for an error, or "".
std::string checkSplitAxes(Attribute attr, std::optional<int64_t> rank,
                           std::optional<int64_t> gridAxes) {
  auto lists = dyn_cast<ArrayAttr>(attr);
  if (!lists ||
      !llvm::all_of(lists, [](Attribute list) { return isIndexArray(list); }))
    return "must be an array of arrays of mesh axes, e.g. [[0], [], [1]]";
  if (rank && int64_t(lists.size()) > *rank)
    return std::to_string(lists.size()) +
           " lists of split axes for a tensor of rank " + std::to_string(*rank);
  llvm::SmallSet<int64_t, 4> seen;
  for (Attribute list : lists)
    for (Attribute axis : cast<ArrayAttr>(list)) {
      int64_t a = cast<IntegerAttr>(axis).getInt();
      if (gridAxes && a >= *gridAxes)
        return "mesh axis " + std::to_string(a) +
               " is not an axis of the module's " + std::to_string(*gridAxes) +
               "-axis grid";
      if (!seen.insert(a).second)
        return "mesh axis " + std::to_string(a) + " splits more than once";
    }
  return "";
}

/// The axes of the module's shard.grid, when it has exactly one.
std::optional<int64_t> gridAxesOf(Operation *op) {
  auto module = op->getParentOfType<ModuleOp>();
  if (!module)
    return std::nullopt;
  std::optional<int64_t> axes;
  for (auto grid : module.getOps<shard::GridOp>()) {
    if (axes)
      return std::nullopt;
    axes = grid.getRank();
  }
  return axes;
}

LogicalResult verifyPipeline(Operation *op, DictionaryAttr pipeline) {
  auto fail = [&](const Twine &what) {
    return opError(op) << "`" << kPipelineAttr << "` " << what;
  };
  auto schedule = pipeline.getAs<StringAttr>("schedule");
  if (!schedule || !llvm::is_contained(kSchedules, schedule.getValue()))
    return fail("needs `schedule`: gpipe, 1f1b, interleaved-1f1b or zb-h1");
  for (StringRef key : {"ranks", "virtual_stages", "micro_batches"})
    if (!isPositiveInteger(pipeline.get(key)) ||
        pipeline.getAs<IntegerAttr>(key).getValue().getActiveBits() > 16)
      return fail("needs `" + key + "`, an integer in [1, 65535]");
  int64_t stages = pipeline.getAs<IntegerAttr>("ranks").getInt() *
                   pipeline.getAs<IntegerAttr>("virtual_stages").getInt();
  auto recompute = pipeline.getAs<ArrayAttr>("recompute");
  if (!recompute || int64_t(recompute.size()) != stages ||
      !llvm::all_of(recompute, [](Attribute mode) {
        auto text = dyn_cast<StringAttr>(mode);
        return text && llvm::is_contained(kRecomputeModes, text.getValue());
      }))
    return fail("needs `recompute`: none, selective or full for each of its " +
                Twine(stages) + " stages");
  if (Attribute items = pipeline.get("stage_items");
      items && !isIndexArray(items))
    return fail("has a `stage_items` that is not an array of integers");
  return success();
}

LogicalResult verifyModuleAttribute(ModuleOp module, NamedAttribute attr) {
  StringRef name = attr.getName().getValue();
  Attribute value = attr.getValue();
  if (name == kStateAttr) {
    auto text = dyn_cast<StringAttr>(value);
    std::optional<ModuleState> state;
    if (text)
      state = llvm::StringSwitch<std::optional<ModuleState>>(text.getValue())
                  .Case("pipelined", ModuleState::Pipelined)
                  .Case("partitioned", ModuleState::Partitioned)
                  .Case("split", ModuleState::Split)
                  .Default(std::nullopt);
    if (!state)
      return opError(module) << "`" << kStateAttr
                             << "` must be \"pipelined\", \"partitioned\" or "
                             << "\"split\", not " << value;
    bool pipelined = module->hasAttr(kPipelineAttr),
         scheduled = module->hasAttr(kScheduleAttr);
    if ((*state == ModuleState::Pipelined && (!pipelined || scheduled)) ||
        (*state == ModuleState::Split && !scheduled) ||
        (*state == ModuleState::Partitioned && (pipelined || scheduled)))
      return opError(module)
             << "`" << kStateAttr << "` = " << value
             << " does not match the module: " << (pipelined ? "it has" : "no")
             << " `" << kPipelineAttr << "`, " << (scheduled ? "it has" : "no")
             << " `" << kScheduleAttr << "`";
    return success();
  }
  if (name == kPipelineAttr) {
    auto pipeline = dyn_cast<DictionaryAttr>(value);
    if (!pipeline)
      return opError(module)
             << "`" << kPipelineAttr << "` must be a dictionary";
    return verifyPipeline(module, pipeline);
  }
  if (name == kScheduleAttr) {
    if (!isa<DictionaryAttr>(value))
      return opError(module)
             << "`" << kScheduleAttr << "` must be a dictionary";
    return success();
  }
  if (name == kGroupsAttr) {
    auto groups = dyn_cast<ArrayAttr>(value);
    if (!groups || !llvm::all_of(groups, [](Attribute group) {
          auto axes = dyn_cast<DenseI64ArrayAttr>(group);
          return axes && llvm::all_of(axes.asArrayRef(),
                                      [](int64_t a) { return a >= 0; });
        }))
      return opError(module) << "`loom.groups` must be an array of arrays of "
                                "grid axes";
    return success();
  }
  return opError(module) << "unknown module attribute `" << name << "`";
}

LogicalResult verifyFunctionAttribute(Operation *fn, NamedAttribute attr) {
  StringRef name = attr.getName().getValue();
  Attribute value = attr.getValue();
  auto fail = [&](const Twine &what) {
    return opError(fn) << "`" << name << "` " << what;
  };
  if (name == kStageFunctionAttr) {
    auto dict = dyn_cast<DictionaryAttr>(value);
    auto kind = dict ? dict.getAs<StringAttr>("kind") : StringAttr();
    if (!dict || !isNonNegativeInteger(dict.get("stage")) || !kind ||
        !llvm::is_contained(kStageKinds, kind.getValue()))
      return fail("must be {stage = <i64 >= 0>, kind = forward | backward | "
                  "backward_input | backward_weight | optimizer}");
    return success();
  }
  if (name == kOptimizerAttr) {
    if (!isa<DictionaryAttr>(value))
      return fail("must be a dictionary");
    return success();
  }
  if (name == kArgsAttr || name == kResultsAttr) {
    auto list = dyn_cast<ArrayAttr>(value);
    if (!list || !llvm::all_of(list, [](Attribute entry) {
          auto dict = dyn_cast<DictionaryAttr>(entry);
          return dict && isa_and_nonnull<TypeAttr>(dict.get("type"));
        }))
      return fail("must be an array of {type, attrs} dictionaries");
    return success();
  }
  if (name == kWorkspaceBytesAttr || name == kPeakLiveBytesAttr) {
    if (!isNonNegativeInteger(value))
      return fail("must be a non-negative integer");
    return success();
  }
  if (name == kTargetAttr) {
    if (!isa<StringAttr>(value))
      return fail("must be a string");
    return success();
  }
  return opError(fn) << "unknown function attribute `" << name << "`";
}

/// Attributes of one argument or result of `op` with type `type`.
LogicalResult verifyValueAttribute(Operation *op, Type type,
                                   NamedAttribute attr, StringRef what) {
  StringRef name = attr.getName().getValue();
  Attribute value = attr.getValue();
  auto fail = [&](const Twine &message) {
    return opError(op) << what << ": `" << name << "` " << message;
  };
  if (name == kNameAttr || name == kGradOfAttr || name == kValueKeyAttr) {
    auto text = dyn_cast<StringAttr>(value);
    if (!text || text.getValue().empty())
      return fail("must be a non-empty string");
    return success();
  }
  if (name == kRoleAttr) {
    auto text = dyn_cast<StringAttr>(value);
    if (!text || !llvm::is_contained(kRoles, text.getValue()))
      return fail("must be one of param, m, v, step, data, loss, activation, "
                  "activation_grad, saved, accumulator");
    return success();
  }
  if (name == kLayerAttr) {
    if (!isNonNegativeInteger(value))
      return fail("must be a non-negative integer layer");
    return success();
  }
  if (name == kTiedStagesAttr) {
    if (!isIndexArray(value))
      return fail("must be an array of stage numbers");
    return success();
  }
  if (name == kSplitAxesAttr) {
    auto tensor = dyn_cast<RankedTensorType>(type);
    if (!tensor)
      return fail("is on a value that is not a ranked tensor");
    if (std::string error =
            checkSplitAxes(value, tensor.getRank(), gridAxesOf(op));
        !error.empty())
      return fail(error);
    return success();
  }
  return opError(op) << what << ": unknown attribute `" << name << "`";
}

} // namespace

LogicalResult LoomDialect::verifyOperationAttribute(Operation *op,
                                                    NamedAttribute attr) {
  StringRef name = attr.getName().getValue();
  Attribute value = attr.getValue();
  if (auto module = dyn_cast<ModuleOp>(op))
    return verifyModuleAttribute(module, attr);
  if (isa<FunctionOpInterface>(op))
    return verifyFunctionAttribute(op, attr);
  auto fail = [&](const Twine &what) {
    return opError(op) << "`" << name << "` " << what;
  };
  if (name == kStageAttr) {
    if (!isNonNegativeInteger(value))
      return fail("must be a non-negative integer stage");
    return success();
  }
  if (name == kLayerAttr) {
    if (!isNonNegativeInteger(value))
      return fail("must be a non-negative integer layer");
    return success();
  }
  if (name == kBackwardAttr) {
    if (!isa<UnitAttr>(value) || !op->hasAttr(kStageAttr))
      return fail("must be a unit attribute beside `" + kStageAttr + "`");
    return success();
  }
  if (name == kTiedGradientAttr) {
    if (!isa<UnitAttr>(value) || !isa<AddOp>(op))
      return fail("must be a unit attribute on a loom.add (the sum of a "
                  "tied parameter's gradients)");
    return success();
  }
  if (name == kAttentionCoreAttr) {
    if (!isa<UnitAttr>(value))
      return fail("must be a unit attribute");
    return success();
  }
  if (name == kMaskSplitAxesAttr) {
    if (std::string error = checkSplitAxes(value, std::nullopt, std::nullopt);
        !error.empty())
      return fail(error);
    // Its grid (loom.mask_grid) may be left to the module's only one: the
    // multi-rank interpreter reads it so; the lowering requires it.
    return success();
  }
  if (name == kMaskGridAttr) {
    if (!isa<FlatSymbolRefAttr>(value))
      return fail("must be a grid symbol");
    return success();
  }
  if (name == kMaskMicroBatchesAttr) {
    if (!isPositiveInteger(value))
      return fail("must be a positive integer");
    return success();
  }
  if (name == kOverlapAttr) {
    if (!isa<UnitAttr>(value) ||
        !isa<shard::AllReduceOp, shard::ReduceScatterOp, shard::AllGatherOp>(
            op))
      return fail("must be a unit attribute on a shard.all_reduce, "
                  "reduce_scatter or all_gather");
    return success();
  }
  if (name == kPartialAxesAttr) {
    auto axes = dyn_cast<DenseI64ArrayAttr>(value);
    llvm::SmallSet<int64_t, 4> seen;
    if (!axes || !llvm::all_of(axes.asArrayRef(), [&](int64_t a) {
          return a >= 0 && seen.insert(a).second;
        }))
      return fail("must be an array of distinct mesh axes");
    return success();
  }
  return opError(op) << "unknown attribute `" << name << "`";
}

LogicalResult LoomDialect::verifyRegionArgAttribute(Operation *op,
                                                    unsigned regionIndex,
                                                    unsigned argIndex,
                                                    NamedAttribute attr) {
  Region &region = op->getRegion(regionIndex);
  Type type = argIndex < region.getNumArguments()
                  ? region.getArgument(argIndex).getType()
                  : Type();
  if (auto fn = dyn_cast<FunctionOpInterface>(op);
      fn && argIndex < fn.getNumArguments())
    type = fn.getArgumentTypes()[argIndex];
  return verifyValueAttribute(op, type, attr,
                              ("argument " + Twine(argIndex)).str());
}

LogicalResult LoomDialect::verifyRegionResultAttribute(Operation *op,
                                                       unsigned regionIndex,
                                                       unsigned resultIndex,
                                                       NamedAttribute attr) {
  Type type;
  if (auto fn = dyn_cast<FunctionOpInterface>(op);
      fn && resultIndex < fn.getNumResults())
    type = fn.getResultTypes()[resultIndex];
  return verifyValueAttribute(op, type, attr,
                              ("result " + Twine(resultIndex)).str());
}

//===----------------------------------------------------------------------===//
// The module's state
//===----------------------------------------------------------------------===//

ModuleState getModuleState(ModuleOp module) {
  auto text = module->getAttrOfType<StringAttr>(kStateAttr);
  // Modules written before the state was recorded say it by their
  // pipeline attributes.
  if (!text)
    return module->hasAttr(kScheduleAttr)   ? ModuleState::Split
           : module->hasAttr(kPipelineAttr) ? ModuleState::Pipelined
                                            : ModuleState::Whole;
  return llvm::StringSwitch<ModuleState>(text.getValue())
      .Case("pipelined", ModuleState::Pipelined)
      .Case("partitioned", ModuleState::Partitioned)
      .Case("split", ModuleState::Split)
      .Default(ModuleState::Whole);
}

StringRef stringifyModuleState(ModuleState state) {
  switch (state) {
  case ModuleState::Whole:
    return "whole";
  case ModuleState::Pipelined:
    return "pipelined";
  case ModuleState::Partitioned:
    return "partitioned";
  case ModuleState::Split:
    return "split";
  }
  llvm_unreachable("unknown module state");
}

void setModuleState(ModuleOp module, ModuleState state) {
  if (state == ModuleState::Whole)
    module->removeAttr(kStateAttr);
  else
    module->setAttr(kStateAttr, StringAttr::get(module.getContext(),
                                                stringifyModuleState(state)));
}

llvm::Error checkExecutable(ModuleOp module, ArrayRef<ModuleState> runs,
                            StringRef tool) {
  ModuleState state = getModuleState(module);
  if (llvm::is_contained(runs, state))
    return llvm::Error::success();
  std::string what;
  switch (state) {
  case ModuleState::Pipelined:
    what = "the step is cut into pipeline stages (loom.state = \"pipelined\") "
           "but not split into stage functions and a schedule: run loom-opt "
           "--inline --loom-split-stages on it first";
    break;
  case ModuleState::Partitioned:
    what = "@train_step is one device's program (loom.state = "
           "\"partitioned\"): compile it with loom-compile and run it on its "
           "ranks, or give " +
           tool.str() + " the step before --loom-partition";
    break;
  case ModuleState::Whole:
  case ModuleState::Split:
    what = ("the module's state (" + stringifyModuleState(state) +
            ") is not one " + tool + " runs")
               .str();
    break;
  }
  return llvm::createStringError(llvm::inconvertibleErrorCode(), what);
}

} // namespace loom
