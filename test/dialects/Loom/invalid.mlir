// RUN: loom-opt %s -split-input-file -verify-diagnostics

// add rejects operands whose element types differ.
func.func @add_element_types(%a: tensor<4xf32>, %b: tensor<4xbf16>) {
  // expected-error @+1 {{'loom.add' op operands have different element types: 'f32' and 'bf16'}}
  %0 = loom.add %a, %b : (tensor<4xf32>, tensor<4xbf16>) -> tensor<4xf32>
  return
}

// -----

// sub rejects shapes that do not broadcast (numpy rules).
func.func @sub_no_broadcast(%a: tensor<2x3xf32>, %b: tensor<4x3xf32>) {
  // expected-error @+1 {{'loom.sub' op shapes 2x3 and 4x3 do not broadcast: 2 vs 4 at dimension -2 (counted from the last)}}
  %0 = loom.sub %a, %b : (tensor<2x3xf32>, tensor<4x3xf32>) -> tensor<4x3xf32>
  return
}

// -----

// mul rejects a stated result type other than the broadcast type.
func.func @mul_result_type(%a: tensor<2x1xf32>, %b: tensor<3xf32>) {
  // expected-error @+1 {{'loom.mul' op result #0 has type 'tensor<2x1xf32>', the operands give 'tensor<2x3xf32>'}}
  %0 = loom.mul %a, %b : (tensor<2x1xf32>, tensor<3xf32>) -> tensor<2x1xf32>
  return
}

// -----

// div checks broadcasting too; a lower-rank operand aligns at the last dimension.
func.func @div_no_broadcast(%a: tensor<2x16x64xf32>, %b: tensor<16xf32>) {
  // expected-error @+1 {{'loom.div' op shapes 2x16x64 and 16 do not broadcast: 64 vs 16 at dimension -1 (counted from the last)}}
  %0 = loom.div %a, %b : (tensor<2x16x64xf32>, tensor<16xf32>) -> tensor<2x16x64xf32>
  return
}

// -----

// cast may change the element type but not the shape.
func.func @cast_shape(%x: tensor<4x8xf32>) {
  // expected-error @+1 {{'loom.cast' op result type 'tensor<8x4xbf16>' changes the shape of 'tensor<4x8xf32>'}}
  %0 = loom.cast %x : tensor<4x8xf32> -> tensor<8x4xbf16>
  return
}

// -----

// dropout rejects a rate of 1, which would drop every element.
func.func @dropout_rate(%x: tensor<2x64xf32>, %step: tensor<i64>) {
  // expected-error @+1 {{'loom.dropout' op rate 1 is not in [0, 1)}}
  %0 = loom.dropout %x, %step {key = 0 : i64, rate = 1.0 : f64, seed = 0 : i64} : tensor<2x64xf32>, tensor<i64>
  return
}

// -----

// dropout_grad rejects a negative rate.
func.func @dropout_grad_rate(%dy: tensor<2x64xf32>, %step: tensor<i64>) {
  // expected-error @+1 {{'loom.dropout_grad' op rate -0.1 is not in [0, 1)}}
  %0 = loom.dropout_grad %dy, %step {key = 0 : i64, rate = -0.1 : f64, seed = 0 : i64} : tensor<2x64xf32>, tensor<i64>
  return
}

// -----

// reshape keeps the element type.
func.func @reshape_element_type(%x: tensor<2x8xf32>) {
  // expected-error @+1 {{'loom.reshape' op result element type 'f16' differs from 'f32'}}
  %0 = loom.reshape %x : tensor<2x8xf32> -> tensor<16xf16>
  return
}

// -----

// reshape keeps the number of elements.
func.func @reshape_elements(%x: tensor<2x8xi32>) {
  // expected-error @+1 {{'loom.reshape' op reshapes 16 elements into 18}}
  %0 = loom.reshape %x : tensor<2x8xi32> -> tensor<2x9xi32>
  return
}

// -----

// transpose needs one permutation entry per operand dimension.
func.func @transpose_length(%x: tensor<2x3xf32>) {
  // expected-error @+1 {{'loom.transpose' op permutation has 3 entries for an operand of rank 2}}
  %0 = loom.transpose %x [0, 1, 2] : tensor<2x3xf32> -> tensor<2x3xf32>
  return
}

// -----

// transpose rejects a permutation with a repeated entry.
func.func @transpose_repeated(%x: tensor<2x3x4xf32>) {
  // expected-error @+1 {{'loom.transpose' op permutation is not a permutation of 0..2}}
  %0 = loom.transpose %x [0, 2, 2] : tensor<2x3x4xf32> -> tensor<2x4x4xf32>
  return
}

// -----

// transpose rejects a permutation entry out of range.
func.func @transpose_out_of_range(%x: tensor<2x3xf32>) {
  // expected-error @+1 {{'loom.transpose' op permutation is not a permutation of 0..1}}
  %0 = loom.transpose %x [2, 0] : tensor<2x3xf32> -> tensor<3x2xf32>
  return
}

// -----

// transpose's result type is the permuted operand type.
func.func @transpose_result_type(%x: tensor<2x3x4xf32>) {
  // expected-error @+1 {{'loom.transpose' op result #0 has type 'tensor<2x3x4xf32>', the operands give 'tensor<4x2x3xf32>'}}
  %0 = loom.transpose %x [2, 0, 1] : tensor<2x3x4xf32> -> tensor<2x3x4xf32>
  return
}

// -----

// broadcast keeps the element type.
func.func @broadcast_element_type(%x: tensor<16x1xf32>) {
  // expected-error @+1 {{'loom.broadcast' op result element type 'bf16' differs from 'f32'}}
  %0 = loom.broadcast %x : tensor<16x1xf32> -> tensor<2x16x8xbf16>
  return
}

// -----

// broadcast cannot lower the rank.
func.func @broadcast_rank(%x: tensor<2x16x8xf32>) {
  // expected-error @+1 {{'loom.broadcast' op cannot broadcast rank 3 to rank 2}}
  %0 = loom.broadcast %x : tensor<2x16x8xf32> -> tensor<16x8xf32>
  return
}

// -----

// broadcast stretches only dimensions of size 1.
func.func @broadcast_dim(%x: tensor<16x2xf32>) {
  // expected-error @+1 {{'loom.broadcast' op operand dimension 1 of size 2 cannot broadcast to 8}}
  %0 = loom.broadcast %x : tensor<16x2xf32> -> tensor<2x16x8xf32>
  return
}

// -----

// slice keeps the rank.
func.func @slice_rank(%x: tensor<2x16x192xf32>) {
  // expected-error @+1 {{'loom.slice' op operand and result ranks differ: 'tensor<2x16x192xf32>' and 'tensor<16x64xf32>'}}
  %0 = loom.slice %x [0, 0] : tensor<2x16x192xf32> -> tensor<16x64xf32>
  return
}

// -----

// slice keeps the element type.
func.func @slice_element_type(%x: tensor<2x16x192xf32>) {
  // expected-error @+1 {{'loom.slice' op result element type 'bf16' differs from 'f32'}}
  %0 = loom.slice %x [0, 0, 64] : tensor<2x16x192xf32> -> tensor<2x16x64xbf16>
  return
}

// -----

// slice needs one offset per dimension.
func.func @slice_offsets_length(%x: tensor<2x16x192xf32>) {
  // expected-error @+1 {{'loom.slice' op offsets has 2 entries for rank 3}}
  %0 = loom.slice %x [0, 64] : tensor<2x16x192xf32> -> tensor<2x16x64xf32>
  return
}

// -----

// slice rejects a box that runs past the end of the operand.
func.func @slice_out_of_bounds(%x: tensor<2x16x192xf32>) {
  // expected-error @+1 {{'loom.slice' op dimension 2: 64 elements at offsets 160 do not fit in 192}}
  %0 = loom.slice %x [0, 0, 160] : tensor<2x16x192xf32> -> tensor<2x16x64xf32>
  return
}

// -----

// pad needs one low entry per dimension.
func.func @pad_low_length(%x: tensor<2x16x64xf32>) {
  // expected-error @+1 {{'loom.pad' op low has 1 entries for rank 3}}
  %0 = loom.pad %x low [64] : tensor<2x16x64xf32> -> tensor<2x16x192xf32>
  return
}

// -----

// pad rejects a negative low offset.
func.func @pad_negative_low(%x: tensor<2x16x64xf32>) {
  // expected-error @+1 {{'loom.pad' op dimension 2: 64 elements at low -1 do not fit in 192}}
  %0 = loom.pad %x low [0, 0, -1] : tensor<2x16x64xf32> -> tensor<2x16x192xf32>
  return
}

// -----

// pad keeps the rank.
func.func @pad_rank(%x: tensor<16x64xf32>) {
  // expected-error @+1 {{'loom.pad' op operand and result ranks differ: 'tensor<16x64xf32>' and 'tensor<2x16x64xf32>'}}
  %0 = loom.pad %x low [0, 0] : tensor<16x64xf32> -> tensor<2x16x64xf32>
  return
}

// -----

// concat needs at least one input.
func.func @concat_empty() {
  // expected-error @+1 {{'loom.concat' op needs at least one input}}
  %0 = loom.concat {axis = 0 : i64} : () -> tensor<1xf32>
  return
}

// -----

// concat's axis must be a dimension of the inputs.
func.func @concat_axis(%a: tensor<2x16xf32>, %b: tensor<2x16xf32>) {
  // expected-error @+1 {{'loom.concat' op axis 2 is out of range for rank 2}}
  %0 = loom.concat %a, %b {axis = 2 : i64} : (tensor<2x16xf32>, tensor<2x16xf32>) -> tensor<2x32xf32>
  return
}

// -----

// concat's inputs share the element type.
func.func @concat_element_type(%a: tensor<2x16xi32>, %b: tensor<2x16xi64>) {
  // expected-error @+1 {{'loom.concat' op input #1 differs from input #0 in rank or element type}}
  %0 = loom.concat %a, %b {axis = 1 : i64} : (tensor<2x16xi32>, tensor<2x16xi64>) -> tensor<2x32xi32>
  return
}

// -----

// concat's inputs share the rank.
func.func @concat_rank(%a: tensor<2x16xf32>, %b: tensor<2x16xf32>, %c: tensor<16xf32>) {
  // expected-error @+1 {{'loom.concat' op input #2 differs from input #0 in rank or element type}}
  %0 = loom.concat %a, %b, %c {axis = 0 : i64} : (tensor<2x16xf32>, tensor<2x16xf32>, tensor<16xf32>) -> tensor<5x16xf32>
  return
}

// -----

// concat's inputs agree in every dimension but the axis.
func.func @concat_extent(%a: tensor<2x16x64xf32>, %b: tensor<2x8x32xf32>) {
  // expected-error @+1 {{'loom.concat' op input #1 has 8 elements in dimension 1, input #0 has 16}}
  %0 = loom.concat %a, %b {axis = 2 : i64} : (tensor<2x16x64xf32>, tensor<2x8x32xf32>) -> tensor<2x16x96xf32>
  return
}

// -----

// concat's result extent along the axis is the sum of the inputs'.
func.func @concat_result_type(%a: tensor<2x16x64xf32>, %b: tensor<2x16x32xf32>) {
  // expected-error @+1 {{'loom.concat' op result #0 has type 'tensor<2x16x64xf32>', the operands give 'tensor<2x16x96xf32>'}}
  %0 = loom.concat %a, %b {axis = 2 : i64} : (tensor<2x16x64xf32>, tensor<2x16x32xf32>) -> tensor<2x16x64xf32>
  return
}

// -----

// reduce_sum rejects a reduced dimension out of range.
func.func @reduce_sum_range(%x: tensor<2x16x64xf32>) {
  // expected-error @+1 {{'loom.reduce_sum' op reduced dimension 3 is out of range for rank 3}}
  %0 = loom.reduce_sum %x [3] : tensor<2x16x64xf32> -> tensor<2x16x64xf32>
  return
}

// -----

// reduce_mean rejects a reduced dimension listed twice.
func.func @reduce_mean_twice(%x: tensor<2x16x64xf32>) {
  // expected-error @+1 {{'loom.reduce_mean' op reduced dimension 2 is listed twice}}
  %0 = loom.reduce_mean %x [2, 2] : tensor<2x16x64xf32> -> tensor<2x16xf32>
  return
}

// -----

// reduce_max with keep_dims keeps the reduced dimensions as size 1.
func.func @reduce_max_keep_dims(%x: tensor<2x16x64xf32>) {
  // expected-error @+1 {{'loom.reduce_max' op result #0 has type 'tensor<2x16xf32>', the operands give 'tensor<2x16x1xf32>'}}
  %0 = loom.reduce_max %x [2] {keep_dims} : tensor<2x16x64xf32> -> tensor<2x16xf32>
  return
}

// -----

// reduce_sum rejects a negative reduced dimension.
func.func @reduce_sum_negative(%x: tensor<2x16xf32>) {
  // expected-error @+1 {{'loom.reduce_sum' op reduced dimension -1 is out of range for rank 2}}
  %0 = loom.reduce_sum %x [-1] : tensor<2x16xf32> -> tensor<2xf32>
  return
}

// -----

// matmul needs matrices (rank >= 2) on both sides.
func.func @matmul_rank(%a: tensor<64xf32>, %b: tensor<64x8xf32>) {
  // expected-error @+1 {{'loom.matmul' op operands need rank >= 2, got ranks 1 and 2}}
  %0 = loom.matmul %a, %b : (tensor<64xf32>, tensor<64x8xf32>) -> tensor<8xf32>
  return
}

// -----

// matmul's operands share the element type.
func.func @matmul_element_types(%a: tensor<16x64xbf16>, %b: tensor<64x8xf32>) {
  // expected-error @+1 {{'loom.matmul' op operands have different element types: 'bf16' and 'f32'}}
  %0 = loom.matmul %a, %b : (tensor<16x64xbf16>, tensor<64x8xf32>) -> tensor<16x8xbf16>
  return
}

// -----

// matmul's batched rhs has the batch dimensions of lhs.
func.func @matmul_batch(%a: tensor<2x16x64xf32>, %b: tensor<3x64x8xf32>) {
  // expected-error @+1 {{'loom.matmul' op rhs batch dimensions [3] differ from lhs batch dimensions [2]}}
  %0 = loom.matmul %a, %b : (tensor<2x16x64xf32>, tensor<3x64x8xf32>) -> tensor<2x16x8xf32>
  return
}

// -----

// matmul's contraction sizes agree (here after transpose_rhs).
func.func @matmul_contraction(%a: tensor<2x16x64xf32>, %b: tensor<64x32xf32>) {
  // expected-error @+1 {{'loom.matmul' op contraction sizes differ: lhs has 64, rhs has 32}}
  %0 = loom.matmul %a, %b {transpose_rhs} : (tensor<2x16x64xf32>, tensor<64x32xf32>) -> tensor<2x16x64xf32>
  return
}

// -----

// matmul's result type is [B..., M, N] (here M comes from transpose_lhs).
func.func @matmul_result_type(%a: tensor<64x16xf32>, %b: tensor<64x8xf32>) {
  // expected-error @+1 {{'loom.matmul' op result #0 has type 'tensor<64x8xf32>', the operands give 'tensor<16x8xf32>'}}
  %0 = loom.matmul %a, %b {transpose_lhs} : (tensor<64x16xf32>, tensor<64x8xf32>) -> tensor<64x8xf32>
  return
}

// -----

// layernorm needs an input with a dimension to normalize.
func.func @layernorm_rank0(%x: tensor<f32>) {
  // expected-error @+1 {{'loom.layernorm' op input must have rank >= 1}}
  %0 = loom.layernorm %x, %x, %x {epsilon = 1.0e-05 : f64} : tensor<f32>, tensor<f32>
  return
}

// -----

// layernorm's gamma is [D] for the last dimension D of the input.
func.func @layernorm_gamma_shape(%x: tensor<2x16x64xf32>, %g: tensor<32xf32>) {
  // expected-error @+1 {{'loom.layernorm' op gamma must be [64] (the normalized dimension), got 32}}
  %0 = loom.layernorm %x, %g, %g {epsilon = 1.0e-05 : f64} : tensor<2x16x64xf32>, tensor<32xf32>
  return
}

// -----

// layernorm's gamma has the input's element type.
func.func @layernorm_gamma_element_type(%x: tensor<2x16x64xf32>, %g: tensor<64xbf16>) {
  // expected-error @+1 {{'loom.layernorm' op gamma has element type 'bf16', input has 'f32'}}
  %0 = loom.layernorm %x, %g, %g {epsilon = 1.0e-05 : f64} : tensor<2x16x64xf32>, tensor<64xbf16>
  return
}

// -----

// layernorm rejects a negative epsilon.
func.func @layernorm_epsilon(%x: tensor<2x16x64xf32>, %g: tensor<64xf32>) {
  // expected-error @+1 {{'loom.layernorm' op epsilon must be non-negative, got -1e-05}}
  %0 = loom.layernorm %x, %g, %g {epsilon = -1.0e-05 : f64} : tensor<2x16x64xf32>, tensor<64xf32>
  return
}

// -----

// layernorm rejects a NaN epsilon.
func.func @layernorm_epsilon_nan(%x: tensor<2x16x64xf32>, %g: tensor<64xf32>) {
  // expected-error @+1 {{'loom.layernorm' op epsilon must be non-negative, got nan}}
  %0 = loom.layernorm %x, %g, %g {epsilon = 0x7FF8000000000000 : f64} : tensor<2x16x64xf32>, tensor<64xf32>
  return
}

// -----

// layernorm_grad checks gamma like layernorm.
func.func @layernorm_grad_gamma(%dy: tensor<2x16x64xf32>, %x: tensor<2x16x64xf32>, %g: tensor<1x64xf32>) {
  // expected-error @+1 {{'loom.layernorm_grad' op gamma must be [64] (the normalized dimension), got 1x64}}
  %dx, %dg, %db = loom.layernorm_grad %dy, %x, %g {epsilon = 1.0e-05 : f64} : tensor<2x16x64xf32>, tensor<1x64xf32>
  return
}

// -----

// layernorm_grad rejects a negative epsilon.
func.func @layernorm_grad_epsilon(%dy: tensor<2x16x64xf32>, %x: tensor<2x16x64xf32>, %g: tensor<64xf32>) {
  // expected-error @+1 {{'loom.layernorm_grad' op epsilon must be non-negative, got -1}}
  %dx, %dg, %db = loom.layernorm_grad %dy, %x, %g {epsilon = -1.0 : f64} : tensor<2x16x64xf32>, tensor<64xf32>
  return
}

// -----

// rmsnorm's gamma is [D] for the last dimension D of the input.
func.func @rmsnorm_gamma_shape(%x: tensor<2x16x64xf32>, %g: tensor<64x64xf32>) {
  // expected-error @+1 {{'loom.rmsnorm' op gamma must be [64] (the normalized dimension), got 64x64}}
  %0 = loom.rmsnorm %x, %g {epsilon = 1.0e-06 : f64} : tensor<2x16x64xf32>, tensor<64x64xf32>
  return
}

// -----

// rmsnorm rejects a negative epsilon.
func.func @rmsnorm_epsilon(%x: tensor<2x16x64xbf16>, %g: tensor<64xbf16>) {
  // expected-error @+1 {{'loom.rmsnorm' op epsilon must be non-negative, got -1e-06}}
  %0 = loom.rmsnorm %x, %g {epsilon = -1.0e-06 : f64} : tensor<2x16x64xbf16>, tensor<64xbf16>
  return
}

// -----

// rmsnorm_grad's gamma has the input's element type.
func.func @rmsnorm_grad_gamma_element_type(%dy: tensor<2x16x64xf16>, %x: tensor<2x16x64xf16>, %g: tensor<64xf32>) {
  // expected-error @+1 {{'loom.rmsnorm_grad' op gamma has element type 'f32', input has 'f16'}}
  %dx, %dg = loom.rmsnorm_grad %dy, %x, %g {epsilon = 1.0e-06 : f64} : tensor<2x16x64xf16>, tensor<64xf32>
  return
}

// -----

// rmsnorm_grad rejects a negative epsilon.
func.func @rmsnorm_grad_epsilon(%dy: tensor<2x16x64xf32>, %x: tensor<2x16x64xf32>, %g: tensor<64xf32>) {
  // expected-error @+1 {{'loom.rmsnorm_grad' op epsilon must be non-negative, got -1e-06}}
  %dx, %dg = loom.rmsnorm_grad %dy, %x, %g {epsilon = -1.0e-06 : f64} : tensor<2x16x64xf32>, tensor<64xf32>
  return
}

// -----

// softmax needs a last dimension to normalize over.
func.func @softmax_rank0(%x: tensor<f32>) {
  // expected-error @+1 {{'loom.softmax' op input must have rank >= 1}}
  %0 = loom.softmax %x : tensor<f32>
  return
}

// -----

// causal softmax masks a matrix: it needs two dimensions.
func.func @softmax_causal_rank1(%x: tensor<8xf32>) {
  // expected-error @+1 {{'loom.softmax' op causal softmax needs rank >= 2}}
  %0 = loom.softmax %x {causal} : tensor<8xf32>
  return
}

// -----

// causal softmax masks a square [S, S] matrix.
func.func @softmax_causal_square(%x: tensor<2x8x16xf32>) {
  // expected-error @+1 {{'loom.softmax' op causal softmax needs the last two dimensions equal, got 8 and 16}}
  %0 = loom.softmax %x {causal} : tensor<2x8x16xf32>
  return
}

// -----

// softmax_grad needs a last dimension too.
func.func @softmax_grad_rank0(%dy: tensor<f32>, %y: tensor<f32>) {
  // expected-error @+1 {{'loom.softmax_grad' op input must have rank >= 1}}
  %0 = loom.softmax_grad %dy, %y : tensor<f32>
  return
}

// -----

// rope needs a [batch, seq, heads, head_dim] input.
func.func @rope_rank(%x: tensor<2x16x64xf32>) {
  // expected-error @+1 {{'loom.rope' op input must be [batch, seq, heads, head_dim], got rank 3}}
  %0 = loom.rope %x {theta = 10000.0 : f64} : tensor<2x16x64xf32>
  return
}

// -----

// rope rotates pairs, so head_dim is even.
func.func @rope_odd_head_dim(%x: tensor<2x16x8x33xf32>) {
  // expected-error @+1 {{'loom.rope' op head_dim 33 must be even}}
  %0 = loom.rope %x {theta = 10000.0 : f64} : tensor<2x16x8x33xf32>
  return
}

// -----

// rope rejects a zero theta.
func.func @rope_theta(%x: tensor<2x16x8x32xf32>) {
  // expected-error @+1 {{'loom.rope' op theta must be positive}}
  %0 = loom.rope %x {theta = 0.0 : f64} : tensor<2x16x8x32xf32>
  return
}

// -----

// rope_grad rejects a negative theta.
func.func @rope_grad_theta(%dy: tensor<2x16x8x32xf32>) {
  // expected-error @+1 {{'loom.rope_grad' op theta must be positive}}
  %0 = loom.rope_grad %dy {theta = -10000.0 : f64} : tensor<2x16x8x32xf32>
  return
}

// -----

// rope_grad needs a [batch, seq, heads, head_dim] input.
func.func @rope_grad_rank(%dy: tensor<16x8x32xf32>) {
  // expected-error @+1 {{'loom.rope_grad' op input must be [batch, seq, heads, head_dim], got rank 3}}
  %0 = loom.rope_grad %dy {theta = 10000.0 : f64} : tensor<16x8x32xf32>
  return
}

// -----

// attention needs rank-4 q, k and v.
func.func @attention_rank(%q: tensor<2x16x256xf32>, %k: tensor<2x16x64xf32>, %v: tensor<2x16x64xf32>) {
  // expected-error @+1 {{'loom.attention' op q, k and v must be [batch, seq, heads, head_dim]}}
  %o, %lse = loom.attention %q, %k, %v {scale = 0.125 : f64} : (tensor<2x16x256xf32>, tensor<2x16x64xf32>, tensor<2x16x64xf32>) -> (tensor<2x16x256xf32>, tensor<2x8x16xf32>)
  return
}

// -----

// attention's k and v have the same type.
func.func @attention_kv_types(%q: tensor<2x16x8x32xf32>, %k: tensor<2x16x2x32xf32>, %v: tensor<2x16x2x64xf32>) {
  // expected-error @+1 {{'loom.attention' op k and v have different types: 'tensor<2x16x2x32xf32>' and 'tensor<2x16x2x64xf32>'}}
  %o, %lse = loom.attention %q, %k, %v {scale = 0.125 : f64} : (tensor<2x16x8x32xf32>, tensor<2x16x2x32xf32>, tensor<2x16x2x64xf32>) -> (tensor<2x16x8x32xf32>, tensor<2x8x16xf32>)
  return
}

// -----

// attention's q and k share the element type.
func.func @attention_qk_element_types(%q: tensor<2x16x8x32xbf16>, %k: tensor<2x16x2x32xf32>, %v: tensor<2x16x2x32xf32>) {
  // expected-error @+1 {{'loom.attention' op q and k have different element types}}
  %o, %lse = loom.attention %q, %k, %v {scale = 0.125 : f64} : (tensor<2x16x8x32xbf16>, tensor<2x16x2x32xf32>, tensor<2x16x2x32xf32>) -> (tensor<2x16x8x32xbf16>, tensor<2x8x16xf32>)
  return
}

// -----

// attention's k agrees with q in batch and head_dim.
func.func @attention_head_dim(%q: tensor<2x16x8x32xf32>, %k: tensor<2x16x2x64xf32>, %v: tensor<2x16x2x64xf32>) {
  // expected-error @+1 {{'loom.attention' op k is 2x16x2x64, which does not match q 2x16x8x32 in batch or head_dim}}
  %o, %lse = loom.attention %q, %k, %v {scale = 0.125 : f64} : (tensor<2x16x8x32xf32>, tensor<2x16x2x64xf32>, tensor<2x16x2x64xf32>) -> (tensor<2x16x8x32xf32>, tensor<2x8x16xf32>)
  return
}

// -----

// attention's key/value heads divide its query heads (grouped-query attention).
func.func @attention_heads(%q: tensor<2x16x8x32xf32>, %k: tensor<2x16x3x32xf32>, %v: tensor<2x16x3x32xf32>) {
  // expected-error @+1 {{'loom.attention' op 3 key/value heads do not divide 8 query heads}}
  %o, %lse = loom.attention %q, %k, %v {scale = 0.125 : f64} : (tensor<2x16x8x32xf32>, tensor<2x16x3x32xf32>, tensor<2x16x3x32xf32>) -> (tensor<2x16x8x32xf32>, tensor<2x8x16xf32>)
  return
}

// -----

// causal attention needs as many keys as queries (or a multiple on a shard).
func.func @attention_causal_lengths(%q: tensor<2x16x8x32xf32>, %k: tensor<2x8x2x32xf32>, %v: tensor<2x8x2x32xf32>) {
  // expected-error @+1 {{'loom.attention' op causal attention needs as many keys as queries (or, on a device, a multiple of them), got 16 and 8}}
  %o, %lse = loom.attention %q, %k, %v {causal, scale = 0.125 : f64} : (tensor<2x16x8x32xf32>, tensor<2x8x2x32xf32>, tensor<2x8x2x32xf32>) -> (tensor<2x16x8x32xf32>, tensor<2x8x16xf32>)
  return
}

// -----

// A causal shard of the sequence (fewer queries than keys) needs the split
// that places its queries among the keys.
func.func @attention_causal_shard(%q: tensor<2x8x8x32xf32>, %k: tensor<2x16x2x32xf32>, %v: tensor<2x16x2x32xf32>) {
  // expected-error @+1 {{'loom.attention' op has fewer queries than keys under the causal mask, but no loom.mask_split_axes to place them among the keys}}
  %o, %lse = loom.attention %q, %k, %v {causal, scale = 0.125 : f64} : (tensor<2x8x8x32xf32>, tensor<2x16x2x32xf32>, tensor<2x16x2x32xf32>) -> (tensor<2x8x8x32xf32>, tensor<2x8x8xf32>)
  return
}

// -----

// attention's log-sum-exp result is f32 whatever the input type.
func.func @attention_lse_type(%q: tensor<2x16x8x32xbf16>, %k: tensor<2x16x2x32xbf16>, %v: tensor<2x16x2x32xbf16>) {
  // expected-error @+1 {{'loom.attention' op result #1 has type 'tensor<2x8x16xbf16>', the operands give 'tensor<2x8x16xf32>'}}
  %o, %lse = loom.attention %q, %k, %v {scale = 0.125 : f64} : (tensor<2x16x8x32xbf16>, tensor<2x16x2x32xbf16>, tensor<2x16x2x32xbf16>) -> (tensor<2x16x8x32xbf16>, tensor<2x8x16xbf16>)
  return
}

// -----

// attention rejects a zero scale.
func.func @attention_scale(%q: tensor<2x16x8x32xf32>, %k: tensor<2x16x2x32xf32>, %v: tensor<2x16x2x32xf32>) {
  // expected-error @+1 {{'loom.attention' op scale must be positive}}
  %o, %lse = loom.attention %q, %k, %v {scale = 0.0 : f64} : (tensor<2x16x8x32xf32>, tensor<2x16x2x32xf32>, tensor<2x16x2x32xf32>) -> (tensor<2x16x8x32xf32>, tensor<2x8x16xf32>)
  return
}

// -----

// attention dropout needs the step that keys its mask.
func.func @attention_dropout_no_step(%q: tensor<2x16x4x16xf32>) {
  // expected-error @+1 {{'loom.attention' op dropout_rate needs a step operand}}
  %o, %lse = loom.attention %q, %q, %q {causal, scale = 0.25 : f64, dropout_rate = 0.1 : f64, dropout_seed = 1 : i64, dropout_key = 0 : i64} : (tensor<2x16x4x16xf32>, tensor<2x16x4x16xf32>, tensor<2x16x4x16xf32>) -> (tensor<2x16x4x16xf32>, tensor<2x4x16xf32>)
  return
}

// -----

// attention takes a step only for dropout.
func.func @attention_step_no_dropout(%q: tensor<2x16x4x16xf32>, %step: tensor<i64>) {
  // expected-error @+1 {{'loom.attention' op has a step operand but no dropout_rate}}
  %o, %lse = loom.attention %q, %q, %q, %step {causal, scale = 0.25 : f64} : (tensor<2x16x4x16xf32>, tensor<2x16x4x16xf32>, tensor<2x16x4x16xf32>, tensor<i64>) -> (tensor<2x16x4x16xf32>, tensor<2x4x16xf32>)
  return
}

// -----

// attention dropout's seed and key come with its rate.
func.func @attention_dropout_no_key(%q: tensor<2x16x4x16xf32>, %step: tensor<i64>) {
  // expected-error @+1 {{'loom.attention' op dropout_seed and dropout_key go with dropout_rate: all or none}}
  %o, %lse = loom.attention %q, %q, %q, %step {causal, scale = 0.25 : f64, dropout_rate = 0.1 : f64, dropout_seed = 1 : i64} : (tensor<2x16x4x16xf32>, tensor<2x16x4x16xf32>, tensor<2x16x4x16xf32>, tensor<i64>) -> (tensor<2x16x4x16xf32>, tensor<2x4x16xf32>)
  return
}

// -----

// attention dropout's rate is a probability below 1.
func.func @attention_dropout_rate(%q: tensor<2x16x4x16xf32>, %step: tensor<i64>) {
  // expected-error @+1 {{'loom.attention' op dropout_rate 1 is not in [0, 1)}}
  %o, %lse = loom.attention %q, %q, %q, %step {causal, scale = 0.25 : f64, dropout_rate = 1.0 : f64, dropout_seed = 1 : i64, dropout_key = 0 : i64} : (tensor<2x16x4x16xf32>, tensor<2x16x4x16xf32>, tensor<2x16x4x16xf32>, tensor<i64>) -> (tensor<2x16x4x16xf32>, tensor<2x4x16xf32>)
  return
}

// -----

// attention_grad checks its dropout like attention: no seed without a rate.
func.func @attention_grad_dropout_seed(%q: tensor<2x16x4x16xf32>, %lse: tensor<2x4x16xf32>) {
  // expected-error @+1 {{'loom.attention_grad' op dropout_seed and dropout_key go with dropout_rate: all or none}}
  %dq, %dk, %dv = loom.attention_grad %q, %q, %q, %q, %q, %lse {causal, scale = 0.25 : f64, dropout_seed = 1 : i64} : (tensor<2x16x4x16xf32>, tensor<2x16x4x16xf32>, tensor<2x16x4x16xf32>, tensor<2x16x4x16xf32>, tensor<2x16x4x16xf32>, tensor<2x4x16xf32>) -> (tensor<2x16x4x16xf32>, tensor<2x16x4x16xf32>, tensor<2x16x4x16xf32>)
  return
}

// -----

// attention_grad recomputes the dropout mask from the step.
func.func @attention_grad_dropout_no_step(%q: tensor<2x16x4x16xf32>, %lse: tensor<2x4x16xf32>) {
  // expected-error @+1 {{'loom.attention_grad' op dropout_rate needs a step operand}}
  %dq, %dk, %dv = loom.attention_grad %q, %q, %q, %q, %q, %lse {causal, scale = 0.25 : f64, dropout_rate = 0.1 : f64, dropout_seed = 1 : i64, dropout_key = 0 : i64} : (tensor<2x16x4x16xf32>, tensor<2x16x4x16xf32>, tensor<2x16x4x16xf32>, tensor<2x16x4x16xf32>, tensor<2x16x4x16xf32>, tensor<2x4x16xf32>) -> (tensor<2x16x4x16xf32>, tensor<2x16x4x16xf32>, tensor<2x16x4x16xf32>)
  return
}

// -----

// attention_grad's lse has the type attention gives.
func.func @attention_grad_lse(%do: tensor<2x16x8x32xf32>, %q: tensor<2x16x8x32xf32>, %k: tensor<2x16x2x32xf32>, %lse: tensor<2x16x8xf32>) {
  // expected-error @+1 {{'loom.attention_grad' op lse has type 'tensor<2x16x8xf32>', attention of q, k and v gives 'tensor<2x8x16xf32>'}}
  %dq, %dk, %dv = loom.attention_grad %do, %q, %k, %k, %q, %lse {scale = 0.125 : f64} : (tensor<2x16x8x32xf32>, tensor<2x16x8x32xf32>, tensor<2x16x2x32xf32>, tensor<2x16x2x32xf32>, tensor<2x16x8x32xf32>, tensor<2x16x8xf32>) -> (tensor<2x16x8x32xf32>, tensor<2x16x2x32xf32>, tensor<2x16x2x32xf32>)
  return
}

// -----

// attention_grad checks q, k and v like attention.
func.func @attention_grad_heads(%do: tensor<2x16x8x32xf32>, %q: tensor<2x16x8x32xf32>, %k: tensor<2x16x3x32xf32>, %lse: tensor<2x8x16xf32>) {
  // expected-error @+1 {{'loom.attention_grad' op 3 key/value heads do not divide 8 query heads}}
  %dq, %dk, %dv = loom.attention_grad %do, %q, %k, %k, %q, %lse {scale = 0.125 : f64} : (tensor<2x16x8x32xf32>, tensor<2x16x8x32xf32>, tensor<2x16x3x32xf32>, tensor<2x16x3x32xf32>, tensor<2x16x8x32xf32>, tensor<2x8x16xf32>) -> (tensor<2x16x8x32xf32>, tensor<2x16x3x32xf32>, tensor<2x16x3x32xf32>)
  return
}

// -----

// attention_grad rejects a negative scale.
func.func @attention_grad_scale(%do: tensor<2x16x8x32xf32>, %q: tensor<2x16x8x32xf32>, %k: tensor<2x16x2x32xf32>, %lse: tensor<2x8x16xf32>) {
  // expected-error @+1 {{'loom.attention_grad' op scale must be positive}}
  %dq, %dk, %dv = loom.attention_grad %do, %q, %k, %k, %q, %lse {causal, scale = -0.125 : f64} : (tensor<2x16x8x32xf32>, tensor<2x16x8x32xf32>, tensor<2x16x2x32xf32>, tensor<2x16x2x32xf32>, tensor<2x16x8x32xf32>, tensor<2x8x16xf32>) -> (tensor<2x16x8x32xf32>, tensor<2x16x2x32xf32>, tensor<2x16x2x32xf32>)
  return
}

// -----

// embedding's table is [vocab, dim].
func.func @embedding_table(%t: tensor<100xf32>, %ids: tensor<2x16xi32>) {
  // expected-error @+1 {{'loom.embedding' op table must be [vocab, dim], got 100}}
  %0 = loom.embedding %t, %ids : (tensor<100xf32>, tensor<2x16xi32>) -> tensor<2x16xf32>
  return
}

// -----

// embedding's result is the ids' shape followed by dim.
func.func @embedding_result_type(%t: tensor<100x64xf32>, %ids: tensor<2x16xi32>) {
  // expected-error @+1 {{'loom.embedding' op result #0 has type 'tensor<2x16x100xf32>', the operands give 'tensor<2x16x64xf32>'}}
  %0 = loom.embedding %t, %ids : (tensor<100x64xf32>, tensor<2x16xi32>) -> tensor<2x16x100xf32>
  return
}

// -----

// embedding_grad's result is [vocab, dim].
func.func @embedding_grad_rank(%dy: tensor<2x16x64xf32>, %ids: tensor<2x16xi32>) {
  // expected-error @+1 {{'loom.embedding_grad' op result must be [vocab, dim], got rank 3}}
  %0 = loom.embedding_grad %dy, %ids : (tensor<2x16x64xf32>, tensor<2x16xi32>) -> tensor<1x100x64xf32>
  return
}

// -----

// embedding_grad's dy is the ids' shape followed by the result's dim.
func.func @embedding_grad_dy(%dy: tensor<2x16x64xf32>, %ids: tensor<2x8xi32>) {
  // expected-error @+1 {{'loom.embedding_grad' op dy has type 'tensor<2x16x64xf32>', the ids and the result give 'tensor<2x8x64xf32>'}}
  %0 = loom.embedding_grad %dy, %ids : (tensor<2x16x64xf32>, tensor<2x8xi32>) -> tensor<100x64xf32>
  return
}

// -----

// cross_entropy's logits are [tokens..., vocab] with at least one token dimension.
func.func @cross_entropy_logits(%logits: tensor<100xf32>, %labels: tensor<i32>) {
  // expected-error @+1 {{'loom.cross_entropy' op logits must be [tokens..., vocab], got 100}}
  %0 = loom.cross_entropy %logits, %labels : (tensor<100xf32>, tensor<i32>) -> tensor<f32>
  return
}

// -----

// cross_entropy's labels are the logits' shape without the vocabulary.
func.func @cross_entropy_labels(%logits: tensor<2x16x100xf32>, %labels: tensor<2x8xi32>) {
  // expected-error @+1 {{'loom.cross_entropy' op labels 2x8 must have the shape of logits 2x16x100 without the vocabulary}}
  %0 = loom.cross_entropy %logits, %labels : (tensor<2x16x100xf32>, tensor<2x8xi32>) -> tensor<f32>
  return
}

// -----

// cross_entropy_grad checks the labels like cross_entropy.
func.func @cross_entropy_grad_labels(%dloss: tensor<f32>, %logits: tensor<2x16x100xf32>, %labels: tensor<2x16x100xi32>) {
  // expected-error @+1 {{'loom.cross_entropy_grad' op labels 2x16x100 must have the shape of logits 2x16x100 without the vocabulary}}
  %0 = loom.cross_entropy_grad %dloss, %logits, %labels : (tensor<f32>, tensor<2x16x100xf32>, tensor<2x16x100xi32>) -> tensor<2x16x100xf32>
  return
}

// -----

// cross_entropy_grad checks the logits' rank like cross_entropy.
func.func @cross_entropy_grad_logits(%dloss: tensor<f32>, %logits: tensor<100xf32>, %labels: tensor<i32>) {
  // expected-error @+1 {{'loom.cross_entropy_grad' op logits must be [tokens..., vocab], got 100}}
  %0 = loom.cross_entropy_grad %dloss, %logits, %labels : (tensor<f32>, tensor<100xf32>, tensor<i32>) -> tensor<100xf32>
  return
}

// -----

// adamw_update's param (master weights) is f32.
func.func @adamw_param_f32(%p: tensor<64x64xbf16>, %g: tensor<64x64xbf16>, %step: tensor<i64>) {
  // expected-error @+1 {{'loom.adamw_update' op param must be f32 (master weights), got 'bf16'}}
  %p2, %m2, %v2 = loom.adamw_update %p, %g, %p, %p, %step {beta1 = 0.9 : f64, beta2 = 0.95 : f64, eps = 1.0e-08 : f64, lr = 3.0e-04 : f64, weight_decay = 0.1 : f64} : tensor<64x64xbf16>, tensor<64x64xbf16>, tensor<i64>
  return
}

// -----

// adamw_update's grad has the shape of param.
func.func @adamw_grad_shape(%p: tensor<64x64xf32>, %g: tensor<64x32xbf16>, %step: tensor<i64>) {
  // expected-error @+1 {{'loom.adamw_update' op grad type 'tensor<64x32xbf16>' does not have the shape of param 'tensor<64x64xf32>'}}
  %p2, %m2, %v2 = loom.adamw_update %p, %g, %p, %p, %step {beta1 = 0.9 : f64, beta2 = 0.95 : f64, eps = 1.0e-08 : f64, lr = 3.0e-04 : f64, weight_decay = 0.1 : f64} : tensor<64x64xf32>, tensor<64x32xbf16>, tensor<i64>
  return
}

// -----

// adamw_update rejects a negative learning rate.
func.func @adamw_lr(%p: tensor<64x64xf32>, %g: tensor<64x64xbf16>, %step: tensor<i64>) {
  // expected-error @+1 {{'loom.adamw_update' op lr = -0.001 is not in [0, inf)}}
  %p2, %m2, %v2 = loom.adamw_update %p, %g, %p, %p, %step {beta1 = 0.9 : f64, beta2 = 0.95 : f64, eps = 1.0e-08 : f64, lr = -1.0e-03 : f64, weight_decay = 0.1 : f64} : tensor<64x64xf32>, tensor<64x64xbf16>, tensor<i64>
  return
}

// -----

// adamw_update rejects beta1 = 1.
func.func @adamw_beta1(%p: tensor<64x64xf32>, %g: tensor<64x64xbf16>, %step: tensor<i64>) {
  // expected-error @+1 {{'loom.adamw_update' op beta1 = 1 is not in [0, 1)}}
  %p2, %m2, %v2 = loom.adamw_update %p, %g, %p, %p, %step {beta1 = 1.0 : f64, beta2 = 0.95 : f64, eps = 1.0e-08 : f64, lr = 3.0e-04 : f64, weight_decay = 0.1 : f64} : tensor<64x64xf32>, tensor<64x64xbf16>, tensor<i64>
  return
}

// -----

// adamw_update rejects a negative beta2.
func.func @adamw_beta2(%p: tensor<64x64xf32>, %g: tensor<64x64xbf16>, %step: tensor<i64>) {
  // expected-error @+1 {{'loom.adamw_update' op beta2 = -0.5 is not in [0, 1)}}
  %p2, %m2, %v2 = loom.adamw_update %p, %g, %p, %p, %step {beta1 = 0.9 : f64, beta2 = -0.5 : f64, eps = 1.0e-08 : f64, lr = 3.0e-04 : f64, weight_decay = 0.1 : f64} : tensor<64x64xf32>, tensor<64x64xbf16>, tensor<i64>
  return
}

// -----

// adamw_update rejects eps = 0 (its interval is open at 0).
func.func @adamw_eps(%p: tensor<64x64xf32>, %g: tensor<64x64xbf16>, %step: tensor<i64>) {
  // expected-error @+1 {{'loom.adamw_update' op eps = 0 is not in (0, inf)}}
  %p2, %m2, %v2 = loom.adamw_update %p, %g, %p, %p, %step {beta1 = 0.9 : f64, beta2 = 0.95 : f64, eps = 0.0 : f64, lr = 3.0e-04 : f64, weight_decay = 0.1 : f64} : tensor<64x64xf32>, tensor<64x64xbf16>, tensor<i64>
  return
}

// -----

// adamw_update rejects a negative weight decay.
func.func @adamw_weight_decay(%p: tensor<64x64xf32>, %g: tensor<64x64xbf16>, %step: tensor<i64>) {
  // expected-error @+1 {{'loom.adamw_update' op weight_decay = -0.1 is not in [0, inf)}}
  %p2, %m2, %v2 = loom.adamw_update %p, %g, %p, %p, %step {beta1 = 0.9 : f64, beta2 = 0.95 : f64, eps = 1.0e-08 : f64, lr = 3.0e-04 : f64, weight_decay = -0.1 : f64} : tensor<64x64xf32>, tensor<64x64xbf16>, tensor<i64>
  return
}

// -----

// sgd_update's param (master weights) is f32.
func.func @sgd_param_f32(%p: tensor<64xf16>, %g: tensor<64xf16>) {
  // expected-error @+1 {{'loom.sgd_update' op param must be f32 (master weights), got 'f16'}}
  %p2 = loom.sgd_update %p, %g {lr = 1.0e-02 : f64, weight_decay = 0.0 : f64} : tensor<64xf16>, tensor<64xf16>
  return
}

// -----

// sgd_update's grad has the shape of param.
func.func @sgd_grad_shape(%p: tensor<64xf32>, %g: tensor<1x64xf32>) {
  // expected-error @+1 {{'loom.sgd_update' op grad type 'tensor<1x64xf32>' does not have the shape of param 'tensor<64xf32>'}}
  %p2 = loom.sgd_update %p, %g {lr = 1.0e-02 : f64, weight_decay = 0.0 : f64} : tensor<64xf32>, tensor<1x64xf32>
  return
}

// -----

// sgd_update rejects a NaN learning rate.
func.func @sgd_lr(%p: tensor<64xf32>, %g: tensor<64xf32>) {
  // expected-error @+1 {{'loom.sgd_update' op lr = nan is not in [0, inf)}}
  %p2 = loom.sgd_update %p, %g {lr = 0x7FF8000000000000 : f64, weight_decay = 0.0 : f64} : tensor<64xf32>, tensor<64xf32>
  return
}

// -----

// sgd_update rejects a negative weight decay.
func.func @sgd_weight_decay(%p: tensor<64xf32>, %g: tensor<64xf32>) {
  // expected-error @+1 {{'loom.sgd_update' op weight_decay = -0.01 is not in [0, inf)}}
  %p2 = loom.sgd_update %p, %g {lr = 1.0e-02 : f64, weight_decay = -1.0e-02 : f64} : tensor<64xf32>, tensor<64xf32>
  return
}

// -----

// Zero-size dimensions are rejected by the type constraint (they would make
// factor sizes zero, and a zero head count divide by zero).
func.func @attention_zero_kv_heads(%q: tensor<2x16x8x32xf32>, %k: tensor<2x16x0x32xf32>) {
  // expected-error @+1 {{'loom.attention' op operand #1 must be f32, bf16 or f16 tensor with a static shape and no zero-size dimension, but got 'tensor<2x16x0x32xf32>'}}
  %o, %lse = loom.attention %q, %k, %k {scale = 0.125 : f64} : (tensor<2x16x8x32xf32>, tensor<2x16x0x32xf32>, tensor<2x16x0x32xf32>) -> (tensor<2x16x8x32xf32>, tensor<2x8x16xf32>)
  return
}

// -----

// An offset near INT64_MAX must not overflow the bounds check.
func.func @slice_offset_overflow(%x: tensor<4xf32>) {
  // expected-error @+1 {{'loom.slice' op dimension 0: 2 elements at offsets 9223372036854775807 do not fit in 4}}
  %0 = loom.slice %x [9223372036854775807] : tensor<4xf32> -> tensor<2xf32>
  return
}

// -----

// The same for pad.
func.func @pad_low_overflow(%x: tensor<2xf32>) {
  // expected-error @+1 {{'loom.pad' op dimension 0: 2 elements at low 9223372036854775807 do not fit in 4}}
  %0 = loom.pad %x low [9223372036854775807] : tensor<2xf32> -> tensor<4xf32>
  return
}

// -----

// A batched rhs needs an lhs with the same batch dimensions.
func.func @matmul_batched_rhs_only(%a: tensor<16x64xf32>, %b: tensor<2x64x8xf32>) {
  // expected-error @+1 {{'loom.matmul' op rhs batch dimensions [2] differ from lhs batch dimensions []}}
  %0 = loom.matmul %a, %b : (tensor<16x64xf32>, tensor<2x64x8xf32>) -> tensor<16x8xf32>
  return
}

// -----

// reduce_max_grad takes the gradient of the forward reduction's result.
func.func @reduce_max_grad_dy(%dy: tensor<8xf32>, %x: tensor<4x8xf32>) {
  // expected-error @+1 {{'loom.reduce_max_grad' op dy has type 'tensor<8xf32>', the reduction of x gives 'tensor<4xf32>'}}
  %0 = loom.reduce_max_grad %dy, %x [1] : tensor<8xf32>, tensor<4x8xf32>
  return
}

// -----

// loom.fused yields values typed as its results.
func.func @fused_yield_types(%a: tensor<4xf32>) -> tensor<4xbf16> {
  // expected-error @+1 {{'loom.fused' op yields values of types other than its results'}}
  %0 = loom.fused(%a) : (tensor<4xf32>) -> tensor<4xbf16> {
  ^bb0(%x: tensor<4xf32>):
    %e = loom.exp %x : tensor<4xf32>
    loom.yield %e : tensor<4xf32>
  }
  return %0 : tensor<4xbf16>
}

// -----

// loom.fused's block arguments are its inputs.
func.func @fused_arguments(%a: tensor<4xf32>) -> tensor<4xf32> {
  // expected-error @+1 {{'loom.fused' op has block arguments of types other than its inputs'}}
  %0 = loom.fused(%a) : (tensor<4xf32>) -> tensor<4xf32> {
  ^bb0(%x: tensor<8xf32>):
    %e = loom.exp %x : tensor<8xf32>
    loom.yield %a : tensor<4xf32>
  }
  return %0 : tensor<4xf32>
}

// -----

// Only loom ops, not nested loom.fused, go inside.
func.func @fused_body(%a: tensor<4xf32>) -> tensor<4xf32> {
  %0 = loom.fused(%a) : (tensor<4xf32>) -> tensor<4xf32> {
  ^bb0(%x: tensor<4xf32>):
    // expected-error @+1 {{'arith.addf' op cannot be inside loom.fused (loom ops only, not nested)}}
    %e = arith.addf %x, %x : tensor<4xf32>
    loom.yield %e : tensor<4xf32>
  }
  return %0 : tensor<4xf32>
}
