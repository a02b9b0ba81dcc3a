// RUN: loom-opt %s --loom-codegen-cuda=stop-after=kernels | loom-opt --loom-lower-gpu-to-nvvm | FileCheck %s
// RUN: loom-opt %s --loom-codegen-cuda | FileCheck %s

// Tests that the launches become NVVM kernels with bare-pointer
// parameters, libdevice calls for exp, and that the kernel info survives.
// CHECK-LABEL: module @loom_kernels
// CHECK-SAME:    loom.kernel_info
// CHECK:         gpu.module @loom_kernels
// CHECK-DAG:       llvm.func @loom_forward_k0_0(%{{.*}}: !llvm.ptr, %{{.*}}: !llvm.ptr, %{{.*}}: !llvm.ptr, %{{.*}}: !llvm.ptr) attributes {gpu.kernel, {{.*}}nvvm.kernel
// CHECK-DAG:       llvm.func @__nv_expf(f32) -> f32
func.func @forward(%x: tensor<4x8xf32> {loom.input = "x"})
    -> (tensor<4x8xf32> {loom.output = "y"}) {
  %y = loom.softmax %x axis = 1 : tensor<4x8xf32>
  return %y : tensor<4x8xf32>
}
