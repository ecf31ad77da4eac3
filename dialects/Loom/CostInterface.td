//===- CostInterface.td - What one op computes and moves -------*- tablegen -*-===//
//
// The only thing the cost model knows about an op: how its time is modeled,
// its FLOPs and model FLOPs, the bytes its kernel reads and writes, and the
// element type its arithmetic runs in, at given (local) shapes.
//
//===----------------------------------------------------------------------===//

#ifndef LOOM_DIALECT_COSTINTERFACE_TD
#define LOOM_DIALECT_COSTINTERFACE_TD

include "mlir/IR/OpBase.td"

def Loom_OpCostInterface : OpInterface<"OpCostInterface"> {
  let cppNamespace = "::loom";
  let description = [{
    Counts the work of one kernel running the op at given operand and result
    shapes (the op's own, or the local shapes of a sharding strategy), in
    device-independent terms: its `CostClass` (matrix product, bandwidth
    bound, or free), its FLOPs, its model FLOPs (those that count towards
    MFU, recomputation excluded) and the bytes it reads and writes. The
    cost model (lib/CostModel) turns the counts into seconds with a
    device's rates and efficiencies; it reads only this interface, never op
    names, and an op without it (another dialect's, `loom.yield`) is free.

    The defaults describe a bandwidth-bound elementwise kernel: one FLOP per
    result element, every operand and result read or written once, the
    arithmetic in the first operand's element type. Every loom op has them
    (`Loom_Op`); an op whose cost differs lists the methods it defines in
    `Loom_Cost<[...]>` among its traits and defines them in OpCost.cpp,
    where the formulas cite their sources.

    ```c++
    if (auto costed = dyn_cast<loom::OpCostInterface>(op)) {
      loom::OpShapes shapes = loom::OpShapes::of(op);
      double flops = costed.getFlops(shapes);
    }
    ```
  }];
  let methods = [
    InterfaceMethod<
      /*desc=*/[{How the op's time is modeled. Default: `Free` for an op
                 without results or a constant, `Bandwidth` otherwise.}],
      /*retTy=*/"::loom::CostClass",
      /*methodName=*/"getCostClass",
      /*args=*/(ins),
      /*methodBody=*/"",
      /*defaultImplementation=*/[{
        if ($_op->getNumResults() == 0 ||
            $_op->template hasTrait<::mlir::OpTrait::ConstantLike>())
          return ::loom::CostClass::Free;
        return ::loom::CostClass::Bandwidth;
      }]>,
    InterfaceMethod<
      /*desc=*/[{Scalar operations per result element of the default
                 `getFlops`: rough counts of a straightforward kernel.
                 Default: 1.}],
      /*retTy=*/"double",
      /*methodName=*/"getFlopsPerElement",
      /*args=*/(ins),
      /*methodBody=*/"",
      /*defaultImplementation=*/"return 1.0;">,
    InterfaceMethod<
      /*desc=*/[{FLOPs the kernel executes at `shapes`, recomputation
                 included. Default: `getFlopsPerElement()` times the
                 elements of all results.}],
      /*retTy=*/"double",
      /*methodName=*/"getFlops",
      /*args=*/(ins "const ::loom::OpShapes &":$shapes),
      /*methodBody=*/"",
      /*defaultImplementation=*/[{
        double elements = 0;
        for (const auto &shape : shapes.results)
          elements += ::loom::numElements(shape);
        return $_op.getFlopsPerElement() * elements;
      }]>,
    InterfaceMethod<
      /*desc=*/[{FLOPs at `shapes` that count as model FLOPs: matrix
                 products only, recomputation excluded. Default: 0.}],
      /*retTy=*/"double",
      /*methodName=*/"getModelFlops",
      /*args=*/(ins "const ::loom::OpShapes &":$shapes),
      /*methodBody=*/"",
      /*defaultImplementation=*/"return 0;">,
    InterfaceMethod<
      /*desc=*/[{Bytes the kernel reads plus writes at `shapes`. Default:
                 every tensor operand and result once, at its element
                 type (`loom::tensorBytes`).}],
      /*retTy=*/"double",
      /*methodName=*/"getBytes",
      /*args=*/(ins "const ::loom::OpShapes &":$shapes),
      /*methodBody=*/"",
      /*defaultImplementation=*/
        "return ::loom::tensorBytes($_op.getOperation(), shapes);">,
    InterfaceMethod<
      /*desc=*/[{The power of the sequence length the op's work grows
                 with: 1 (the default) for work per token, 2 for work per
                 pair of tokens (attention's scores). The planner scales a
                 sequence shard's model FLOPs to the whole sequence by the
                 context-parallel degree to this power.}],
      /*retTy=*/"int",
      /*methodName=*/"getSequenceExponent",
      /*args=*/(ins),
      /*methodBody=*/"",
      /*defaultImplementation=*/"return 1;">,
    InterfaceMethod<
      /*desc=*/[{The type whose element type the arithmetic runs in (the
                 device's rate for it applies). Default: the first
                 operand's type; null without operands.}],
      /*retTy=*/"::mlir::Type",
      /*methodName=*/"getComputeType",
      /*args=*/(ins),
      /*methodBody=*/"",
      /*defaultImplementation=*/[{
        return $_op->getNumOperands() ? $_op->getOperand(0).getType()
                                      : ::mlir::Type();
      }]>,
  ];
}

/// Among an op's traits: the `OpCostInterface` methods the op defines
/// itself (in OpCost.cpp); the others keep their defaults.
class Loom_Cost<list<string> methods>
    : DeclareOpInterfaceMethods<Loom_OpCostInterface, methods>;

#endif // LOOM_DIALECT_COSTINTERFACE_TD
