//===- LowerToKernels.cpp - Per-device programs to LLVM kernel calls ------===//
//
// The lowering behind --loom-lower-cpu and --loom-lower-cuda: every
// function the runtime calls becomes an LLVM function that walks its ops in
// order, calling one kernel of the target's library per op on buffers
// placed by a static memory plan (see Passes.td).
//
//===----------------------------------------------------------------------===//

#include "passes/Lowering/LowerToKernels.h"
#include "passes/Lowering/KernelCall.h"
#include "passes/Lowering/MemoryPlan.h"

#include "dialects/Loom/LoomDialect.h"
#include "dialects/Loom/LoomOps.h"
#include "loom/Support/Diagnostics.h"
#include "loom/loom_program.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/Dialect/LLVMIR/LLVMDialect.h"
#include "mlir/Dialect/Shard/IR/ShardOps.h"
#include "mlir/IR/Builders.h"
#include "mlir/IR/BuiltinOps.h"
#include "llvm/ADT/DenseMap.h"
#include "llvm/ADT/StringSet.h"

using namespace mlir;

namespace loom::lowering {
namespace {

/// Where a tensor of a compiled function lives.
struct Home {
  enum Kind { Argument, Result, Workspace, Constant } kind;
  int64_t index; ///< argument, result, workspace buffer or constant global
};

/// One kernel call of the lowered function.
struct Step {
  KernelCall call;
  SmallVector<Value> buffers; ///< operands, then results
  /// An upload of constant `uploads` (a device target): its operand is the
  /// constant's host global, its result the device copy (both buffers[0]).
  int64_t upload = -1;
  /// A collective that may start here and be waited for later
  /// (KernelCall.h's splittable): the buffers its transfer uses, which the
  /// wait lists so that the memory plan keeps them (all_reduce's result,
  /// which it reduces in place after copying its operand; else the operand
  /// it sends from and the result). Empty for other calls.
  SmallVector<Value, 2> transferBuffers;
};

int64_t bytesOf(Type type) {
  auto tensor = cast<RankedTensorType>(type);
  int64_t width = std::max<int64_t>(tensor.getElementTypeBitWidth() / 8, 1);
  return tensor.getNumElements() * width;
}

/// Lowers one function: plans its buffers, then emits the LLVM function.
class FunctionLowering {
public:
  FunctionLowering(func::FuncOp fn, const Target &target, GroupTable &groups,
                   llvm::StringMap<LLVM::LLVMFuncOp> &kernels)
      : fn(fn), target(target), groups(groups), kernels(kernels) {}

  LogicalResult run();

private:
  LogicalResult collectSteps();
  void splitCollectives();
  void planBuffers();
  void emit();
  Value resolve(Value value) const {
    auto it = aliases.find(value);
    return it == aliases.end() ? value : it->second;
  }
  LLVM::LLVMFuncOp kernelDecl(OpBuilder &b, StringRef symbol);
  LLVM::GlobalOp metaGlobal(OpBuilder &b, ArrayRef<int64_t> meta);
  LLVM::GlobalOp constantGlobal(OpBuilder &b, DenseElementsAttr value);

  func::FuncOp fn;
  const Target &target;
  GroupTable &groups;
  llvm::StringMap<LLVM::LLVMFuncOp> &kernels;
  SmallVector<Step> steps;
  /// shard.shard results stand for their operand.
  DenseMap<Value, Value> aliases;
  /// The constants in order, with their globals' indices.
  SmallVector<std::pair<Value, DenseElementsAttr>> constants;
  DenseMap<Value, Home> homes;
  /// Results that are copied into place at the end: (result index, value).
  SmallVector<std::pair<unsigned, Value>> resultCopies;
  int64_t workspaceBytes = 0, peakLiveBytes = 0;
  SmallVector<int64_t> workspaceOffsets;
  int64_t globals = 0;
};

LogicalResult FunctionLowering::collectSteps() {
  if (!fn.getBody().hasOneBlock())
    return emitLineError(fn) << target.flag << " needs a function of one block";
  for (Operation &op : fn.getBody().front()) {
    if (isa<func::ReturnOp, shard::ShardingOp>(op))
      continue;
    if (auto shardOp = dyn_cast<shard::ShardOp>(op)) {
      aliases[shardOp.getResult()] = resolve(shardOp.getSrc());
      continue;
    }
    // A reshape is its operand's bytes read at another shape: no call.
    if (auto reshape = dyn_cast<ReshapeOp>(op)) {
      aliases[reshape.getResult()] = resolve(reshape.getX());
      continue;
    }
    if (auto constant = dyn_cast<arith::ConstantOp>(op)) {
      auto value = dyn_cast<DenseElementsAttr>(constant.getValue());
      if (!value || dtypeCode(value.getElementType()) < 0)
        return op.emitOpError() << target.flag
                                << " takes dense tensor constants of f32, "
                                   "f64, bf16, i32 or i64 only";
      constants.push_back({constant.getResult(), value});
      // In device memory, a constant is a value its upload computes.
      if (target.deviceBuffers)
        steps.push_back(
            {copyCall(value.getType(), target, kernels::Kernel::upload),
             {constant.getResult(), constant.getResult()},
             static_cast<int64_t>(constants.size()) - 1,
             {}});
      continue;
    }
    if (isa<func::CallOp>(op))
      return emitLineError(&op)
             << target.flag << " needs the calls inlined (run --inline first)";
    auto call = encodeKernelCall(&op, groups, target);
    if (failed(call))
      return failure();
    Step step{std::move(*call), {}, -1, {}};
    for (Value operand : op.getOperands())
      step.buffers.push_back(resolve(operand));
    step.buffers.append(op.result_begin(), op.result_end());
    if (op.hasAttr(kOverlapAttr)) {
      if (!splittable(&op))
        return op.emitOpError()
               << "is marked " << kOverlapAttr
               << " but its transfer cannot run on its own buffers (an "
                  "all-reduce, or a reduce-scatter / all-gather of contiguous "
                  "member blocks, splits)";
      if (!isa<shard::AllReduceOp>(op))
        step.transferBuffers.push_back(step.buffers[0]);
      step.transferBuffers.push_back(step.buffers[1]);
    }
    steps.push_back(std::move(step));
  }
  return success();
}

void FunctionLowering::splitCollectives() {
  // A transfer in flight: the values its wait lists and its slot.
  struct InFlight {
    SmallVector<Value, 2> buffers;
    int64_t slot;
  };
  SmallVector<InFlight> inFlight;
  SmallVector<bool> busy; // by slot
  SmallVector<Step> split;
  auto wait = [&](const InFlight &transfer) {
    split.push_back(
        {waitCall(ValueRange(transfer.buffers).getTypes(), transfer.slot,
                  target),
         SmallVector<Value>(transfer.buffers.begin(), transfer.buffers.end()),
         -1,
         {}});
    busy[transfer.slot] = false;
  };
  for (Step &step : steps) {
    // Wait for the transfers whose results this call reads, in the order
    // they started.
    unsigned numOperands = step.call.meta[0];
    ArrayRef<Value> operands =
        ArrayRef<Value>(step.buffers).take_front(numOperands);
    auto reads = [&](const InFlight &transfer) {
      return llvm::is_contained(operands, transfer.buffers.back());
    };
    for (const InFlight &transfer : inFlight)
      if (reads(transfer))
        wait(transfer);
    llvm::erase_if(inFlight, reads);
    if (step.transferBuffers.empty()) {
      split.push_back(std::move(step));
      continue;
    }
    // The lowest free slot.
    int64_t slot = llvm::find(busy, false) - busy.begin();
    if (slot == static_cast<int64_t>(busy.size()))
      busy.push_back(false);
    busy[slot] = true;
    setSlot(step.call, slot);
    inFlight.push_back({step.transferBuffers, slot});
    split.push_back(std::move(step));
  }
  // The rest before the function copies its results and returns.
  for (const InFlight &transfer : inFlight)
    wait(transfer);
  steps = std::move(split);
}

void FunctionLowering::planBuffers() {
  for (BlockArgument arg : fn.getArguments())
    homes[arg] = {Home::Argument, arg.getArgNumber()};
  if (!target.deviceBuffers)
    for (auto [index, entry] : llvm::enumerate(constants))
      homes[entry.first] = {Home::Constant, static_cast<int64_t>(index)};

  // A value an op computes is written straight into its first result slot;
  // arguments, constants and repeated values are copied there at the end.
  auto ret = cast<func::ReturnOp>(fn.getBody().front().getTerminator());
  for (auto [index, operand] : llvm::enumerate(ret.getOperands())) {
    Value value = resolve(operand);
    if (!homes.count(value))
      homes[value] = {Home::Result, static_cast<int64_t>(index)};
    else
      resultCopies.push_back({static_cast<unsigned>(index), value});
  }

  // Every other computed value lives in the workspace from its op to its
  // last reader.
  DenseMap<Value, int64_t> bufferOf;
  std::vector<LiveBuffer> live;
  int64_t end = static_cast<int64_t>(steps.size());
  for (auto [index, step] : llvm::enumerate(steps)) {
    int64_t at = static_cast<int64_t>(index);
    unsigned numOperands = step.call.meta[0];
    for (Value operand : ArrayRef<Value>(step.buffers).take_front(numOperands))
      if (auto it = bufferOf.find(operand); it != bufferOf.end())
        live[it->second].last = at;
    for (Value result : ArrayRef<Value>(step.buffers).drop_front(numOperands)) {
      if (homes.count(result))
        continue;
      bufferOf[result] = static_cast<int64_t>(live.size());
      homes[result] = {Home::Workspace, static_cast<int64_t>(live.size())};
      live.push_back({at, at, bytesOf(result.getType())});
    }
  }
  // Values copied into results at the end are read after the last op.
  for (auto [index, value] : resultCopies)
    if (auto it = bufferOf.find(value); it != bufferOf.end())
      live[it->second].last = end;
  MemoryPlan plan = planMemory(live, target.workspaceAlignment);
  workspaceOffsets.assign(plan.offsets.begin(), plan.offsets.end());
  workspaceBytes = plan.workspaceBytes;
  peakLiveBytes = plan.peakLiveBytes;
}

LLVM::LLVMFuncOp FunctionLowering::kernelDecl(OpBuilder &b, StringRef symbol) {
  if (auto it = kernels.find(symbol); it != kernels.end())
    return it->second;
  MLIRContext *ctx = b.getContext();
  auto ptr = LLVM::LLVMPointerType::get(ctx);
  SmallVector<Type> params(target.passesContext ? 4 : 3, ptr);
  auto type = LLVM::LLVMFunctionType::get(IntegerType::get(ctx, 32), params);
  auto decl = LLVM::LLVMFuncOp::create(b, fn.getLoc(), symbol, type);
  kernels[symbol] = decl;
  return decl;
}

LLVM::GlobalOp FunctionLowering::metaGlobal(OpBuilder &b,
                                            ArrayRef<int64_t> meta) {
  auto i64 = b.getI64Type();
  auto type = LLVM::LLVMArrayType::get(i64, meta.size());
  auto value = DenseElementsAttr::get(
      RankedTensorType::get({static_cast<int64_t>(meta.size())}, i64), meta);
  std::string name =
      ("__loom_meta_" + fn.getSymName() + "_" + Twine(globals++)).str();
  return LLVM::GlobalOp::create(b, fn.getLoc(), type, /*isConstant=*/true,
                                LLVM::Linkage::Internal, name, value,
                                /*alignment=*/8);
}

LLVM::GlobalOp FunctionLowering::constantGlobal(OpBuilder &b,
                                                DenseElementsAttr value) {
  auto tensor = cast<RankedTensorType>(value.getType());
  if (value.isSplat())
    value = DenseElementsAttr::get(
        tensor, SmallVector<Attribute>(tensor.getNumElements(),
                                       value.getSplatValue<Attribute>()));
  auto flat = value.reshape(RankedTensorType::get({tensor.getNumElements()},
                                                  tensor.getElementType()));
  auto type = LLVM::LLVMArrayType::get(tensor.getElementType(),
                                       tensor.getNumElements());
  std::string name =
      ("__loom_constant_" + fn.getSymName() + "_" + Twine(globals++)).str();
  return LLVM::GlobalOp::create(b, fn.getLoc(), type, /*isConstant=*/true,
                                LLVM::Linkage::Internal, name, flat,
                                /*alignment=*/64);
}

void FunctionLowering::emit() {
  MLIRContext *ctx = fn.getContext();
  Location loc = fn.getLoc();
  OpBuilder b(fn);
  auto ptr = LLVM::LLVMPointerType::get(ctx);
  auto i32 = b.getI32Type();
  auto i64 = b.getI64Type();

  // Globals and declarations go before the function.
  SmallVector<LLVM::GlobalOp> constantGlobals;
  for (auto &entry : constants)
    constantGlobals.push_back(constantGlobal(b, entry.second));
  SmallVector<LLVM::GlobalOp> metas;
  SmallVector<LLVM::LLVMFuncOp> callees;
  for (Step &step : steps) {
    metas.push_back(metaGlobal(b, step.call.meta));
    callees.push_back(kernelDecl(b, step.call.symbol));
  }
  for (auto [index, value] : resultCopies) {
    KernelCall copy = copyCall(value.getType(), target);
    metas.push_back(metaGlobal(b, copy.meta));
    callees.push_back(kernelDecl(b, copy.symbol));
  }

  SmallVector<Type> params(target.passesContext ? 2 : 1, ptr);
  auto fnType = LLVM::LLVMFunctionType::get(i32, params);
  auto lowered = LLVM::LLVMFuncOp::create(
      b, loc, ("loom_fn_" + fn.getSymName()).str(), fnType);
  Block *entry = lowered.addEntryBlock(b);
  Block *failBlock = new Block();
  failBlock->addArgument(i32, loc);
  b.setInsertionPointToStart(entry);
  Value frame = entry->getArgument(0);
  Value context = target.passesContext ? entry->getArgument(1) : Value();

  // The frame's arrays (loom_call_frame: args, results, workspace).
  auto field = [&](int index) {
    Value address = LLVM::GEPOp::create(b, loc, ptr, ptr, frame,
                                        ArrayRef<LLVM::GEPArg>{index});
    return LLVM::LoadOp::create(b, loc, ptr, address).getResult();
  };
  Value args = field(0), results = field(1), workspace = field(2);
  auto element = [&](Value array, int64_t index) {
    Value address = LLVM::GEPOp::create(
        b, loc, ptr, ptr, array,
        ArrayRef<LLVM::GEPArg>{static_cast<int32_t>(index)});
    return LLVM::LoadOp::create(b, loc, ptr, address).getResult();
  };
  DenseMap<Value, Value> pointers;
  for (BlockArgument arg : fn.getArguments())
    pointers[arg] = element(args, arg.getArgNumber());
  if (!target.deviceBuffers)
    for (auto [index, entryPair] : llvm::enumerate(constants))
      pointers[entryPair.first] =
          LLVM::AddressOfOp::create(b, loc, constantGlobals[index]);
  auto pointerOf = [&](Value value) -> Value {
    if (Value known = pointers.lookup(value))
      return known;
    Home home = homes.lookup(value);
    Value pointer;
    if (home.kind == Home::Result)
      pointer = element(results, home.index);
    else {
      // An i64 index: a constant GEPArg is an int32_t, and workspaces pass
      // 2 GiB (GPT-2 124M at micro-batch 8 needs 4.5 GB).
      Value offset = LLVM::ConstantOp::create(
          b, loc, i64, b.getI64IntegerAttr(workspaceOffsets[home.index]));
      pointer = LLVM::GEPOp::create(b, loc, ptr, b.getI8Type(), workspace,
                                    ArrayRef<LLVM::GEPArg>{offset});
    }
    pointers[value] = pointer;
    return pointer;
  };

  size_t maxBuffers = 2;
  for (Step &step : steps)
    maxBuffers = std::max(maxBuffers, step.buffers.size());
  Value count =
      LLVM::ConstantOp::create(b, loc, i64, b.getI64IntegerAttr(maxBuffers));
  Value slots = LLVM::AllocaOp::create(b, loc, ptr, ptr, count, 8);
  Value zero = LLVM::ConstantOp::create(b, loc, i32, b.getI32IntegerAttr(0));

  // One call: the buffers' pointers into the slots, the kernel, and a
  // branch to the failure exit on a non-zero status.
  auto emitCall = [&](size_t index, ArrayRef<Value> bufferPointers) {
    for (auto [slot, pointer] : llvm::enumerate(bufferPointers)) {
      Value address = LLVM::GEPOp::create(
          b, loc, ptr, ptr, slots,
          ArrayRef<LLVM::GEPArg>{static_cast<int32_t>(slot)});
      LLVM::StoreOp::create(b, loc, pointer, address);
    }
    SmallVector<Value> callArgs = {
        frame, slots, LLVM::AddressOfOp::create(b, loc, metas[index])};
    if (context)
      callArgs.push_back(context);
    Value status =
        LLVM::CallOp::create(b, loc, callees[index], callArgs).getResult();
    Value failed =
        LLVM::ICmpOp::create(b, loc, LLVM::ICmpPredicate::ne, status, zero);
    Block *next = new Block();
    lowered.getBody().push_back(next);
    LLVM::CondBrOp::create(b, loc, failed, failBlock, ValueRange{status}, next,
                           ValueRange{});
    b.setInsertionPointToStart(next);
  };
  for (auto [index, step] : llvm::enumerate(steps)) {
    SmallVector<Value> bufferPointers;
    for (auto [slot, value] : llvm::enumerate(step.buffers))
      bufferPointers.push_back(
          slot == 0 && step.upload >= 0
              ? LLVM::AddressOfOp::create(b, loc, constantGlobals[step.upload])
                    .getResult()
              : pointerOf(value));
    emitCall(index, bufferPointers);
  }
  for (auto [index, copy] : llvm::enumerate(resultCopies))
    emitCall(steps.size() + index,
             {pointerOf(copy.second), element(results, copy.first)});
  LLVM::ReturnOp::create(b, loc, zero);
  lowered.getBody().push_back(failBlock);
  b.setInsertionPointToStart(failBlock);
  LLVM::ReturnOp::create(b, loc, failBlock->getArgument(0));

  // What the runtime needs to call it.
  auto describe = [&](TypeRange types, ArrayAttr attrs) {
    SmallVector<Attribute> entries;
    for (auto [index, type] : llvm::enumerate(types)) {
      Attribute original = attrs ? attrs[index] : Attribute();
      entries.push_back(b.getDictionaryAttr(
          {b.getNamedAttr("type", TypeAttr::get(type)),
           b.getNamedAttr("attrs",
                          original ? original : b.getDictionaryAttr({}))}));
    }
    return b.getArrayAttr(entries);
  };
  lowered->setAttr(kArgsAttr,
                   describe(fn.getArgumentTypes(), fn.getArgAttrsAttr()));
  lowered->setAttr(kResultsAttr,
                   describe(fn.getResultTypes(), fn.getResAttrsAttr()));
  lowered->setAttr(kTargetAttr, b.getStringAttr(target.backend));
  lowered->setAttr(kWorkspaceBytesAttr, b.getI64IntegerAttr(workspaceBytes));
  lowered->setAttr(kPeakLiveBytesAttr, b.getI64IntegerAttr(peakLiveBytes));
  if (Attribute stage = fn->getAttr(kStageFunctionAttr))
    lowered->setAttr(kStageFunctionAttr, stage);
}

LogicalResult FunctionLowering::run() {
  if (failed(collectSteps()))
    return failure();
  splitCollectives();
  // The runtime gathers a result split differently from the argument it
  // feeds next step (ZeRO's updated parameters) over these groups.
  for (unsigned j = 0; j < fn.getNumResults(); ++j)
    if (auto split = fn.getResultAttrOfType<ArrayAttr>(j, kSplitAxesAttr))
      for (Attribute dim : split) {
        SmallVector<int16_t> axes;
        for (Attribute axis : cast<ArrayAttr>(dim))
          axes.push_back(
              static_cast<int16_t>(cast<IntegerAttr>(axis).getInt()));
        if (!axes.empty())
          groups.indexOf(axes);
      }
  planBuffers();
  emit();
  return success();
}

} // namespace

int programAbiVersion() { return LOOM_PROGRAM_ABI_VERSION; }

LogicalResult lowerToKernels(ModuleOp module, const Target &target) {
  // The stage functions of a split step, else @train_step.
  bool pipelined = llvm::any_of(module.getOps<func::FuncOp>(), [](auto fn) {
    return fn->hasAttr(kStageFunctionAttr);
  });
  SmallVector<func::FuncOp> toLower, toDrop;
  for (auto fn : module.getOps<func::FuncOp>()) {
    bool lower = pipelined ? fn->hasAttr(kStageFunctionAttr)
                           : fn.getSymName() == "train_step";
    (lower ? toLower : toDrop).push_back(fn);
  }
  if (toLower.empty())
    return emitLineError(module)
           << target.flag
           << " found nothing to lower: no stage functions "
              "(--loom-split-stages) and no @train_step";
  GroupTable groups;
  llvm::StringMap<LLVM::LLVMFuncOp> kernels;
  for (func::FuncOp fn : toLower) {
    FunctionLowering lowering(fn, target, groups, kernels);
    if (failed(lowering.run()))
      return failure();
  }
  for (func::FuncOp fn : toLower)
    fn.erase();
  for (func::FuncOp fn : toDrop)
    fn.erase();

  OpBuilder b(module.getBodyRegion());
  SmallVector<Attribute> groupAttrs;
  for (const auto &axes : groups.groups())
    groupAttrs.push_back(
        b.getDenseI64ArrayAttr(SmallVector<int64_t>(axes.begin(), axes.end())));
  module->setAttr(kGroupsAttr, b.getArrayAttr(groupAttrs));

  // The contract's version (loom_program.h).
  b.setInsertionPointToEnd(module.getBody());
  Location loc = module.getLoc();
  auto version =
      LLVM::LLVMFuncOp::create(b, loc, "loom_program_abi_version",
                               LLVM::LLVMFunctionType::get(b.getI32Type(), {}));
  b.setInsertionPointToStart(version.addEntryBlock(b));
  Value abi = LLVM::ConstantOp::create(
      b, loc, b.getI32Type(), b.getI32IntegerAttr(programAbiVersion()));
  LLVM::ReturnOp::create(b, loc, abi);
  return success();
}

} // namespace loom::lowering
