// RUN: loom-opt %s --split-input-file --verify-diagnostics --loom-bufferize-kernels
// RUN: loom-opt %s --split-input-file --verify-diagnostics --loom-lower-kernels-to-llvm
// RUN: loom-opt %s --split-input-file --verify-diagnostics --loom-map-kernels-to-gpu
// RUN: loom-opt %s --split-input-file --verify-diagnostics --loom-lower-gpu-to-nvvm
// RUN: not loom-opt %s --loom-outline-kernels --loom-lower-gpu-to-nvvm 2>&1 | FileCheck %s --check-prefix=NO-GPU
// RUN: not loom-opt %s --loom-outline-kernels --loom-outline-kernels 2>&1 | FileCheck %s --check-prefix=TWICE
// RUN: not loom-opt %s --loom-codegen-cpu=stop-after=nvvm 2>&1 | FileCheck %s --check-prefix=PHASE
// RUN: not loom-opt %s --loom-codegen-cpu=target=tpu 2>&1 | FileCheck %s --check-prefix=TARGET

// Tests that the kernel passes refuse a module whose kernels were not
// outlined (no module @loom_kernels), naming the pass to run first.
// expected-error@+1 {{run loom-outline-kernels first}}
module {
  func.func @f(%x: tensor<4xf32>) -> tensor<4xf32> {
    return %x : tensor<4xf32>
  }
}

// NO-GPU: no gpu.module in the kernel module (run loom-map-kernels-to-gpu first)
// TWICE: the kernels are outlined already
// PHASE: stop-after=nvvm is not a code-generation phase of this target
// TARGET: unknown target 'tpu'
