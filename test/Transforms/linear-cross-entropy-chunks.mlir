// loom-linear-cross-entropy-chunks: the fused LM head and its gradient
// become ordinary ops over chunks of rows (here 4 rows: chunks of 4, 4
// and 2 of the 10), and the expanded functions still compute the fused
// op: run by the interpreter in f64 and checked against NumPy's float64
// head (ref.linear_cross_entropy) for mean and sum with ignored labels in
// two chunks, and reduction none with an untied [C, V] weight; the fused
// functions, interpreted as they are, pass the same check. A bf16 head
// (interpreted in bf16: logits, dlogits, dx and dw rounded) against the
// reference of its bf16 inputs within 1e-2.

// RUN: loom-opt --loom-linear-cross-entropy-chunks=rows=4 %s | FileCheck %s
// RUN: loom-opt --loom-linear-cross-entropy-chunks %s | FileCheck %s --check-prefix=ONE
// RUN: loom-opt --loom-linear-cross-entropy-chunks=rows=4 --cse %s | FileCheck %s --check-prefix=CSE
// RUN: not loom-opt --loom-linear-cross-entropy-chunks=rows=-1 %s 2>&1 | FileCheck %s --check-prefix=BAD
// RUN: not loom-opt --loom-linear-cross-entropy-chunks=chunk-elements=0 %s 2>&1 | FileCheck %s --check-prefix=BAD0
// BAD: error: loom-linear-cross-entropy-chunks: rows (loomc --lm-head-rows) must be >= 0, not -1, and chunk-elements >= 1, not 67108864
// BAD0: error: loom-linear-cross-entropy-chunks: rows (loomc --lm-head-rows) must be >= 0, not 0, and chunk-elements >= 1, not 0
// RUN: rm -rf %t && mkdir -p %t
// RUN: loom-opt --loom-linear-cross-entropy-chunks=rows=4 %s -o %t/chunks.mlir
// RUN: %python %S/Inputs/linear_cross_entropy_check.py make %t/in
// RUN: for f in mean_tied sum_tied none_untied mean_tied_bf16; do \
// RUN:   flags=--f64; [ $f = mean_tied_bf16 ] && flags=; \
// RUN:   loom-interp %t/chunks.mlir $flags --entry=$f --input x=%t/in/$f/x.npy --input w=%t/in/$f/w.npy --input y=%t/in/$f/y.npy --input g=%t/in/$f/g.npy --output-dir %t/chunks/$f && \
// RUN:   loom-interp %s $flags --entry=$f --input x=%t/in/$f/x.npy --input w=%t/in/$f/w.npy --input y=%t/in/$f/y.npy --input g=%t/in/$f/g.npy --output-dir %t/fused/$f || exit 1; done
// RUN: %python %S/Inputs/linear_cross_entropy_check.py check %t/in %t/chunks | FileCheck %s --check-prefix=NUM
// RUN: %python %S/Inputs/linear_cross_entropy_check.py check %t/in %t/fused | FileCheck %s --check-prefix=NUM

// NUM-NOT: BAD
// NUM-COUNT-16: OK

// The forward: three chunks, each a GEMM of its rows of x, the row
// log-sum-exp and a per-row cross-entropy; the mean over the labels
// counted. The backward recomputes each chunk's logits, and dw is the
// running sum of the chunks' products.
// CHECK-LABEL: func.func @mean_tied
// CHECK:         loom.matmul %{{.*}}, %arg1 {loom.lm_head = "forward, chunk 1 of 3", transpose_b} : (tensor<4x4xf32>, tensor<7x4xf32>) -> tensor<4x7xf32>
// CHECK:         loom.matmul %{{.*}}, %arg1 {loom.lm_head = "forward, chunk 2 of 3", transpose_b} : (tensor<4x4xf32>, tensor<7x4xf32>) -> tensor<4x7xf32>
// CHECK:         loom.matmul %{{.*}}, %arg1 {loom.lm_head = "forward, chunk 3 of 3", transpose_b} : (tensor<2x4xf32>, tensor<7x4xf32>) -> tensor<2x7xf32>
// CHECK:         loom.concat {{.*}} dim = 0 : (tensor<4xf32>, tensor<4xf32>, tensor<2xf32>) -> tensor<10xf32>
// CHECK:         loom.slice %arg0 start = [0, 0] limit = [4, 4]
// CHECK:         loom.matmul %{{.*}}, %arg1 {loom.lm_head = "backward, chunk 1 of 3", transpose_b} : (tensor<4x4xf32>, tensor<7x4xf32>) -> tensor<4x7xf32>
// CHECK:         loom.matmul %{{.*}}, %arg1 : (tensor<4x7xf32>, tensor<7x4xf32>) -> tensor<4x4xf32>
// CHECK:         loom.matmul %{{.*}}, %{{.*}} {transpose_a} : (tensor<4x7xf32>, tensor<4x4xf32>) -> tensor<7x4xf32>
// CHECK:         loom.slice %arg0 start = [8, 0] limit = [10, 4]
// CHECK:         loom.concat {{.*}} dim = 0 : (tensor<4x4xf32>, tensor<4x4xf32>, tensor<2x4xf32>) -> tensor<10x4xf32>
// CHECK-NOT:     loom.linear_cross_entropy
// CHECK:         return
// CHECK-LABEL: func.func @none_untied
// CHECK:         loom.matmul %{{.*}}, %{{.*}} {transpose_a} : (tensor<4x4xf32>, tensor<4x7xf32>) -> tensor<4x7xf32>
// CHECK-NOT:     loom.linear_cross_entropy
// In bf16: the GEMMs in bf16, the row statistics in f32, dlogits rounded
// to bf16, and dw summed in f32 over the chunks, rounded once.
// CHECK-LABEL: func.func @mean_tied_bf16
// CHECK:         loom.matmul %{{.*}}, %arg1 {loom.lm_head = "forward, chunk 1 of 3", transpose_b} : (tensor<4x4xbf16>, tensor<7x4xbf16>) -> tensor<4x7xbf16>
// CHECK:         loom.cross_entropy %{{.*}}, %{{.*}} reduction = none {ignore_index = -100 : i64} : (tensor<4x7xbf16>, tensor<4xi64>) -> tensor<4xf32>
// CHECK:         loom.softmax %{{.*}} axis = 1 : tensor<4x7xf32>
// CHECK:         %[[D:.+]] = loom.cast %{{.*}} : tensor<4x7xf32> -> tensor<4x7xbf16>
// CHECK:         loom.matmul %[[D]], %{{.*}} {transpose_a} : (tensor<4x7xbf16>, tensor<4x4xbf16>) -> tensor<7x4xbf16>
// CHECK-NEXT:    loom.cast %{{.*}} : tensor<7x4xbf16> -> tensor<7x4xf32>
// CHECK:         loom.add %{{.*}}, %{{.*}} : tensor<7x4xf32>
// CHECK:         loom.cast %{{.*}} : tensor<7x4xf32> -> tensor<7x4xbf16>
// CHECK-NOT:     loom.linear_cross_entropy

// The backward's logits GEMMs carry their pass and chunk, so CSE does not
// merge them with the forward's (which would keep every chunk's logits
// alive from the forward to the backward: all of them).
// CSE-LABEL: func.func @mean_tied
// CSE: loom.matmul {{.*}} {loom.lm_head = "forward, chunk 1 of 3", transpose_b}
// CSE: loom.matmul {{.*}} {loom.lm_head = "backward, chunk 1 of 3", transpose_b}
// CSE: loom.matmul {{.*}} {loom.lm_head = "backward, chunk 2 of 3", transpose_b}
// CSE: loom.matmul {{.*}} {loom.lm_head = "backward, chunk 3 of 3", transpose_b}

// One chunk: no slices, no concatenation.
// ONE-LABEL: func.func @mean_tied
// ONE:         loom.matmul %arg0, %arg1 {loom.lm_head = "forward, chunk 1 of 1", transpose_b} : (tensor<10x4xf32>, tensor<7x4xf32>) -> tensor<10x7xf32>
// ONE-NOT:     loom.slice
// ONE-NOT:     loom.concat
// ONE-NOT:     loom.linear_cross_entropy
// ONE:         return

func.func @mean_tied(%x: tensor<10x4xf32> {loom.input = "x"}, %w: tensor<7x4xf32> {loom.input = "w"},
                     %y: tensor<10xi64> {loom.input = "y"}, %g: tensor<f32> {loom.input = "g"})
    -> (tensor<f32> {loom.output = "loss"}, tensor<10xf32> {loom.output = "lse"},
        tensor<10x4xf32> {loom.output = "dx"}, tensor<7x4xf32> {loom.output = "dw"}) {
  %l, %lse = loom.linear_cross_entropy %x, %w, %y reduction = mean {transpose_w, ignore_index = -100 : i64}
      : (tensor<10x4xf32>, tensor<7x4xf32>, tensor<10xi64>) -> (tensor<f32>, tensor<10xf32>)
  %dx, %dw = loom.linear_cross_entropy_grad %x, %w, %y, %lse, %g reduction = mean {transpose_w, ignore_index = -100 : i64}
      : (tensor<10x4xf32>, tensor<7x4xf32>, tensor<10xi64>, tensor<10xf32>, tensor<f32>) -> (tensor<10x4xf32>, tensor<7x4xf32>)
  return %l, %lse, %dx, %dw : tensor<f32>, tensor<10xf32>, tensor<10x4xf32>, tensor<7x4xf32>
}

func.func @sum_tied(%x: tensor<10x4xf32> {loom.input = "x"}, %w: tensor<7x4xf32> {loom.input = "w"},
                    %y: tensor<10xi64> {loom.input = "y"}, %g: tensor<f32> {loom.input = "g"})
    -> (tensor<f32> {loom.output = "loss"}, tensor<10xf32> {loom.output = "lse"},
        tensor<10x4xf32> {loom.output = "dx"}, tensor<7x4xf32> {loom.output = "dw"}) {
  %l, %lse = loom.linear_cross_entropy %x, %w, %y reduction = sum {transpose_w, ignore_index = -100 : i64}
      : (tensor<10x4xf32>, tensor<7x4xf32>, tensor<10xi64>) -> (tensor<f32>, tensor<10xf32>)
  %dx, %dw = loom.linear_cross_entropy_grad %x, %w, %y, %lse, %g reduction = sum {transpose_w, ignore_index = -100 : i64}
      : (tensor<10x4xf32>, tensor<7x4xf32>, tensor<10xi64>, tensor<10xf32>, tensor<f32>) -> (tensor<10x4xf32>, tensor<7x4xf32>)
  return %l, %lse, %dx, %dw : tensor<f32>, tensor<10xf32>, tensor<10x4xf32>, tensor<7x4xf32>
}

func.func @none_untied(%x: tensor<10x4xf32> {loom.input = "x"}, %w: tensor<4x7xf32> {loom.input = "w"},
                       %y: tensor<10xi32> {loom.input = "y"}, %g: tensor<10xf32> {loom.input = "g"})
    -> (tensor<10xf32> {loom.output = "loss"}, tensor<10xf32> {loom.output = "lse"},
        tensor<10x4xf32> {loom.output = "dx"}, tensor<4x7xf32> {loom.output = "dw"}) {
  %l, %lse = loom.linear_cross_entropy %x, %w, %y reduction = none
      : (tensor<10x4xf32>, tensor<4x7xf32>, tensor<10xi32>) -> (tensor<10xf32>, tensor<10xf32>)
  %dx, %dw = loom.linear_cross_entropy_grad %x, %w, %y, %lse, %g reduction = none
      : (tensor<10x4xf32>, tensor<4x7xf32>, tensor<10xi32>, tensor<10xf32>, tensor<10xf32>) -> (tensor<10x4xf32>, tensor<4x7xf32>)
  return %l, %lse, %dx, %dw : tensor<10xf32>, tensor<10xf32>, tensor<10x4xf32>, tensor<4x7xf32>
}

func.func @mean_tied_bf16(%x: tensor<10x4xbf16> {loom.input = "x"}, %w: tensor<7x4xbf16> {loom.input = "w"},
                          %y: tensor<10xi64> {loom.input = "y"}, %g: tensor<f32> {loom.input = "g"})
    -> (tensor<f32> {loom.output = "loss"}, tensor<10xf32> {loom.output = "lse"},
        tensor<10x4xbf16> {loom.output = "dx"}, tensor<7x4xbf16> {loom.output = "dw"}) {
  %l, %lse = loom.linear_cross_entropy %x, %w, %y reduction = mean {transpose_w, ignore_index = -100 : i64}
      : (tensor<10x4xbf16>, tensor<7x4xbf16>, tensor<10xi64>) -> (tensor<f32>, tensor<10xf32>)
  %dx, %dw = loom.linear_cross_entropy_grad %x, %w, %y, %lse, %g reduction = mean {transpose_w, ignore_index = -100 : i64}
      : (tensor<10x4xbf16>, tensor<7x4xbf16>, tensor<10xi64>, tensor<10xf32>, tensor<f32>) -> (tensor<10x4xbf16>, tensor<7x4xbf16>)
  return %l, %lse, %dx, %dw : tensor<f32>, tensor<10xf32>, tensor<10x4xbf16>, tensor<7x4xbf16>
}
