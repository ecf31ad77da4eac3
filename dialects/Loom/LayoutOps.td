//===- LayoutOps.td - Reshapes, permutations, slices, reductions -*- tablegen -*-===//

#ifndef LOOM_DIALECT_LAYOUTOPS_TD
#define LOOM_DIALECT_LAYOUTOPS_TD

def Loom_ReshapeOp : Loom_Op<"reshape",
    [Loom_HasGradient, Loom_Linear, Loom_Cost<["getCostClass"]>]> {
  let summary = "reinterprets a tensor with another shape of the same size";
  let description = [{
    Row-major reshape: the elements keep their order, the result shape has
    the same number of elements and the same element type.

    ```mlir
    %heads = loom.reshape %x : tensor<2x16x768xf32> -> tensor<2x16x12x64xf32>
    ```
  }];
  let arguments = (ins Loom_Tensor:$x);
  let results = (outs Loom_Tensor:$result);
  let assemblyFormat = "$x attr-dict `:` type($x) `->` type($result)";
  let builders = [
    OpBuilder<(ins "::mlir::Value":$x, "::llvm::ArrayRef<int64_t>":$shape), [{
      build($_builder, $_state,
            ::mlir::cast<::mlir::RankedTensorType>(x.getType()).clone(shape), x);
    }]>
  ];
}

def Loom_TransposeOp : Loom_Op<"transpose", [Loom_HasGradient, Loom_Linear]> {
  let summary = "permutes the dimensions of a tensor";
  let description = [{
    Result dimension `i` is operand dimension `permutation[i]`.

    ```mlir
    %t = loom.transpose %x [0, 2, 1, 3]
        : tensor<2x16x12x64xf32> -> tensor<2x12x16x64xf32>
    ```
  }];
  let arguments = (ins Loom_Tensor:$x, DenseI64ArrayAttr:$permutation);
  let results = (outs Loom_Tensor:$result);
  let assemblyFormat =
      "$x $permutation attr-dict `:` type($x) `->` type($result)";
  let builders = [
    OpBuilder<(ins "::mlir::Value":$x, "::llvm::ArrayRef<int64_t>":$permutation), [{
      build($_builder, $_state,
            ::loom::requireInferred(::loom::inferTransposeType(
                x.getType(), permutation, nullptr), "loom.transpose"),
            x, permutation);
    }]>
  ];
}

def Loom_BroadcastOp : Loom_Op<"broadcast", [Loom_HasGradient, Loom_Linear]> {
  let summary = "broadcasts a tensor to a larger shape (numpy rules)";
  let description = [{
    Aligns `x` with the result shape at the last dimension; every operand
    dimension is 1 or equal to the result's. Autodiff uses it for the
    gradient of reductions.

    ```mlir
    %b = loom.broadcast %x : tensor<16x1xf32> -> tensor<2x16x768xf32>
    ```
  }];
  let arguments = (ins Loom_Tensor:$x);
  let results = (outs Loom_Tensor:$result);
  let assemblyFormat = "$x attr-dict `:` type($x) `->` type($result)";
  let builders = [
    OpBuilder<(ins "::mlir::Value":$x, "::llvm::ArrayRef<int64_t>":$shape), [{
      build($_builder, $_state,
            ::mlir::cast<::mlir::RankedTensorType>(x.getType()).clone(shape), x);
    }]>
  ];
}

def Loom_SliceOp : Loom_Op<"slice", [Loom_HasGradient, Loom_Linear]> {
  let summary = "extracts a contiguous box of a tensor";
  let description = [{
    Takes the box that starts at `offsets` and has the result's shape
    (unit strides). GPT-2 uses it to split the fused `c_attn` projection
    into q, k and v, and to take the first `S` rows of the position table.

    ```mlir
    %k = loom.slice %qkv [0, 0, 768]
        : tensor<2x16x2304xf32> -> tensor<2x16x768xf32>
    ```
  }];
  let arguments = (ins Loom_Tensor:$x, DenseI64ArrayAttr:$offsets);
  let results = (outs Loom_Tensor:$result);
  let assemblyFormat =
      "$x $offsets attr-dict `:` type($x) `->` type($result)";
}

def Loom_PadOp : Loom_Op<"pad", [Loom_HasGradient]> {
  let summary = "places a tensor inside a larger one filled with zeros";
  let description = [{
    The inverse of `slice`: the result has zeros everywhere except the box
    at `low`, which holds `x`. It is the gradient of `slice`.

    ```mlir
    %dqkv_k = loom.pad %dk low [0, 0, 768]
        : tensor<2x16x768xf32> -> tensor<2x16x2304xf32>
    ```
  }];
  let arguments = (ins Loom_FloatTensor:$x, DenseI64ArrayAttr:$low);
  let results = (outs Loom_FloatTensor:$result);
  let assemblyFormat =
      "$x `low` $low attr-dict `:` type($x) `->` type($result)";
}

def Loom_ConcatOp : Loom_Op<"concat", [Loom_HasGradient, Loom_Linear]> {
  let summary = "joins tensors along one dimension";
  let description = [{
    All inputs have the same element type and agree in every dimension but
    `axis`; the result's `axis` extent is the sum of theirs.

    ```mlir
    %qkv = loom.concat %q, %k, %v {axis = 2 : i64}
        : (tensor<2x16x768xf32>, tensor<2x16x768xf32>, tensor<2x16x768xf32>)
        -> tensor<2x16x2304xf32>
    ```
  }];
  let arguments = (ins Variadic<Loom_Tensor>:$inputs, I64Attr:$axis);
  let results = (outs Loom_Tensor:$result);
  let assemblyFormat =
      "$inputs attr-dict `:` functional-type($inputs, results)";
  let builders = [
    OpBuilder<(ins "::mlir::ValueRange":$inputs, "int64_t":$axis), [{
      build($_builder, $_state,
            ::loom::requireInferred(::loom::inferConcatType(
                inputs.getTypes(), axis, nullptr), "loom.concat"),
            inputs, axis);
    }]>
  ];
}

/// Reductions over a set of dimensions, which are dropped from the result
/// unless `keep_dims` is set (then they have size 1).
class Loom_ReduceOp<string mnemonic, string what, string kind,
                    list<Trait> traits = []>
    : Loom_Op<mnemonic, !listconcat([Loom_HasGradient], traits)> {
  let summary = "reduces dimensions by " # what;
  let description = [{
    Reduces `x` over `dims` by }] # what # [{. With `keep_dims` the reduced
    dimensions stay, with size 1.

    ```mlir
    %s = loom.}] # mnemonic # [{ %x [2] {keep_dims}
        : tensor<2x16x768xf32> -> tensor<2x16x1xf32>
    ```
  }];
  let arguments = (ins Loom_FloatTensor:$x, DenseI64ArrayAttr:$dims,
                       UnitAttr:$keep_dims);
  let results = (outs Loom_FloatTensor:$result);
  let assemblyFormat =
      "$x $dims attr-dict `:` type($x) `->` type($result)";
  let builders = [
    OpBuilder<(ins "::mlir::Value":$x, "::llvm::ArrayRef<int64_t>":$dims,
                   "bool":$keepDims), [{
      build($_builder, $_state,
            ::loom::requireInferred(::loom::inferReduceType(
                x.getType(), dims, keepDims, nullptr), "loom.}] # mnemonic # [{"),
            x, dims, keepDims);
    }]>
  ];
  let extraClassDefinition = [{
    ::llvm::LogicalResult $cppClass::verify() {
      return ::loom::verifyInferredTypes(*this,
          ::loom::inferReduceType(getX().getType(), getDims(), getKeepDims(),
                                  [&] { return emitOpError(); }));
    }
    ::loom::OpShardingRule $cppClass::getShardingRule() {
      return ::loom::getReduceRule(*this, getDims(),
                                   ::mlir::shard::ReductionKind::}] # kind # [{);
    }
  }];
}

def Loom_ReduceSumOp : Loom_ReduceOp<"reduce_sum", "summation", "Sum",
                                     [Loom_Linear]>;
// Partial means are combined as sums: the partitioner divides by the global
// element count, not the local one.
def Loom_ReduceMeanOp : Loom_ReduceOp<"reduce_mean", "the arithmetic mean", "Sum",
                                      [Loom_Linear]>;
def Loom_ReduceMaxOp : Loom_ReduceOp<"reduce_max", "the maximum", "Max">;

#endif // LOOM_DIALECT_LAYOUTOPS_TD
