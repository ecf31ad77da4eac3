//===- Fuse.cpp - Ops one kernel call can run, as loom.fused --------------===//
//
// --loom-fuse (see Passes.td): matmul epilogues first (a bias add and a
// gelu become part of the matmul's call), then elementwise chains among
// what is left. Both outline a set of ops into a loom.fused standing where
// the last of them stood; the lowerings encode each loom.fused as one
// kernel call (KernelCall.cpp).
//
//===----------------------------------------------------------------------===//

#include "passes/Transforms/Passes.h"

#include "dialects/Loom/LoomDialect.h"
#include "dialects/Loom/LoomOps.h"
#include "passes/Lowering/KernelCall.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/Builders.h"
#include "mlir/IR/IRMapping.h"
#include "llvm/ADT/SetVector.h"

#include <optional>

#define DEBUG_TYPE "loom-fuse"

using namespace mlir;

namespace loom {
#define GEN_PASS_DEF_LOOMFUSE
#include "passes/Transforms/Passes.h.inc"

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

/// An op a fused_elementwise program has an instruction for (its kernel's
/// row in loom_kernels.def is fusible).
bool isChainOp(Operation *op) {
  return lowering::fusedOpcode(op) >= 0 && op->getNumResults() == 1 &&
         allFusibleTensors(op);
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

/// Replaces `ops` by a loom.fused right after `anchor` (one of them; by
/// default the last of `ops`, which must then be the last in block order),
/// with `inputs` as its block arguments. `fillBody` builds the body from
/// them (at `b`, in the new block) and returns the values it yields for
/// `outputs`, whose uses outside `ops` move to the fused op's results.
FusedOp
outline(ArrayRef<Operation *> ops, ArrayRef<Value> inputs,
        ArrayRef<Value> outputs,
        llvm::function_ref<SmallVector<Value>(OpBuilder &, Block &)> fillBody,
        Operation *anchor = nullptr) {
  Operation *last = anchor ? anchor : ops.back();
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
  // Readers before what they read.
  SmallVector<Operation *> erased(ops);
  llvm::sort(erased,
             [](Operation *a, Operation *b) { return b->isBeforeInBlock(a); });
  for (Operation *op : erased)
    op->erase();
  return fused;
}

/// The op of `ops` after which a loom.fused of them can stand, the latest
/// that works: every value of `inputs` is defined before it, and every
/// reader of `outputs` outside `ops` comes after it. Null when none does.
Operation *anchorFor(ArrayRef<Operation *> ops, ArrayRef<Value> inputs,
                     ArrayRef<Value> outputs) {
  llvm::SmallPtrSet<Operation *, 8> members(ops.begin(), ops.end());
  SmallVector<Operation *> candidates(ops);
  llvm::sort(candidates,
             [](Operation *a, Operation *b) { return b->isBeforeInBlock(a); });
  Block *block = ops.front()->getBlock();
  for (Operation *candidate : candidates) {
    bool inputsReady = llvm::all_of(inputs, [&](Value input) {
      Operation *def = input.getDefiningOp();
      return !def ||
             (!members.contains(def) && def->isBeforeInBlock(candidate));
    });
    bool readersAfter = llvm::all_of(outputs, [&](Value output) {
      return llvm::all_of(output.getUsers(), [&](Operation *user) {
        Operation *inBlock = block->findAncestorOpInBlock(*user);
        return members.contains(user) ||
               (inBlock && candidate->isBeforeInBlock(inBlock));
      });
    });
    if (inputsReady && readersAfter)
      return candidate;
  }
  return nullptr;
}

/// outline() of `ops` after anchorFor's op, the body built by `fillBody`
/// with `inputs` mapped to the block arguments; false (nothing changed)
/// where no op of `ops` can be the anchor.
bool outlineWherePossible(
    ArrayRef<Operation *> ops, ArrayRef<Value> inputs, ArrayRef<Value> outputs,
    llvm::function_ref<SmallVector<Value>(OpBuilder &, IRMapping &)> fillBody) {
  Operation *anchor = anchorFor(ops, inputs, outputs);
  if (!anchor)
    return false;
  outline(
      ops, inputs, outputs,
      [&](OpBuilder &b, Block &body) {
        IRMapping map;
        map.map(inputs, body.getArguments());
        return fillBody(b, map);
      },
      anchor);
  return true;
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

/// The tensor `add` adds to `value` when it has `value`'s type (a
/// residual), other than `value` and `excluded`; null otherwise.
Value residualOf(AddOp add, Value value, ArrayRef<Value> excluded) {
  if (add.getLhs() == add.getRhs() || add.getType() != value.getType())
    return Value();
  Value other = add.getLhs() == value ? add.getRhs() : add.getLhs();
  if (other.getType() != value.getType() || llvm::is_contained(excluded, other))
    return Value();
  return other;
}

/// matmul -> add(bias) [-> gelu | -> add(residual)], or matmul ->
/// add(residual), into one loom.fused (see Passes.td).
void fuseEpilogues(Block &block) {
  for (MatmulOp matmul : llvm::make_early_inc_range(block.getOps<MatmulOp>())) {
    Value product = matmul.getResult();
    // A product of one value with itself would give the body one block
    // argument for both operands, which the kernel call cannot encode.
    if (!product.hasOneUse() || !allFusibleTensors(matmul) ||
        matmul.getLhs() == matmul.getRhs())
      continue;
    auto add = dyn_cast<AddOp>(*product.getUsers().begin());
    auto productType = cast<RankedTensorType>(product.getType());
    if (!add || add.getLhs() == add.getRhs() ||
        cast<RankedTensorType>(matmul.getLhs().getType()).getElementType() !=
            productType.getElementType())
      continue;
    SmallVector<Value> operands = {matmul.getLhs(), matmul.getRhs()};
    if (residualOf(add, product, operands)) {
      outlineAsIs({matmul, add}, {add.getResult()});
      continue;
    }
    Value bias = add.getLhs() == product ? add.getRhs() : add.getLhs();
    auto biasType = dyn_cast<RankedTensorType>(bias.getType());
    if (!biasType || biasType.getRank() != 1 || productType.getRank() < 1 ||
        biasType.getDimSize(0) != productType.getShape().back() ||
        biasType.getElementType() != productType.getElementType() ||
        add.getType() != productType)
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
    } else if (add->hasOneUse()) {
      // A residual added to a sum that nothing else reads.
      operands.push_back(bias);
      auto second = dyn_cast<AddOp>(*add->getUsers().begin());
      if (second && residualOf(second, add.getResult(), operands)) {
        ops.push_back(second);
        outputs = {second.getResult()};
      }
    }
    outlineAsIs(ops, outputs);
  }
}

/// Whether `reduce` sums its operand over every dimension but the last
/// into [n], as a bias gradient does. n = 1 is left alone: the CPU
/// reduce_sum then sums one run in another order than the epilogue's
/// column sums, and the fused step would not keep its bits.
bool sumsRows(ReduceSumOp reduce) {
  auto type = cast<RankedTensorType>(reduce.getX().getType());
  if (reduce.getKeepDims() || type.getRank() < 2 ||
      type.getShape().back() == 1 || !isFusibleTensor(reduce.getX().getType()))
    return false;
  return llvm::equal(reduce.getDims(),
                     llvm::seq<int64_t>(0, type.getRank() - 1));
}

/// The reduce_sum summing `value`'s rows (sumsRows) among its users.
ReduceSumOp rowSumOf(Value value) {
  for (Operation *user : value.getUsers())
    if (auto reduce = dyn_cast<ReduceSumOp>(user))
      if (reduce.getX() == value && sumsRows(reduce))
        return reduce;
  return ReduceSumOp();
}

/// Whether a matmul can take a backward epilogue: f32 or bf16 operands and
/// a result of their element type.
bool takesBackwardEpilogue(MatmulOp matmul) {
  return allFusibleTensors(matmul) &&
         cast<RankedTensorType>(matmul.getLhs().getType()).getElementType() ==
             cast<RankedTensorType>(matmul.getType()).getElementType() &&
         matmul.getLhs() != matmul.getRhs();
}

/// matmul -> gelu_grad(product, pre) whose rows a reduce_sum sums, into one
/// loom.fused with inputs (lhs, rhs, pre) and results (dpre, db): the
/// dgelu_bias_grad epilogue (see Passes.td).
void fuseGeluBiasGrads(Block &block) {
  for (GeluGradOp geluGrad :
       llvm::make_early_inc_range(block.getOps<GeluGradOp>())) {
    auto matmul = geluGrad.getDy().getDefiningOp<MatmulOp>();
    Value pre = geluGrad.getX();
    if (!matmul || !matmul->hasOneUse() || !takesBackwardEpilogue(matmul) ||
        pre.getType() != matmul.getType() || pre == matmul.getLhs() ||
        pre == matmul.getRhs())
      continue;
    ReduceSumOp reduce = rowSumOf(geluGrad.getResult());
    if (!reduce)
      continue;
    SmallVector<Value> inputs = {matmul.getLhs(), matmul.getRhs(), pre};
    outlineWherePossible(
        {matmul, geluGrad, reduce}, inputs,
        {geluGrad.getResult(), reduce.getResult()},
        [&](OpBuilder &b, IRMapping &map) -> SmallVector<Value> {
          b.clone(*matmul, map);
          Value dpre = b.clone(*geluGrad, map)->getResult(0);
          return {dpre, b.clone(*reduce, map)->getResult(0)};
        });
  }
}

/// A reduce_sum of dy's rows beside a matmul whose untransposed rank-2 rhs
/// is dy (or dy reshaped to [rows, n]), as a weight gradient x^T.dy and its
/// bias gradient are, into one loom.fused with inputs (lhs, rhs) and
/// results (product, db): the bias_grad epilogue (see Passes.td).
void fuseBiasGrads(Block &block) {
  for (ReduceSumOp reduce :
       llvm::make_early_inc_range(block.getOps<ReduceSumOp>())) {
    if (!sumsRows(reduce))
      continue;
    Value dy = reduce.getX();
    auto dyType = cast<RankedTensorType>(dy.getType());
    // dy itself, or a reshape of it keeping its last dimension.
    SmallVector<Value> asRhs;
    if (dyType.getRank() == 2)
      asRhs.push_back(dy);
    for (Operation *user : dy.getUsers())
      if (auto reshape = dyn_cast<ReshapeOp>(user)) {
        auto shape = cast<RankedTensorType>(reshape.getType()).getShape();
        if (shape.size() == 2 && shape.back() == dyType.getShape().back())
          asRhs.push_back(reshape.getResult());
      }
    MatmulOp matmul;
    for (Value rhs : asRhs)
      for (Operation *user : rhs.getUsers())
        if (auto candidate = dyn_cast<MatmulOp>(user))
          if (!matmul && candidate.getRhs() == rhs &&
              !candidate.getTransposeRhs() && takesBackwardEpilogue(candidate))
            matmul = candidate;
    if (!matmul || cast<RankedTensorType>(matmul.getType()).getElementType() !=
                       dyType.getElementType())
      continue;
    Value rhs = matmul.getRhs();
    outlineWherePossible(
        {reduce, matmul}, {matmul.getLhs(), rhs},
        {matmul.getResult(), reduce.getResult()},
        [&](OpBuilder &b, IRMapping &map) -> SmallVector<Value> {
          Value product = b.clone(*matmul, map)->getResult(0);
          int64_t rows[] = {0};
          Value db = ReduceSumOp::create(b, reduce.getLoc(), map.lookup(rhs),
                                         rows, /*keepDims=*/false);
          return {product, db};
        });
  }
}

/// A cross_entropy and a cross_entropy_grad of the same logits, labels and
/// token count into one loom.fused with inputs (dloss, logits, labels) and
/// results (loss, dlogits): one cross_entropy_with_grad call (see
/// Passes.td).
void fuseLossGrads(Block &block) {
  for (CrossEntropyGradOp grad :
       llvm::make_early_inc_range(block.getOps<CrossEntropyGradOp>())) {
    CrossEntropyOp loss;
    for (Operation *user : grad.getLogits().getUsers())
      if (auto candidate = dyn_cast<CrossEntropyOp>(user))
        if (!loss && candidate.getLabels() == grad.getLabels() &&
            candidate.getTokenCount() == grad.getTokenCount())
          loss = candidate;
    if (!loss || !isFusibleTensor(grad.getLogits().getType()) ||
        grad.getDloss() == grad.getLogits())
      continue;
    SmallVector<Value> inputs = {grad.getDloss(), grad.getLogits(),
                                 grad.getLabels()};
    outlineWherePossible(
        {loss, grad}, inputs, {loss.getResult(), grad.getResult()},
        [&](OpBuilder &b, IRMapping &map) -> SmallVector<Value> {
          Value lossValue = b.clone(*loss, map)->getResult(0);
          return {lossValue, b.clone(*grad, map)->getResult(0)};
        });
  }
}

/// A norm's backward whose dx a residual add alone reads, as each block's
/// input gradient in a pre-norm transformer is, into one loom.fused with
/// inputs (dy, x, gamma, residual) and results (dx + residual, dgamma[,
/// dbeta]): one layernorm_grad / rmsnorm_grad call that adds the residual
/// as it stores dx (see Passes.td).
void fuseNormGrads(Block &block) {
  // Collected first: an outline erases the add, which may be the next op.
  SmallVector<Operation *> grads;
  for (Operation &op : block)
    if (isa<LayerNormGradOp, RMSNormGradOp>(op) && allFusibleTensors(&op))
      grads.push_back(&op);
  for (Operation *grad : grads) {
    Operation &op = *grad;
    Value dx = op.getResult(0);
    auto add =
        dx.hasOneUse() ? dyn_cast<AddOp>(*dx.getUsers().begin()) : AddOp();
    SmallVector<Value> inputs(op.getOperands());
    Value residual = add ? residualOf(add, dx, inputs) : Value();
    if (!residual || !isFusibleTensor(residual.getType()))
      continue;
    inputs.push_back(residual);
    SmallVector<Value> outputs = {add.getResult()};
    llvm::append_range(outputs, op.getResults().drop_front());
    outlineWherePossible(
        {&op, add}, inputs, outputs,
        [&](OpBuilder &b, IRMapping &map) -> SmallVector<Value> {
          Operation *grad = b.clone(op, map);
          SmallVector<Value> results = {b.clone(*add, map)->getResult(0)};
          llvm::append_range(results, grad->getResults().drop_front());
          return results;
        });
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
      if (epilogues) {
        fuseGeluBiasGrads(block);
        fuseBiasGrads(block);
        fuseEpilogues(block);
      }
      if (losses)
        fuseLossGrads(block);
      if (norms)
        fuseNormGrads(block);
      if (elementwise)
        fuseChains(block);
      if (optimizer)
        fuseUpdates(block);
    }
  }
};

} // namespace
} // namespace loom
