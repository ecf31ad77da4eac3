//===- ShardingRuleInterface.td - Per-op sharding rules --------*- tablegen -*-===//
//
// The only thing the sharding planner knows about an op: its iteration
// factors and how operand/result dimensions map onto them.
//
//===----------------------------------------------------------------------===//

#ifndef LOOM_DIALECT_SHARDINGRULEINTERFACE_TD
#define LOOM_DIALECT_SHARDINGRULEINTERFACE_TD

include "mlir/IR/OpBase.td"

def Loom_ShardingRuleOpInterface : OpInterface<"ShardingRuleOpInterface"> {
  let cppNamespace = "::loom";
  let description = [{
    Describes an op as a set of *factors* (its iteration-space dimensions,
    in the sense of Shardy's `OpShardingRule`) and, for every operand and
    result dimension, the factors it is made of, major to minor. A factor is

      * `parallel`: splitting it splits every tensor that maps it and needs
        no communication; every result maps it;
      * `reduction`: some result does not map it, so splitting it leaves
        partial values in those results, to be combined with the rule's
        reduction kind (sum, or max for `reduce_max`);
      * `whole`: it must not be split (a normalized or softmax axis, a
        sliced dimension, the causal sequence axis of attention).

    A dimension of size 1 maps to no factor. The planner reads only this
    interface, never op names.
  }];
  let methods = [
    InterfaceMethod<
      /*desc=*/"Returns the sharding rule of this op for its current shapes.",
      /*retTy=*/"::loom::OpShardingRule",
      /*methodName=*/"getShardingRule">,
  ];
}

/// The op is linear in all its tensor operands jointly, op(a1 + a2, b1 + b2)
/// = op(a1, b1) + op(a2, b2), so that partial sums may flow through it
/// unreduced (--loom-auto-shard): Megatron's backward pass sums the input
/// gradients of the column-parallel Q, K and V projections before reducing
/// them once.
def Loom_Linear : NativeOpTrait<"Linear"> {
  let cppNamespace = "::loom";
}

#endif // LOOM_DIALECT_SHARDINGRULEINTERFACE_TD
