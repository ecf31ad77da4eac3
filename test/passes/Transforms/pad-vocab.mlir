// RUN: loom-opt %s -split-input-file --loom-pad-vocab | FileCheck %s
// RUN: loom-opt %s -split-input-file --loom-pad-vocab="multiple=2" | FileCheck %s --check-prefix=TWO

// A tied head of vocabulary 250 in a training step: the weight is padded
// to 256 rows, the logits get a bias of 0 over the vocabulary and -inf over
// the padding, the loss, its gradient and both backward matmuls read the
// padded values, and the weight gradient is cut back to 250 rows.
// CHECK-LABEL: func.func @head
// CHECK-SAME: (%[[H:.+]]: tensor<2x3x8xf32>, %[[W:.+]]: tensor<250x8xf32>, %[[Y:.+]]: tensor<2x3xi32>, %[[D:.+]]: tensor<f32>)
// CHECK: %[[WP:.+]] = loom.pad %[[W]] low [0, 0] : tensor<250x8xf32> -> tensor<256x8xf32>
// CHECK: %[[MASK:.+]] = arith.constant dense<"0x{{(00000000){250}(000080FF){6}"}}> : tensor<256xf32>
// CHECK: %[[P:.+]] = loom.matmul %[[H]], %[[WP]] {transpose_rhs} : (tensor<2x3x8xf32>, tensor<256x8xf32>) -> tensor<2x3x256xf32>
// CHECK: %[[L:.+]] = loom.add %[[P]], %[[MASK]] : (tensor<2x3x256xf32>, tensor<256xf32>) -> tensor<2x3x256xf32>
// CHECK: %[[LOSS:.+]] = loom.cross_entropy %[[L]], %[[Y]] : (tensor<2x3x256xf32>, tensor<2x3xi32>) -> tensor<f32>
// CHECK: %[[G:.+]] = loom.cross_entropy_grad %[[D]], %[[L]], %[[Y]] : (tensor<f32>, tensor<2x3x256xf32>, tensor<2x3xi32>) -> tensor<2x3x256xf32>
// CHECK: %[[DH:.+]] = loom.matmul %[[G]], %[[WP]] : (tensor<2x3x256xf32>, tensor<256x8xf32>) -> tensor<2x3x8xf32>
// CHECK: %[[G2:.+]] = loom.reshape %[[G]] : tensor<2x3x256xf32> -> tensor<6x256xf32>
// CHECK: %[[DWP:.+]] = loom.matmul %[[G2]], %{{.+}} {transpose_lhs} : (tensor<6x256xf32>, tensor<6x8xf32>) -> tensor<256x8xf32>
// CHECK: %[[DW:.+]] = loom.slice %[[DWP]] [0, 0] : tensor<256x8xf32> -> tensor<250x8xf32>
// CHECK: return %[[LOSS]], %[[DH]], %[[DW]]
// With multiple=2 the vocabulary is one already: nothing changes.
// TWO-LABEL: func.func @head
// TWO-NOT: loom.pad
// TWO: loom.matmul %{{.+}}, %{{.+}} {transpose_rhs} : (tensor<2x3x8xf32>, tensor<250x8xf32>) -> tensor<2x3x250xf32>
func.func @head(%h: tensor<2x3x8xf32>, %w: tensor<250x8xf32>, %y: tensor<2x3xi32>, %d: tensor<f32>)
    -> (tensor<f32>, tensor<2x3x8xf32>, tensor<250x8xf32>) {
  %logits = loom.matmul %h, %w {transpose_rhs} : (tensor<2x3x8xf32>, tensor<250x8xf32>) -> tensor<2x3x250xf32>
  %loss = loom.cross_entropy %logits, %y : (tensor<2x3x250xf32>, tensor<2x3xi32>) -> tensor<f32>
  %g = loom.cross_entropy_grad %d, %logits, %y : (tensor<f32>, tensor<2x3x250xf32>, tensor<2x3xi32>) -> tensor<2x3x250xf32>
  %dh = loom.matmul %g, %w : (tensor<2x3x250xf32>, tensor<250x8xf32>) -> tensor<2x3x8xf32>
  %h2 = loom.reshape %h : tensor<2x3x8xf32> -> tensor<6x8xf32>
  %g2 = loom.reshape %g : tensor<2x3x250xf32> -> tensor<6x250xf32>
  %dw = loom.matmul %g2, %h2 {transpose_lhs} : (tensor<6x250xf32>, tensor<6x8xf32>) -> tensor<250x8xf32>
  return %loss, %dh, %dw : tensor<f32>, tensor<2x3x8xf32>, tensor<250x8xf32>
}

// -----

// A bf16 head read by a loss alone (a forward function): the mask is
// bf16 (-inf is 0xFF80, bytes 80 FF), and a rank-2 gradient read as the weight
// gradient's lhs directly is padded too.
// CHECK-LABEL: func.func @bf16_forward
// CHECK: loom.pad %{{.+}} low [0, 0] : tensor<100x8xbf16> -> tensor<128x8xbf16>
// CHECK: arith.constant dense<"0x{{(0000){100}(80FF){28}"}}> : tensor<128xbf16>
// CHECK: loom.cross_entropy %{{.+}}, %{{.+}} : (tensor<6x128xbf16>, tensor<6xi32>) -> tensor<f32>
// CHECK-LABEL: func.func @rank2_weight_grad
// CHECK: %[[G:.+]] = loom.cross_entropy_grad {{.+}} -> tensor<6x128xf32>
// CHECK: %[[DWP:.+]] = loom.matmul %[[G]], %{{.+}} {transpose_lhs} : (tensor<6x128xf32>, tensor<6x8xf32>) -> tensor<128x8xf32>
// CHECK: loom.slice %[[DWP]] [0, 0] : tensor<128x8xf32> -> tensor<100x8xf32>
func.func @bf16_forward(%h: tensor<6x8xbf16>, %w: tensor<100x8xbf16>, %y: tensor<6xi32>) -> tensor<f32> {
  %logits = loom.matmul %h, %w {transpose_rhs} : (tensor<6x8xbf16>, tensor<100x8xbf16>) -> tensor<6x100xbf16>
  %loss = loom.cross_entropy %logits, %y : (tensor<6x100xbf16>, tensor<6xi32>) -> tensor<f32>
  return %loss : tensor<f32>
}
func.func @rank2_weight_grad(%h: tensor<6x8xf32>, %w: tensor<100x8xf32>, %y: tensor<6xi32>, %d: tensor<f32>) -> tensor<100x8xf32> {
  %logits = loom.matmul %h, %w {transpose_rhs} : (tensor<6x8xf32>, tensor<100x8xf32>) -> tensor<6x100xf32>
  %g = loom.cross_entropy_grad %d, %logits, %y : (tensor<f32>, tensor<6x100xf32>, tensor<6xi32>) -> tensor<6x100xf32>
  %dw = loom.matmul %g, %h {transpose_lhs} : (tensor<6x100xf32>, tensor<6x8xf32>) -> tensor<100x8xf32>
  return %dw : tensor<100x8xf32>
}

// -----

// A gradient reshaped where nothing reads the reshape is widened all the
// same; the gradient of the input against another [V, d] value (ZeRO's
// regather of the weight for the backward) pads that value too.
// CHECK-LABEL: func.func @unread_reshape_and_regather
// CHECK-SAME: (%{{.+}}: tensor<6x8xf32>, %[[W:.+]]: tensor<100x8xf32>, %{{.+}}: tensor<6xi32>, %{{.+}}: tensor<f32>, %[[W2:.+]]: tensor<100x8xf32>)
// CHECK: %[[G:.+]] = loom.cross_entropy_grad {{.+}} -> tensor<6x128xf32>
// CHECK: loom.reshape %[[G]] : tensor<6x128xf32> -> tensor<6x128xf32>
// CHECK: %[[W2P:.+]] = loom.pad %[[W2]] low [0, 0] : tensor<100x8xf32> -> tensor<128x8xf32>
// CHECK: loom.matmul %[[G]], %[[W2P]] : (tensor<6x128xf32>, tensor<128x8xf32>) -> tensor<6x8xf32>
func.func @unread_reshape_and_regather(%h: tensor<6x8xf32>, %w: tensor<100x8xf32>, %y: tensor<6xi32>,
                                       %d: tensor<f32>, %w2: tensor<100x8xf32>) -> tensor<6x8xf32> {
  %logits = loom.matmul %h, %w {transpose_rhs} : (tensor<6x8xf32>, tensor<100x8xf32>) -> tensor<6x100xf32>
  %g = loom.cross_entropy_grad %d, %logits, %y : (tensor<f32>, tensor<6x100xf32>, tensor<6xi32>) -> tensor<6x100xf32>
  %unread = loom.reshape %g : tensor<6x100xf32> -> tensor<6x100xf32>
  %dh = loom.matmul %g, %w2 : (tensor<6x100xf32>, tensor<100x8xf32>) -> tensor<6x8xf32>
  return %dh : tensor<6x8xf32>
}

// -----

// Heads the pass leaves alone: a vocabulary that is a multiple of 64
// already; logits that another op reads too (their padded columns would
// show); a gradient that another op reads (a reduction over the padded
// columns); an untransposed weight [d, V].
// CHECK-LABEL: func.func @aligned
// CHECK-NOT: loom.pad
// CHECK-LABEL: func.func @logits_read_elsewhere
// CHECK-NOT: loom.pad
// CHECK-LABEL: func.func @gradient_read_elsewhere
// CHECK-NOT: loom.pad
// CHECK-LABEL: func.func @untransposed_weight
// CHECK-NOT: loom.pad
// CHECK: return
func.func @aligned(%h: tensor<6x8xf32>, %w: tensor<128x8xf32>, %y: tensor<6xi32>) -> tensor<f32> {
  %logits = loom.matmul %h, %w {transpose_rhs} : (tensor<6x8xf32>, tensor<128x8xf32>) -> tensor<6x128xf32>
  %loss = loom.cross_entropy %logits, %y : (tensor<6x128xf32>, tensor<6xi32>) -> tensor<f32>
  return %loss : tensor<f32>
}
func.func @logits_read_elsewhere(%h: tensor<6x8xf32>, %w: tensor<100x8xf32>, %y: tensor<6xi32>)
    -> (tensor<f32>, tensor<6x100xf32>) {
  %logits = loom.matmul %h, %w {transpose_rhs} : (tensor<6x8xf32>, tensor<100x8xf32>) -> tensor<6x100xf32>
  %loss = loom.cross_entropy %logits, %y : (tensor<6x100xf32>, tensor<6xi32>) -> tensor<f32>
  %p = loom.softmax %logits : tensor<6x100xf32>
  return %loss, %p : tensor<f32>, tensor<6x100xf32>
}
func.func @gradient_read_elsewhere(%h: tensor<6x8xf32>, %w: tensor<100x8xf32>, %y: tensor<6xi32>, %d: tensor<f32>)
    -> tensor<6xf32> {
  %logits = loom.matmul %h, %w {transpose_rhs} : (tensor<6x8xf32>, tensor<100x8xf32>) -> tensor<6x100xf32>
  %g = loom.cross_entropy_grad %d, %logits, %y : (tensor<f32>, tensor<6x100xf32>, tensor<6xi32>) -> tensor<6x100xf32>
  %s = loom.reduce_sum %g [1] : tensor<6x100xf32> -> tensor<6xf32>
  return %s : tensor<6xf32>
}
func.func @untransposed_weight(%h: tensor<6x8xf32>, %w: tensor<8x100xf32>, %y: tensor<6xi32>) -> tensor<f32> {
  %logits = loom.matmul %h, %w : (tensor<6x8xf32>, tensor<8x100xf32>) -> tensor<6x100xf32>
  %loss = loom.cross_entropy %logits, %y : (tensor<6x100xf32>, tensor<6xi32>) -> tensor<f32>
  return %loss : tensor<f32>
}

// -----

// A multiple below 1 (or above 65536) is refused.
// RUN: not loom-opt %s -split-input-file --loom-pad-vocab="multiple=0" 2>&1 | FileCheck %s --check-prefix=ZERO
// ZERO: error: --loom-pad-vocab: multiple must be 1 to 65536, not 0
