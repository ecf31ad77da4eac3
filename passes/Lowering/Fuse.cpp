//===- Fuse.cpp - Ops one kernel call can run, as loom.fused --------------===//
//
// --loom-fuse (see Passes.td): matmul epilogues first (a bias add and a
// gelu become part of the matmul's call), then elementwise chains among
// what is left. Both outline a set of ops into a loom.fused standing where
// the last of them stood; the lowerings encode each loom.fused as one
// kernel call (KernelCall.cpp).
//
//===----------------------------------------------------------------------===//

#include "passes/Lowering/Passes.h"

#include "dialects/Loom/LoomDialect.h"
#include "dialects/Loom/LoomOps.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/Builders.h"
#include "mlir/IR/IRMapping.h"
#include "llvm/ADT/SetVector.h"

#include <optional>

#define DEBUG_TYPE "loom-fuse"

using namespace mlir;

namespace loom {
#define GEN_PASS_DEF_LOOMFUSE
#include "passes/Lowering/Passes.h.inc"

namespace {

/// What the fused_elementwise kernel can hold (loom_cpu_kernels.h).
constexpr size_t kMaxChainOps = 64;
constexpr size_t kMaxTensors = 16;

/// A statically shaped f32 or bf16 tensor: what the fused kernels compute
/// on.
bool isFusibleTensor(Type type) {
  auto tensor = dyn_cast<RankedTensorType>(type);
  return tensor && tensor.hasStaticShape() &&
         (tensor.getElementType().isF32() || tensor.getElementType().isBF16());
}

bool allFusibleTensors(Operation *op) {
  return llvm::all_of(op->getOperandTypes(), isFusibleTensor) &&
         llvm::all_of(op->getResultTypes(), isFusibleTensor);
}

/// An op a fused_elementwise program has an instruction for.
bool isChainOp(Operation *op) {
  return isa<AddOp, SubOp, MulOp, DivOp, NegOp, ExpOp, LogOp, SqrtOp, RsqrtOp,
             TanhOp, CastOp, GeluOp, GeluGradOp, SiluOp, SiluGradOp>(op) &&
         op->getNumResults() == 1 && allFusibleTensors(op);
}

/// The values `ops` read from outside them, in first-use order.
SmallVector<Value> externalInputs(ArrayRef<Operation *> ops) {
  llvm::SmallPtrSet<Operation *, 16> members(ops.begin(), ops.end());
  llvm::SetVector<Value> inputs;
  for (Operation *op : ops)
    for (Value operand : op->getOperands())
      if (!members.contains(operand.getDefiningOp()))
        inputs.insert(operand);
  return SmallVector<Value>(inputs.getArrayRef());
}

/// The results of `ops` that an op outside them reads (the function's
/// return included), in op order.
SmallVector<Value> usedOutside(ArrayRef<Operation *> ops) {
  llvm::SmallPtrSet<Operation *, 16> members(ops.begin(), ops.end());
  SmallVector<Value> outputs;
  for (Operation *op : ops)
    for (Value result : op->getResults())
      if (llvm::any_of(result.getUsers(), [&](Operation *user) {
            return !members.contains(user);
          }))
        outputs.push_back(result);
  return outputs;
}

/// Replaces `ops` (ending with the last of them in block order; each
/// erased after the ops that read it) by a loom.fused after that last op,
/// with `inputs` as its block arguments. `fillBody` builds the body from
/// them (at `b`, in the new block) and returns the values it yields for
/// `outputs`, whose uses outside `ops` move to the fused op's results.
FusedOp
outline(ArrayRef<Operation *> ops, ArrayRef<Value> inputs,
        ArrayRef<Value> outputs,
        llvm::function_ref<SmallVector<Value>(OpBuilder &, Block &)> fillBody) {
  Operation *last = ops.back();
  OpBuilder b(last->getContext());
  b.setInsertionPointAfter(last);
  SmallVector<Type> resultTypes;
  for (Value output : outputs)
    resultTypes.push_back(output.getType());
  auto fused = FusedOp::create(b, last->getLoc(), resultTypes, inputs);
  Block *body = b.createBlock(&fused.getBody());
  for (Value input : inputs)
    body->addArgument(input.getType(), input.getLoc());
  YieldOp::create(b, last->getLoc(), fillBody(b, *body));

  llvm::SmallPtrSet<Operation *, 16> members(ops.begin(), ops.end());
  for (auto [index, output] : llvm::enumerate(outputs))
    Value(output).replaceUsesWithIf(
        fused.getResult(index),
        [&](OpOperand &use) { return !members.contains(use.getOwner()); });
  for (Operation *op : llvm::reverse(ops))
    op->erase();
  return fused;
}

/// outline() with the ops cloned as they are, reading the block arguments
/// for the values they read from outside.
FusedOp outlineAsIs(ArrayRef<Operation *> ops, ArrayRef<Value> outputs) {
  SmallVector<Value> inputs = externalInputs(ops);
  return outline(ops, inputs, outputs, [&](OpBuilder &b, Block &body) {
    IRMapping map;
    map.map(inputs, body.getArguments());
    for (Operation *op : ops)
      b.clone(*op, map);
    return llvm::map_to_vector(
        outputs, [&](Value output) { return map.lookup(output); });
  });
}

/// matmul -> add(bias) [-> gelu] into one loom.fused (see Passes.td).
void fuseEpilogues(Block &block) {
  for (MatmulOp matmul : llvm::make_early_inc_range(block.getOps<MatmulOp>())) {
    Value product = matmul.getResult();
    if (!product.hasOneUse() || !allFusibleTensors(matmul))
      continue;
    auto add = dyn_cast<AddOp>(*product.getUsers().begin());
    if (!add || add.getLhs() == add.getRhs())
      continue;
    Value bias = add.getLhs() == product ? add.getRhs() : add.getLhs();
    auto productType = cast<RankedTensorType>(product.getType());
    auto biasType = dyn_cast<RankedTensorType>(bias.getType());
    if (!biasType || biasType.getRank() != 1 || productType.getRank() < 1 ||
        biasType.getDimSize(0) != productType.getShape().back() ||
        biasType.getElementType() != productType.getElementType() ||
        add.getType() != productType ||
        cast<RankedTensorType>(matmul.getLhs().getType()).getElementType() !=
            productType.getElementType())
      continue;

    SmallVector<Operation *> ops = {matmul, add};
    SmallVector<Value> outputs = {add.getResult()};
    // The gelu of the sum, if the sum's other users all come after it.
    GeluOp gelu;
    for (Operation *user : add->getUsers())
      if (auto candidate = dyn_cast<GeluOp>(user))
        if (!gelu || candidate->isBeforeInBlock(gelu))
          gelu = candidate;
    if (gelu && llvm::all_of(add->getUsers(), [&](Operation *user) {
          return user == gelu || gelu->isBeforeInBlock(user);
        })) {
      ops.push_back(gelu);
      bool sumUsedElsewhere = llvm::any_of(
          add->getUsers(), [&](Operation *user) { return user != gelu; });
      if (!sumUsedElsewhere)
        outputs.clear();
      outputs.push_back(gelu.getResult());
    }
    outlineAsIs(ops, outputs);
  }
}

/// A growing elementwise chain.
struct Chain {
  SmallVector<Operation *> ops;
  ArrayRef<int64_t> shape;
  /// Whether an op outside it read one of its values: it cannot move past
  /// that op, so it takes no more ops.
  bool open = true;
};

/// Elementwise chains into loom.fused (see Passes.td).
void fuseChains(Block &block) {
  std::vector<Chain> chains;
  DenseMap<Value, size_t> chainOf;
  for (Operation &op : block) {
    std::optional<size_t> joined;
    if (isChainOp(&op)) {
      auto shape = cast<RankedTensorType>(op.getResult(0).getType()).getShape();
      for (Value operand : op.getOperands()) {
        auto it = chainOf.find(operand);
        if (it == chainOf.end())
          continue;
        Chain &chain = chains[it->second];
        if (chain.open && chain.shape == shape &&
            chain.ops.size() < kMaxChainOps) {
          joined = it->second;
          break;
        }
      }
    }
    // A chain whose value this op reads without joining it stops here.
    for (Value operand : op.getOperands())
      if (auto it = chainOf.find(operand);
          it != chainOf.end() && it->second != joined)
        chains[it->second].open = false;
    if (!isChainOp(&op))
      continue;
    if (!joined) {
      joined = chains.size();
      chains.push_back(
          {{}, cast<RankedTensorType>(op.getResult(0).getType()).getShape()});
    }
    chains[*joined].ops.push_back(&op);
    chainOf[op.getResult(0)] = *joined;
  }

  for (Chain &chain : chains) {
    if (chain.ops.size() < 2)
      continue;
    SmallVector<Value> outputs = usedOutside(chain.ops);
    size_t tensors = externalInputs(chain.ops).size() + outputs.size();
    if (!outputs.empty() && tensors <= kMaxTensors)
      outlineAsIs(chain.ops, outputs);
  }
}

/// Whether two updates share their step and hyperparameters (their only
/// attributes).
bool sameUpdate(AdamWUpdateOp a, AdamWUpdateOp b) {
  return a.getStep() == b.getStep() &&
         a->getAttrDictionary() == b->getAttrDictionary();
}

/// A run of updates into one loom.fused after the last: inputs param,
/// grad, m, v of each, then the step (adamw_update_multi's order); a grad
/// that is a cast read by this update alone comes in uncast, the cast
/// moving inside (the kernels widen a bf16 gradient as they load it).
void outlineUpdates(MutableArrayRef<AdamWUpdateOp> run) {
  SmallVector<Operation *> members;
  SmallVector<Value> inputs, outputs;
  SmallVector<CastOp> casts;
  for (AdamWUpdateOp update : run) {
    auto cast = update.getGrad().getDefiningOp<CastOp>();
    if (cast && (!cast->hasOneUse() || !isFusibleTensor(cast.getX().getType())))
      cast = CastOp();
    if (cast)
      members.push_back(cast);
    members.push_back(update);
    casts.push_back(cast);
    inputs.append({update.getParam(), cast ? cast.getX() : update.getGrad(),
                   update.getM(), update.getV()});
    outputs.append(update->result_begin(), update->result_end());
  }
  inputs.push_back(run.front().getStep());

  outline(members, inputs, outputs, [&](OpBuilder &b, Block &body) {
    SmallVector<Value> yielded;
    Value step = body.getArguments().back();
    for (auto [i, update] : llvm::enumerate(run)) {
      // Each update reads its own four arguments, even where two updates
      // share a value.
      IRMapping map;
      map.map(update.getParam(), body.getArgument(4 * i));
      map.map(update.getM(), body.getArgument(4 * i + 2));
      map.map(update.getV(), body.getArgument(4 * i + 3));
      map.map(update.getStep(), step);
      if (CastOp cast = casts[i]) {
        IRMapping castMap;
        castMap.map(cast.getX(), body.getArgument(4 * i + 1));
        map.map(cast.getResult(), b.clone(*cast, castMap)->getResult(0));
      } else {
        map.map(update.getGrad(), body.getArgument(4 * i + 1));
      }
      Operation *clone = b.clone(*update, map);
      yielded.append(clone->result_begin(), clone->result_end());
    }
    return yielded;
  });
}

/// Consecutive adamw_update ops sharing their step and hyperparameters
/// into one loom.fused each (see Passes.td).
void fuseUpdates(Block &block) {
  SmallVector<AdamWUpdateOp> run;
  auto flush = [&] {
    if (run.size() >= 2)
      outlineUpdates(run);
    run.clear();
  };
  for (Operation &op : llvm::make_early_inc_range(block)) {
    auto update = dyn_cast<AdamWUpdateOp>(op);
    if (!update ||
        !llvm::all_of(update->getOperands().take_front(4),
                      [](Value v) { return isFusibleTensor(v.getType()); })) {
      flush();
      continue;
    }
    if (!run.empty() && !sameUpdate(run.front(), update))
      flush();
    run.push_back(update);
  }
  flush();
}

struct FusePass : impl::LoomFuseBase<FusePass> {
  using LoomFuseBase::LoomFuseBase;

  void runOnOperation() override {
    for (auto fn : getOperation().getOps<func::FuncOp>()) {
      if (!fn.getBody().hasOneBlock())
        continue;
      Block &block = fn.getBody().front();
      if (epilogues)
        fuseEpilogues(block);
      if (elementwise)
        fuseChains(block);
      if (optimizer)
        fuseUpdates(block);
    }
  }
};

} // namespace
} // namespace loom
