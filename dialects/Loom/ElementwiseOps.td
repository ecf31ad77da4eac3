//===- ElementwiseOps.td - Elementwise arithmetic ---------------*- tablegen -*-===//

#ifndef LOOM_DIALECT_ELEMENTWISEOPS_TD
#define LOOM_DIALECT_ELEMENTWISEOPS_TD

/// Binary arithmetic with numpy broadcasting: shapes are aligned at their
/// last dimension and a dimension of size 1 stretches to the other's size.
class Loom_BinaryOp<string mnemonic, string op, list<Trait> traits = []>
    : Loom_Op<mnemonic, !listconcat([Loom_HasGradient], traits)> {
  let summary = "elementwise `" # op # "` with numpy broadcasting";
  let description = [{
    Computes `lhs }] # op # [{ rhs` elementwise. Both operands have the
    same element type; their shapes broadcast as in numpy (aligned at the
    last dimension, size-1 dimensions stretch). The result has the
    broadcast shape.

    ```mlir
    %y = loom.}] # mnemonic # [{ %x, %bias
        : (tensor<2x16x64xf32>, tensor<64xf32>) -> tensor<2x16x64xf32>
    ```
  }];
  let arguments = (ins Loom_FloatTensor:$lhs, Loom_FloatTensor:$rhs);
  let results = (outs Loom_FloatTensor:$result);
  let assemblyFormat =
      "$lhs `,` $rhs attr-dict `:` functional-type(operands, results)";
  let builders = [
    OpBuilder<(ins "::mlir::Value":$lhs, "::mlir::Value":$rhs), [{
      build($_builder, $_state,
            ::loom::requireInferred(::loom::inferBroadcastType(
                lhs.getType(), rhs.getType(), nullptr), "loom.}] # mnemonic # [{"),
            lhs, rhs);
    }]>
  ];
  let extraClassDefinition = [{
    ::llvm::LogicalResult $cppClass::verify() {
      return ::loom::verifyBroadcastingOp(*this);
    }
    ::loom::OpShardingRule $cppClass::getShardingRule() {
      return ::loom::getAlignedRule(*this, getType().getShape());
    }
  }];
}

def Loom_AddOp : Loom_BinaryOp<"add", "+", [Loom_Linear]>;
def Loom_SubOp : Loom_BinaryOp<"sub", "-", [Loom_Linear]>;
def Loom_MulOp : Loom_BinaryOp<"mul", "*">;
def Loom_DivOp : Loom_BinaryOp<"div", "/">;

/// Unary math on floating-point tensors; the result has the operand's type.
/// `derivative` is the gradient as documented, `gradient` the C++ body that
/// builds it: it reads the result's gradient `g`, the operand `x` and the
/// result `y`, builds with the ElementwiseBuilder `e`
/// (dialects/Loom/GradientBuilders.h), and returns the operand's gradient.
/// A call in it creates ops in at most one of its arguments, so that the
/// order of the built ops does not depend on the compiler.
class Loom_UnaryOp<string mnemonic, string formula, string derivative,
                   code gradient, list<Trait> traits = []>
    : Loom_Op<mnemonic, !listconcat([SameOperandsAndResultType,
                                     Loom_HasGradient], traits)> {
  let summary = "elementwise `" # formula # "`";
  let description = [{
    Computes `y = }] # formula # [{` for every element of `x`. Given the
    gradient `g` of `y`, the gradient of `x` is `}] # derivative # [{`.

    ```mlir
    %y = loom.}] # mnemonic # [{ %x : tensor<4x8xf32>
    ```
  }];
  let arguments = (ins Loom_FloatTensor:$x);
  let results = (outs Loom_FloatTensor:$result);
  let assemblyFormat = "$x attr-dict `:` type($x)";
  let hasVerifier = 0;
  let extraClassDefinition = [{
    ::loom::OpShardingRule $cppClass::getShardingRule() {
      return ::loom::getAlignedRule(*this, getType().getShape());
    }
    ::llvm::LogicalResult $cppClass::buildOperandGradients(
        ::mlir::OpBuilder &builder, ::llvm::ArrayRef<::mlir::Value> resultGrads,
        ::llvm::SmallVectorImpl<::mlir::Value> &out) {
      ::loom::ElementwiseBuilder e{builder, getLoc()};
      [[maybe_unused]] ::mlir::Value g = resultGrads[0], x = getX(),
                                     y = getResult();
      out[0] = [&]() -> ::mlir::Value {}] # gradient # [{}();
      return ::mlir::success();
    }
  }];
}

def Loom_NegOp : Loom_UnaryOp<"neg", "-x", "-g", [{ return e.neg(g); }],
                              [Loom_Linear]>;
def Loom_ExpOp : Loom_UnaryOp<"exp", "exp(x)", "g * y",
                              [{ return e.mul(g, y); }]>;
def Loom_LogOp : Loom_UnaryOp<"log", "log(x)", "g / x",
                              [{ return e.div(g, x); }]>;
def Loom_SqrtOp : Loom_UnaryOp<"sqrt", "sqrt(x)", "g / (y + y)",
                               [{ return e.div(g, e.add(y, y)); }]>;
def Loom_RsqrtOp : Loom_UnaryOp<"rsqrt", "1 / sqrt(x)", "g * y^3 * -0.5", [{
  auto gy3 = e.mul(g, e.mul(e.mul(y, y), y));
  return e.mul(gy3, e.scalar(g, -0.5));
}]>;
def Loom_TanhOp : Loom_UnaryOp<"tanh", "tanh(x)", "g - g * y^2",
                               [{ return e.sub(g, e.mul(g, e.mul(y, y))); }]>;

def Loom_CastOp : Loom_Op<"cast", [Loom_HasGradient]> {
  let summary = "converts a floating-point tensor to another element type";
  let description = [{
    Rounds every element of `x` to the result's element type (round to
    nearest even). The shape is unchanged. Mixed precision uses it for the
    bf16 compute copies of f32 master weights.

    ```mlir
    %w16 = loom.cast %w : tensor<768x768xf32> -> tensor<768x768xbf16>
    ```
  }];
  let arguments = (ins Loom_FloatTensor:$x);
  let results = (outs Loom_FloatTensor:$result);
  let assemblyFormat = "$x attr-dict `:` type($x) `->` type($result)";
  let builders = [
    OpBuilder<(ins "::mlir::Value":$x, "::mlir::Type":$elementType), [{
      build($_builder, $_state,
            ::mlir::cast<::mlir::RankedTensorType>(x.getType())
                .clone(elementType), x);
    }]>
  ];
}

#endif // LOOM_DIALECT_ELEMENTWISEOPS_TD
