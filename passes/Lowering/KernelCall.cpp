//===- KernelCall.cpp - How an op calls its kernel ------------------------===//
//
// The encoding of runtime/include/loom/loom_cpu_kernels.h, which
// loom_cuda_kernels.h shares: operands and results (dtype, rank, dims),
// then the attributes of the kernel's row of loom/loom_kernels.def, filled
// from the op's typed accessors into runtime/common/KernelAttrs.h's struct
// and written by the visitor the kernels decode it with.
//
//===----------------------------------------------------------------------===//

#include "passes/Lowering/KernelCall.h"

#include "dialects/Loom/LoomDialect.h"
#include "dialects/Loom/LoomOps.h"
#include "loom/loom_cpu_kernels.h"

#include "KernelAttrs.h"

#include "mlir/Dialect/Shard/IR/ShardOps.h"
#include "mlir/IR/BuiltinAttributes.h"
#include "mlir/IR/BuiltinOps.h"
#include "mlir/IR/BuiltinTypes.h"
#include "mlir/IR/SymbolTable.h"
#include "llvm/ADT/TypeSwitch.h"
#include "llvm/Support/MathExtras.h"

using namespace mlir;

namespace loom::lowering {

using kernels::Attrs;
using kernels::Kernel;

int64_t GroupTable::indexOf(ArrayRef<int16_t> axes) {
  for (auto [index, group] : llvm::enumerate(list))
    if (ArrayRef<int16_t>(group) == axes)
      return static_cast<int64_t>(index);
  list.emplace_back(axes.begin(), axes.end());
  return static_cast<int64_t>(list.size()) - 1;
}

int64_t dtypeCode(Type elementType) {
  if (elementType.isF32())
    return 0;
  if (elementType.isF64())
    return 1;
  if (elementType.isInteger(32))
    return 2;
  if (elementType.isInteger(64))
    return 3;
  if (elementType.isBF16())
    return 4;
  return -1;
}

namespace {

/// A tensor's description in a meta: its loom_dtype, rank and shape.
void describe(SmallVectorImpl<int64_t> &meta, RankedTensorType type) {
  meta.push_back(dtypeCode(type.getElementType()));
  meta.push_back(type.getRank());
  meta.append(type.getShape().begin(), type.getShape().end());
}

/// Appends to a meta array; fails (after a diagnostic at the op) on what the
/// kernels cannot take.
class MetaWriter {
public:
  MetaWriter(Operation *op, const Target &target,
             SmallVectorImpl<int64_t> &meta)
      : op(op), target(target), meta(meta) {}

  LogicalResult tensor(Type type) {
    auto ranked = dyn_cast<RankedTensorType>(type);
    if (!ranked || !ranked.hasStaticShape())
      return op->emitOpError()
             << target.flag << " needs statically shaped tensors, not " << type;
    int64_t code = dtypeCode(ranked.getElementType());
    // bf16 is code 4; without bf16 kernels, only the collectives move it.
    if (code < 0 || (code == 4 && !target.bf16Arithmetic &&
                     !isa<shard::ShardDialect>(op->getDialect())))
      return op->emitOpError()
             << target.flag << " has no " << target.library
             << " kernel for element type " << ranked.getElementType();
    if (ranked.getRank() > 8) // kMaxRank of the kernels' KernelArgs
      return op->emitOpError()
             << target.flag << " takes tensors of rank 8 at most, not "
             << ranked.getRank();
    describe(meta, ranked);
    return success();
  }
  void integer(int64_t value) { meta.push_back(value); }
  void real(double value) {
    meta.push_back(static_cast<int64_t>(llvm::bit_cast<uint64_t>(value)));
  }
  template <typename T> void array(ArrayRef<T> values) {
    meta.push_back(static_cast<int64_t>(values.size()));
    for (T value : values)
      meta.push_back(static_cast<int64_t>(value));
  }

  /// Writes kernel K's attributes in its row's order.
  template <Kernel K> void attrs(Attrs<K> values) {
    kernels::appendAttrs<K>(meta, values);
  }

  /// The mask block of a dropout site whose masked tensor has `rank` dims.
  LogicalResult mask(int64_t rank) {
    auto microBatches = op->getAttrOfType<IntegerAttr>(kMaskMicroBatchesAttr);
    integer(microBatches ? microBatches.getInt() : 1);
    auto splitAxes = op->getAttrOfType<ArrayAttr>(kMaskSplitAxesAttr);
    if (!splitAxes) {
      integer(0);
      return success();
    }
    // The partitioner names the grid; without the name, the module's only
    // grid (as the interpreter takes the running rank's).
    auto gridRef = op->getAttrOfType<FlatSymbolRefAttr>(kMaskGridAttr);
    shard::GridOp grid;
    if (gridRef)
      grid = SymbolTable::lookupNearestSymbolFrom<shard::GridOp>(op, gridRef);
    else if (auto module = op->getParentOfType<ModuleOp>())
      if (auto grids = module.getOps<shard::GridOp>();
          std::distance(grids.begin(), grids.end()) == 1)
        grid = *grids.begin();
    if (!grid || llvm::any_of(grid.getShape(), ShapedType::isDynamic))
      return op->emitOpError("has ")
             << kMaskSplitAxesAttr << " without a static " << kMaskGridAttr;
    array(grid.getShape()); // G, then the grid's shape
    for (int64_t dim = 0; dim < rank; ++dim) {
      SmallVector<int64_t> axes;
      if (dim < static_cast<int64_t>(splitAxes.size()))
        for (Attribute axis : cast<ArrayAttr>(splitAxes[dim]))
          axes.push_back(cast<IntegerAttr>(axis).getInt());
      array(ArrayRef<int64_t>(axes));
    }
    return success();
  }

  const Target &getTarget() const { return target; }

private:
  Operation *op;
  const Target &target;
  SmallVectorImpl<int64_t> &meta;
};

/// A view of `values` for an array field (they must outlive the write).
kernels::AttrArray arrayOf(ArrayRef<int64_t> values) {
  return {values.data(), static_cast<int64_t>(values.size())};
}

/// The attributes of attention or attention_grad (rows of the same
/// fields): the dropout ones 0 when the op has none.
template <Kernel K, typename AttentionLike>
Attrs<K> attentionAttrs(AttentionLike op) {
  Attrs<K> attrs;
  attrs.causal = op.getCausal();
  attrs.scale = op.getScale().convertToDouble();
  attrs.has_step = static_cast<bool>(op.getStep());
  std::optional<APFloat> rate = op.getDropoutRate();
  attrs.dropout_rate = rate ? rate->convertToDouble() : 0.0;
  attrs.dropout_seed = static_cast<int64_t>(op.getDropoutSeed().value_or(0));
  attrs.dropout_key = static_cast<int64_t>(op.getDropoutKey().value_or(0));
  // The mask block follows for the dropout masks of a step and, on a shard
  // of the sequence, for its queries' global positions (the causal mask).
  attrs.has_positions = attrs.has_step || op->hasAttr(kMaskSplitAxesAttr);
  return attrs;
}

/// The attributes of rope or rope_grad (rows of the same fields): Llama
/// 3.1's frequency scaling (factor 0 without it), and whether the op is a
/// shard of the sequence, whose rows rotate by their global positions.
template <Kernel K, typename RopeLike> Attrs<K> ropeAttrs(RopeLike op) {
  auto orZero = [](std::optional<APFloat> value) {
    return value ? value->convertToDouble() : 0.0;
  };
  Attrs<K> attrs;
  attrs.theta = op.getTheta().convertToDouble();
  attrs.scaling_factor = orZero(op.getScalingFactor());
  attrs.low_freq_factor = orZero(op.getLowFreqFactor());
  attrs.high_freq_factor = orZero(op.getHighFreqFactor());
  attrs.original_max_positions = orZero(op.getOriginalMaxPositions());
  attrs.has_positions = op->hasAttr(kMaskSplitAxesAttr);
  return attrs;
}

/// The loom_reduction of a shard reduction kind, or -1.
int64_t reductionCode(shard::ReductionKind kind) {
  switch (kind) {
  case shard::ReductionKind::Sum:
    return 0;
  case shard::ReductionKind::Max:
    return 1;
  case shard::ReductionKind::Min:
    return 2;
  default:
    return -1;
  }
}

/// The number of members of the group of `axes` on the grid of `op`.
FailureOr<int64_t> groupMembers(Operation *op, const Target &target,
                                FlatSymbolRefAttr gridRef,
                                ArrayRef<int16_t> axes,
                                SmallVectorImpl<int64_t> *sizes = nullptr) {
  auto grid = SymbolTable::lookupNearestSymbolFrom<shard::GridOp>(op, gridRef);
  if (!grid || llvm::any_of(grid.getShape(), ShapedType::isDynamic))
    return op->emitOpError() << target.flag << " needs a grid of static shape";
  int64_t members = 1;
  for (int16_t axis : axes) {
    members *= grid.getShape()[axis];
    if (sizes)
      sizes->push_back(grid.getShape()[axis]);
  }
  return members;
}

LogicalResult noKernel(Operation *op, const Target &target) {
  return op->emitOpError() << "has no " << target.library << " kernel ("
                           << target.flag << ")";
}

/// Writes the attributes of a collective; its kernel, or failure on an
/// unsupported one.
FailureOr<Kernel> writeCollective(Operation *op, MetaWriter &w,
                                  GroupTable &groups) {
  const Target &target = w.getTarget();
  auto reduction = [&](shard::ReductionKind kind) -> FailureOr<int64_t> {
    int64_t code = reductionCode(kind);
    if (code < 0)
      return op->emitOpError()
             << target.flag << " supports the sum, max and min reductions, not "
             << shard::stringifyReductionKind(kind);
    return code;
  };
  // The number of members of the collective's group.
  auto members = [&](auto o) {
    return groupMembers(op, target, o.getGridAttr(), o.getGridAxes());
  };
  return llvm::TypeSwitch<Operation *, FailureOr<Kernel>>(op)
      .Case([&](shard::AllReduceOp o) -> FailureOr<Kernel> {
        FailureOr<int64_t> code = reduction(o.getReduction());
        if (failed(code))
          return failure();
        w.attrs<Kernel::all_reduce>(
            {groups.indexOf(o.getGridAxes()), *code, kBlockingSlot});
        return Kernel::all_reduce;
      })
      .Case([&](shard::ReduceScatterOp o) -> FailureOr<Kernel> {
        FailureOr<int64_t> code = reduction(o.getReduction());
        if (failed(code))
          return failure();
        FailureOr<int64_t> count = members(o);
        if (failed(count))
          return failure();
        w.attrs<Kernel::reduce_scatter>(
            {groups.indexOf(o.getGridAxes()), *code, *count,
             o.getScatterAxis().getSExtValue(), kBlockingSlot});
        return Kernel::reduce_scatter;
      })
      .Case([&](shard::AllGatherOp o) -> FailureOr<Kernel> {
        FailureOr<int64_t> count = members(o);
        if (failed(count))
          return failure();
        w.attrs<Kernel::all_gather>({groups.indexOf(o.getGridAxes()), *count,
                                     o.getGatherAxis().getSExtValue(),
                                     kBlockingSlot});
        return Kernel::all_gather;
      })
      .Case([&](shard::AllToAllOp o) -> FailureOr<Kernel> {
        FailureOr<int64_t> count = members(o);
        if (failed(count))
          return failure();
        w.attrs<Kernel::all_to_all>({groups.indexOf(o.getGridAxes()), *count,
                                     o.getSplitAxis().getSExtValue(),
                                     o.getConcatAxis().getSExtValue()});
        return Kernel::all_to_all;
      })
      .Case([&](shard::AllSliceOp o) -> FailureOr<Kernel> {
        SmallVector<int64_t> sizes;
        if (failed(groupMembers(op, target, o.getGridAttr(), o.getGridAxes(),
                                &sizes)))
          return failure();
        SmallVector<int64_t> axes(o.getGridAxes().begin(),
                                  o.getGridAxes().end());
        w.attrs<Kernel::all_slice>({groups.indexOf(o.getGridAxes()),
                                    o.getSliceAxis().getSExtValue(),
                                    arrayOf(axes), arrayOf(sizes)});
        return Kernel::all_slice;
      })
      .Default([&](Operation *) { return noKernel(op, w.getTarget()); });
}

/// The kernel of an op without attributes: the row of its name.
FailureOr<Kernel> kernelOf(Operation *op, const Target &target) {
  Kernel kernel;
  std::string name = op->getName().stripDialect().str();
  if (!kernels::kernelNamed(name.c_str(), kernel) ||
      (!kernels::onCpu(kernel) && !target.deviceBuffers))
    return noKernel(op, target);
  if (kernels::attrCount(kernel) != 0)
    return op->emitOpError() << "has attributes that " << target.flag
                             << " does not know how to pass to its kernel";
  return kernel;
}

/// Writes the attributes of a loom op (read through its typed accessors);
/// its kernel, or failure on an op with no kernel.
FailureOr<Kernel> writeLoomAttributes(Operation *op, MetaWriter &w) {
  using Result = FailureOr<Kernel>;
  auto masked = [&](Kernel kernel, bool hasMask, Value masked) -> Result {
    if (hasMask &&
        failed(w.mask(cast<RankedTensorType>(masked.getType()).getRank())))
      return failure();
    return kernel;
  };
  return llvm::TypeSwitch<Operation *, Result>(op)
      .Case([&](MatmulOp o) {
        w.attrs<Kernel::matmul>(
            {o.getTransposeLhs(), o.getTransposeRhs(), LOOM_EPILOGUE_NONE});
        return Kernel::matmul;
      })
      .Case([&](LayerNormOp o) {
        w.attrs<Kernel::layernorm>({o.getEpsilon().convertToDouble()});
        return Kernel::layernorm;
      })
      .Case([&](LayerNormGradOp o) {
        w.attrs<Kernel::layernorm_grad>({o.getEpsilon().convertToDouble()});
        return Kernel::layernorm_grad;
      })
      .Case([&](RMSNormOp o) {
        w.attrs<Kernel::rmsnorm>({o.getEpsilon().convertToDouble()});
        return Kernel::rmsnorm;
      })
      .Case([&](RMSNormGradOp o) {
        w.attrs<Kernel::rmsnorm_grad>({o.getEpsilon().convertToDouble()});
        return Kernel::rmsnorm_grad;
      })
      .Case([&](SoftmaxOp o) {
        w.attrs<Kernel::softmax>({o.getCausal()});
        return Kernel::softmax;
      })
      .Case([&](RopeOp o) {
        auto attrs = ropeAttrs<Kernel::rope>(o);
        w.attrs<Kernel::rope>(attrs);
        return masked(Kernel::rope, attrs.has_positions, o.getX());
      })
      .Case([&](RopeGradOp o) {
        auto attrs = ropeAttrs<Kernel::rope_grad>(o);
        w.attrs<Kernel::rope_grad>(attrs);
        return masked(Kernel::rope_grad, attrs.has_positions, o.getDy());
      })
      .Case([&](AttentionOp o) {
        auto attrs = attentionAttrs<Kernel::attention>(o);
        w.attrs<Kernel::attention>(attrs);
        return masked(Kernel::attention, attrs.has_positions, o.getQ());
      })
      .Case([&](AttentionGradOp o) {
        auto attrs = attentionAttrs<Kernel::attention_grad>(o);
        w.attrs<Kernel::attention_grad>(attrs);
        return masked(Kernel::attention_grad, attrs.has_positions, o.getQ());
      })
      .Case([&](CrossEntropyOp o) {
        w.attrs<Kernel::cross_entropy>(
            {static_cast<int64_t>(o.getTokenCount().value_or(0))});
        return Kernel::cross_entropy;
      })
      .Case([&](CrossEntropyGradOp o) {
        w.attrs<Kernel::cross_entropy_grad>(
            {static_cast<int64_t>(o.getTokenCount().value_or(0))});
        return Kernel::cross_entropy_grad;
      })
      .Case([&](ReduceSumOp o) {
        w.attrs<Kernel::reduce_sum>({arrayOf(o.getDims()), o.getKeepDims()});
        return Kernel::reduce_sum;
      })
      .Case([&](ReduceMeanOp o) {
        w.attrs<Kernel::reduce_mean>({arrayOf(o.getDims()), o.getKeepDims()});
        return Kernel::reduce_mean;
      })
      .Case([&](ReduceMaxOp o) {
        w.attrs<Kernel::reduce_max>({arrayOf(o.getDims()), o.getKeepDims()});
        return Kernel::reduce_max;
      })
      .Case([&](ReduceMaxGradOp o) {
        w.attrs<Kernel::reduce_max_grad>(
            {arrayOf(o.getDims()), o.getKeepDims()});
        return Kernel::reduce_max_grad;
      })
      .Case([&](TransposeOp o) {
        w.attrs<Kernel::transpose>({arrayOf(o.getPermutation())});
        return Kernel::transpose;
      })
      .Case([&](SliceOp o) {
        w.attrs<Kernel::slice>({arrayOf(o.getOffsets())});
        return Kernel::slice;
      })
      .Case([&](PadOp o) {
        w.attrs<Kernel::pad>({arrayOf(o.getLow())});
        return Kernel::pad;
      })
      .Case([&](ConcatOp o) {
        w.attrs<Kernel::concat>({static_cast<int64_t>(o.getAxis())});
        return Kernel::concat;
      })
      .Case([&](DropoutOp o) {
        w.attrs<Kernel::dropout>({o.getRate().convertToDouble(),
                                  static_cast<int64_t>(o.getSeed()),
                                  static_cast<int64_t>(o.getKey())});
        return masked(Kernel::dropout, true, o.getX());
      })
      .Case([&](DropoutGradOp o) {
        w.attrs<Kernel::dropout_grad>({o.getRate().convertToDouble(),
                                       static_cast<int64_t>(o.getSeed()),
                                       static_cast<int64_t>(o.getKey())});
        return masked(Kernel::dropout_grad, true, o.getDy());
      })
      .Case([&](AdamWUpdateOp o) {
        w.attrs<Kernel::adamw_update>(
            {o.getLr().convertToDouble(), o.getBeta1().convertToDouble(),
             o.getBeta2().convertToDouble(), o.getEps().convertToDouble(),
             o.getWeightDecay().convertToDouble()});
        return Kernel::adamw_update;
      })
      .Case([&](SGDUpdateOp o) {
        w.attrs<Kernel::sgd_update>({o.getLr().convertToDouble(),
                                     o.getWeightDecay().convertToDouble()});
        return Kernel::sgd_update;
      })
      .Default([&](Operation *) { return kernelOf(op, w.getTarget()); });
}

/// A body the kernels cannot run.
FailureOr<Kernel> unsupportedBody(FusedOp fused, const Target &target) {
  return fused.emitOpError()
         << "has no " << target.library << " kernel for its body ("
         << target.flag
         << " runs a matmul with one of its epilogues, a loss with its "
            "gradient, a norm gradient with a residual, AdamW updates "
            "or a chain of elementwise ops; see --loom-fuse)";
}

/// Whether `add` adds `a` and `b`, in either order.
bool adds(AddOp add, Value a, Value b) {
  return add && ((add.getLhs() == a && add.getRhs() == b) ||
                 (add.getLhs() == b && add.getRhs() == a));
}

/// The epilogue a matmul body computes (loom_cpu_kernels.h), the body's
/// ops after the matmul in `rest`, its block arguments `args` (lhs, rhs,
/// then the epilogue's operands) and its yielded values `yielded`: the
/// forms --loom-fuse builds, and nothing else.
std::optional<loom_matmul_epilogue>
classifyEpilogue(MatmulOp matmul, ArrayRef<Operation *> rest,
                 ArrayRef<BlockArgument> args, ArrayRef<Value> yielded) {
  Value product = matmul.getResult();
  auto rankOf = [](Value value) {
    return cast<RankedTensorType>(value.getType()).getRank();
  };
  auto at = [&](size_t i) {
    return i < rest.size() ? rest[i] : static_cast<Operation *>(nullptr);
  };
  auto results = [&](std::initializer_list<Value> values) {
    return llvm::equal(yielded, values);
  };
  auto isRowSum = [](Operation *op, Value of) {
    auto reduce = dyn_cast_or_null<ReduceSumOp>(op);
    if (!reduce || reduce.getX() != of || reduce.getKeepDims())
      return false;
    int64_t rank = cast<RankedTensorType>(of.getType()).getRank();
    return llvm::equal(reduce.getDims(), llvm::seq<int64_t>(0, rank - 1));
  };
  auto first = dyn_cast_or_null<AddOp>(at(0));
  size_t numArgs = args.size();
  if (rest.size() == 1 && numArgs == 3 && adds(first, product, args[2])) {
    bool isBias = rankOf(args[2]) == 1;
    if (!results({first.getResult()}) ||
        (!isBias && args[2].getType() != product.getType()))
      return std::nullopt;
    return isBias ? LOOM_EPILOGUE_BIAS : LOOM_EPILOGUE_RESIDUAL;
  }
  if (rest.size() == 2 && numArgs == 3 && adds(first, product, args[2])) {
    auto gelu = dyn_cast<GeluOp>(at(1));
    if (!gelu || gelu.getX() != first.getResult() || rankOf(args[2]) != 1)
      return std::nullopt;
    if (results({gelu.getResult()}))
      return LOOM_EPILOGUE_BIAS_GELU;
    if (results({first.getResult(), gelu.getResult()}))
      return LOOM_EPILOGUE_BIAS_GELU_AUX;
    return std::nullopt;
  }
  if (rest.size() == 2 && numArgs == 4 && adds(first, product, args[2]) &&
      adds(dyn_cast<AddOp>(at(1)), first.getResult(), args[3]) &&
      args[3].getType() == product.getType() && results({at(1)->getResult(0)}))
    return LOOM_EPILOGUE_BIAS_RESIDUAL;
  if (rest.size() == 1 && numArgs == 2 && isRowSum(at(0), args[1]) &&
      !matmul.getTransposeRhs() && rankOf(args[1]) == 2 &&
      results({product, at(0)->getResult(0)}))
    return LOOM_EPILOGUE_BIAS_GRAD;
  auto geluGrad = dyn_cast_or_null<GeluGradOp>(at(0));
  if (rest.size() == 2 && numArgs == 3 && geluGrad &&
      geluGrad.getDy() == product && geluGrad.getX() == args[2] &&
      isRowSum(at(1), geluGrad.getResult()) &&
      results({geluGrad.getResult(), at(1)->getResult(0)}))
    return LOOM_EPILOGUE_DGELU_BIAS_GRAD;
  return std::nullopt;
}

/// The ops of a loom.fused body, its yield left out.
SmallVector<Operation *> bodyOps(FusedOp fused) {
  return llvm::map_to_vector(fused.getBody().front().without_terminator(),
                             [](Operation &op) { return &op; });
}

/// A matmul body: matmul(lhs, rhs) then one of the epilogues
/// classifyEpilogue knows; writes the transposes and the epilogue.
FailureOr<Kernel> writeMatmulEpilogue(FusedOp fused, MetaWriter &w,
                                      const Target &target) {
  Block &body = fused.getBody().front();
  SmallVector<Operation *> rest = bodyOps(fused);
  auto matmul = rest.empty() ? MatmulOp() : dyn_cast<MatmulOp>(rest.front());
  if (!matmul || body.getNumArguments() < 2 ||
      matmul.getLhs() != body.getArgument(0) ||
      matmul.getRhs() != body.getArgument(1))
    return unsupportedBody(fused, target);
  SmallVector<Value> yielded(cast<YieldOp>(body.getTerminator()).getValues());
  std::optional<loom_matmul_epilogue> epilogue = classifyEpilogue(
      matmul, ArrayRef(rest).drop_front(), body.getArguments(), yielded);
  if (!epilogue)
    return unsupportedBody(fused, target);
  w.attrs<Kernel::matmul>(
      {matmul.getTransposeLhs(), matmul.getTransposeRhs(), *epilogue});
  return Kernel::matmul;
}

/// An optimizer body: adamw_update ops over the inputs param, grad, m, v of
/// each (a grad possibly through a cast), then the step, yielding param',
/// m', v' of each in order; writes the shared hyperparameters.
FailureOr<Kernel> writeUpdates(FusedOp fused, MetaWriter &w,
                               const Target &target) {
  Block &body = fused.getBody().front();
  SmallVector<AdamWUpdateOp> updates(body.getOps<AdamWUpdateOp>());
  int64_t params = static_cast<int64_t>(updates.size());
  auto yield = cast<YieldOp>(body.getTerminator());
  if (params < 1 || body.getNumArguments() != 4 * params + 1 ||
      yield.getNumOperands() != 3 * params)
    return unsupportedBody(fused, target);
  Value step = body.getArguments().back();
  AdamWUpdateOp first = updates.front();
  for (auto [i, update] : llvm::enumerate(updates)) {
    unsigned base = 4 * static_cast<unsigned>(i);
    Value grad = update.getGrad();
    if (auto cast = grad.getDefiningOp<CastOp>())
      grad = cast.getX();
    bool inOrder = update.getParam() == body.getArgument(base) &&
                   grad == body.getArgument(base + 1) &&
                   update.getM() == body.getArgument(base + 2) &&
                   update.getV() == body.getArgument(base + 3) &&
                   update.getStep() == step;
    for (unsigned r = 0; r < 3; ++r)
      inOrder = inOrder && yield.getOperand(3 * i + r) == update->getResult(r);
    // One set of hyperparameters (an update's only attributes).
    if (!inOrder || update->getAttrDictionary() != first->getAttrDictionary())
      return unsupportedBody(fused, target);
  }
  for (Operation &op : body.without_terminator())
    if (!isa<AdamWUpdateOp, CastOp>(op))
      return unsupportedBody(fused, target);
  w.attrs<Kernel::adamw_update_multi>(
      {first.getLr().convertToDouble(), first.getBeta1().convertToDouble(),
       first.getBeta2().convertToDouble(), first.getEps().convertToDouble(),
       first.getWeightDecay().convertToDouble()});
  return Kernel::adamw_update_multi;
}

/// A loss body: cross_entropy(logits, labels) and cross_entropy_grad(dloss,
/// logits, labels) over the inputs (dloss, logits, labels) with one token
/// count, yielding the loss and dlogits; writes the token count.
FailureOr<Kernel> writeLossGrad(FusedOp fused, MetaWriter &w,
                                const Target &target) {
  Block &body = fused.getBody().front();
  SmallVector<Operation *> ops = bodyOps(fused);
  auto loss =
      ops.size() == 2 ? dyn_cast<CrossEntropyOp>(ops[0]) : CrossEntropyOp();
  auto grad = ops.size() == 2 ? dyn_cast<CrossEntropyGradOp>(ops[1])
                              : CrossEntropyGradOp();
  auto yield = cast<YieldOp>(body.getTerminator());
  if (!loss || !grad || body.getNumArguments() != 3 ||
      grad.getDloss() != body.getArgument(0) ||
      grad.getLogits() != body.getArgument(1) ||
      grad.getLabels() != body.getArgument(2) ||
      loss.getLogits() != body.getArgument(1) ||
      loss.getLabels() != body.getArgument(2) ||
      loss.getTokenCount() != grad.getTokenCount() ||
      !llvm::equal(yield.getValues(),
                   ArrayRef<Value>{loss.getResult(), grad.getResult()}))
    return unsupportedBody(fused, target);
  w.attrs<Kernel::cross_entropy_with_grad>(
      {static_cast<int64_t>(loss.getTokenCount().value_or(0))});
  return Kernel::cross_entropy_with_grad;
}

/// A norm gradient body: layernorm_grad or rmsnorm_grad of the inputs (dy,
/// x, gamma) and an add of the fourth input, the residual, to its dx,
/// yielding the sum and the weight gradients; writes the norm's epsilon.
FailureOr<Kernel> writeNormGrad(FusedOp fused, Operation *grad, MetaWriter &w,
                                const Target &target) {
  Block &body = fused.getBody().front();
  SmallVector<Operation *> ops = bodyOps(fused);
  auto add =
      ops.size() == 2 && ops[0] == grad ? dyn_cast<AddOp>(ops[1]) : AddOp();
  SmallVector<Value> yielded = {add ? add.getResult() : Value()};
  llvm::append_range(yielded, grad->getResults().drop_front());
  if (!add || body.getNumArguments() != 4 ||
      !llvm::equal(grad->getOperands(), body.getArguments().take_front(3)) ||
      !adds(add, grad->getResult(0), body.getArgument(3)) ||
      !llvm::equal(cast<YieldOp>(body.getTerminator()).getValues(), yielded))
    return unsupportedBody(fused, target);
  // The norm's own epsilon, through its accessor.
  if (auto layerNorm = dyn_cast<LayerNormGradOp>(grad)) {
    w.attrs<Kernel::layernorm_grad>({layerNorm.getEpsilon().convertToDouble()});
    return Kernel::layernorm_grad;
  }
  w.attrs<Kernel::rmsnorm_grad>(
      {cast<RMSNormGradOp>(grad).getEpsilon().convertToDouble()});
  return Kernel::rmsnorm_grad;
}

/// An elementwise body: the fused_elementwise program (loom_cpu_kernels.h),
/// the kernel's tail (it has no attributes of its own).
FailureOr<Kernel> writeFusedProgram(FusedOp fused, MetaWriter &w,
                                    const Target &target) {
  Block &body = fused.getBody().front();
  DenseMap<Value, int64_t> registers;
  for (BlockArgument arg : body.getArguments())
    registers[arg] = arg.getArgNumber();
  SmallVector<int64_t> code;
  for (Operation &op : body.without_terminator()) {
    int64_t opcode = fusedOpcode(&op);
    if (opcode < 0 || op.getNumResults() != 1 || op.getNumOperands() > 2)
      return unsupportedBody(fused, target);
    int64_t a = registers.lookup(op.getOperand(0)), b = 0;
    if (opcode == LOOM_FUSED_CAST) {
      b = dtypeCode(
          cast<RankedTensorType>(op.getResult(0).getType()).getElementType());
      if (b != LOOM_DTYPE_F32 && b != LOOM_DTYPE_BF16)
        return unsupportedBody(fused, target);
    } else if (op.getNumOperands() == 2) {
      b = registers.lookup(op.getOperand(1));
    }
    registers[op.getResult(0)] = static_cast<int64_t>(body.getNumArguments()) +
                                 static_cast<int64_t>(code.size()) / 3;
    code.append({opcode, a, b});
  }
  int64_t count = static_cast<int64_t>(code.size()) / 3;
  if (count < 1 || count > LOOM_FUSED_MAX_INSTRUCTIONS)
    return fused.emitOpError()
           << "has " << count << " ops; fused_elementwise runs 1 to "
           << LOOM_FUSED_MAX_INSTRUCTIONS;
  w.integer(count);
  for (int64_t value : code)
    w.integer(value);
  for (Value value : cast<YieldOp>(body.getTerminator()).getValues())
    w.integer(registers.lookup(value));
  return Kernel::fused_elementwise;
}

} // namespace

FailureOr<KernelCall> encodeKernelCall(Operation *op, GroupTable &groups,
                                       const Target &target) {
  // What a loom.fused runs: a matmul with an epilogue, a loss with its
  // gradient, a norm gradient with a residual, AdamW updates or an
  // elementwise chain.
  auto fused = dyn_cast<FusedOp>(op);
  // The first op of the fused body that `isKind`, or null.
  auto find = [&](auto isKind) -> Operation * {
    if (!fused || fused.getBody().empty())
      return nullptr;
    for (Operation &inner : fused.getBody().front())
      if (isKind(inner))
        return &inner;
    return nullptr;
  };
  bool fusedMatmul =
      find([](Operation &inner) { return isa<MatmulOp>(inner); });
  bool fusedUpdates =
      find([](Operation &inner) { return isa<AdamWUpdateOp>(inner); });
  bool fusedLoss =
      find([](Operation &inner) { return isa<CrossEntropyOp>(inner); });
  Operation *fusedNorm = find([](Operation &inner) {
    return isa<LayerNormGradOp, RMSNormGradOp>(inner);
  });
  // KernelArgs decodes 16 tensors (concat reads its own meta, the
  // multi-tensor update a TensorList).
  if (op->getNumOperands() + op->getNumResults() > 16 && !isa<ConcatOp>(op) &&
      !fusedUpdates)
    return op->emitOpError()
           << target.flag << " takes ops of 16 operands and results at most";
  KernelCall call;
  MetaWriter w(op, target, call.meta);
  w.integer(op->getNumOperands());
  w.integer(op->getNumResults());
  for (Type type : op->getOperandTypes())
    if (failed(w.tensor(type)))
      return failure();
  for (Type type : op->getResultTypes())
    if (failed(w.tensor(type)))
      return failure();
  FailureOr<Kernel> kernel =
      isa<shard::ShardDialect>(op->getDialect())
          ? writeCollective(op, w, groups)
      : !fused       ? writeLoomAttributes(op, w)
      : fusedMatmul  ? writeMatmulEpilogue(fused, w, target)
      : fusedUpdates ? writeUpdates(fused, w, target)
      : fusedLoss    ? writeLossGrad(fused, w, target)
      : fusedNorm    ? writeNormGrad(fused, fusedNorm, w, target)
                     : writeFusedProgram(fused, w, target);
  if (failed(kernel))
    return failure();
  call.symbol = (target.kernelPrefix + kernels::kernelName(*kernel)).str();
  return call;
}

int64_t fusedOpcode(Operation *op) {
  Kernel kernel;
  if (!op->getDialect() || !isa<LoomDialect>(op->getDialect()) ||
      !kernels::kernelNamed(op->getName().stripDialect().str().c_str(), kernel))
    return -1;
  return kernels::fusedOpcodeOf(kernel);
}

bool splittable(Operation *op) {
  // The moved dimension's elements before it: 1 when the operand already
  // holds contiguous member blocks.
  auto contiguous = [](Value operand, Value result, int64_t axis) {
    auto in = cast<RankedTensorType>(operand.getType());
    auto out = cast<RankedTensorType>(result.getType());
    if (in.getElementType() != out.getElementType())
      return false;
    return llvm::all_of(in.getShape().take_front(axis),
                        [](int64_t extent) { return extent == 1; });
  };
  return llvm::TypeSwitch<Operation *, bool>(op)
      .Case([](shard::AllReduceOp) { return true; })
      .Case([&](shard::ReduceScatterOp o) {
        return contiguous(o.getInput(), o.getResult(),
                          o.getScatterAxis().getSExtValue());
      })
      .Case([&](shard::AllGatherOp o) {
        return contiguous(o.getInput(), o.getResult(),
                          o.getGatherAxis().getSExtValue());
      })
      .Default([](Operation *) { return false; });
}

void setSlot(KernelCall &call, int64_t slot) { call.meta.back() = slot; }

KernelCall waitCall(TypeRange tensors, int64_t slot, const Target &target) {
  KernelCall call{
      (target.kernelPrefix + kernels::kernelName(Kernel::collective_wait))
          .str(),
      {static_cast<int64_t>(tensors.size()), 0}};
  for (Type type : tensors)
    describe(call.meta, cast<RankedTensorType>(type));
  kernels::appendAttrs<Kernel::collective_wait>(call.meta, {slot});
  return call;
}

KernelCall copyCall(Type type, const Target &target, Kernel kernel) {
  auto ranked = cast<RankedTensorType>(type);
  KernelCall call{(target.kernelPrefix + kernels::kernelName(kernel)).str(),
                  {1, 1}};
  for (int i = 0; i < 2; ++i)
    describe(call.meta, ranked);
  return call;
}

} // namespace loom::lowering
