//===- LoomBase.td - The loom dialect and its type constraints -*- tablegen -*-===//
//
// The loom dialect holds tensor-level training-graph ops: static shapes,
// f32/bf16/f16 activations and weights, i32/i64 token ids.
//
//===----------------------------------------------------------------------===//

#ifndef LOOM_DIALECT_LOOMBASE_TD
#define LOOM_DIALECT_LOOMBASE_TD

include "mlir/IR/OpBase.td"
include "mlir/IR/AttrTypeBase.td"
include "mlir/Interfaces/InferTypeOpInterface.td"
include "mlir/Interfaces/SideEffectInterfaces.td"

def Loom_Dialect : Dialect {
  let name = "loom";
  let cppNamespace = "::loom";
  let summary = "Tensor-level ops of transformer training graphs";
  let description = [{
    The `loom` dialect describes a training step as a dataflow graph of
    tensor ops with static shapes: the forward ops of GPT-2 and Llama, the
    fused gradient op of each fused forward op, and fused optimizer updates.
    Every op implements `ShardingRuleOpInterface`, which tells the planner
    how the op's dimensions may be split over a device mesh, and
    `OpCostInterface`, which tells the cost model what the op computes and
    moves.
  }];
  let dependentDialects = ["::mlir::shard::ShardDialect"];
  // The `loom.*` attributes carry the protocol between the importer, the
  // passes and the executors (LoomDialect.h); each is checked where it
  // appears before any pass reads it (LoomAttributes.cpp).
  let hasOperationAttrVerify = 1;
  let hasRegionArgAttrVerify = 1;
  let hasRegionResultAttrVerify = 1;
}

//===----------------------------------------------------------------------===//
// Type constraints
//===----------------------------------------------------------------------===//

def Loom_FloatElement : AnyTypeOf<[F32, BF16, F16]>;
def Loom_IntElement : AnyTypeOf<[I32, I64]>;

/// Every dimension has at least one element: a zero-size dimension has no
/// meaning in a training graph and would make factor sizes zero.
def Loom_NoZeroDimsPred : CPred<[{::llvm::all_of(
    ::llvm::cast<::mlir::ShapedType>($_self).getShape(),
    [](int64_t dim) { return dim > 0; })}]>;

/// A statically shaped tensor of `elements` without zero-size dimensions.
class Loom_TensorOf<list<Type> elements, string what>
    : Type<And<[StaticShapeTensorOf<elements>.predicate, Loom_NoZeroDimsPred]>,
           what # " tensor with a static shape and no zero-size dimension",
           "::mlir::RankedTensorType">;

/// Activations and weights.
def Loom_FloatTensor : Loom_TensorOf<[F32, BF16, F16], "f32, bf16 or f16">;
/// Token ids and labels.
def Loom_IndexTensor : Loom_TensorOf<[I32, I64], "i32 or i64">;
/// Any tensor a layout op (reshape, transpose, slice, ...) may move around.
def Loom_Tensor : Loom_TensorOf<[F32, BF16, F16, I32, I64],
                                "f32, bf16, f16, i32 or i64">;
/// The optimizer step counter (1-based), a 0-d integer tensor.
def Loom_StepTensor : 0DTensorOf<[I32, I64]>;
/// A scalar loss or its seed gradient.
def Loom_ScalarF32 : 0DTensorOf<[F32]>;

#endif // LOOM_DIALECT_LOOMBASE_TD
