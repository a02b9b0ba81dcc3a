// RUN: loom-opt %s --loom-fuse --loom-plan-memory --loom-outline-kernels --loom-bufferize-kernels --loom-map-kernels-to-gpu=fuse-rows=false | FileCheck %s
// RUN: loom-opt %s --loom-codegen-cuda="stop-after=kernels cuda-fuse-rows=false" | FileCheck %s
// RUN: loom-opt %s --loom-fuse --loom-plan-memory --loom-outline-kernels --loom-bufferize-kernels --loom-map-kernels-to-gpu | FileCheck %s --check-prefix=ROWS
// RUN: loom-opt %s --loom-codegen-cuda=stop-after=kernels | FileCheck %s --check-prefix=ROWS

// By default (fuse-rows) the softmax kernel is one launch: a block of 32
// threads per row of 8 (the smallest block, one warp: no shared memory),
// 4 blocks.
// ROWS-LABEL: module @loom_kernels
// ROWS-SAME:    launches = [{block = array<i64: 32, 1, 1>, grid = array<i64: 4, 1, 1>, name = "loom_forward_k0_0", shared = 0 : i64, strategy = "block-row"}]
// ROWS-SAME:    scratch = [memref<4xf32>, memref<4xf32>]
// ROWS:         gpu.func @loom_forward_k0_0(%{{.*}}: memref<4x8xf32>, %{{.*}}: memref<4x8xf32>, %{{.*}}: memref<4xf32>, %{{.*}}: memref<4xf32>) kernel
// ROWS-NOT:     gpu.func

// Tests that each linalg op of a softmax kernel becomes a gpu.func of the
// kernel module's gpu.module (row maxima, row sums, the normalization),
// every one taking the kernel's buffers then its two scratch buffers, and
// that the launches and the scratch are recorded in loom.kernel_info; the
// host-side kernel functions are gone.
// CHECK-LABEL: module @loom_kernels
// CHECK-SAME:    gpu.container_module
// CHECK-SAME:    launches = [{block = array<i64: 256, 1, 1>, grid = array<i64: 1, 1, 1>, name = "loom_forward_k0_0", shared = 0 : i64, strategy = "thread-row"}, {{.*}}name = "loom_forward_k0_1"{{.*}}name = "loom_forward_k0_2"{{.*}}strategy = "pointwise-vec4"}]
// CHECK-SAME:    scratch = [memref<4xf32>, memref<4xf32>]
// CHECK-NOT:     func.func
// CHECK:         gpu.module @loom_kernels
// CHECK-COUNT-3:   gpu.func @loom_forward_k0_{{[0-2]}}(%{{.*}}: memref<4x8xf32>, %{{.*}}: memref<4x8xf32>, %{{.*}}: memref<4xf32>, %{{.*}}: memref<4xf32>) kernel
func.func @forward(%x: tensor<4x8xf32> {loom.input = "x"})
    -> (tensor<4x8xf32> {loom.output = "y"}) {
  %y = loom.softmax %x axis = 1 : tensor<4x8xf32>
  return %y : tensor<4x8xf32>
}
