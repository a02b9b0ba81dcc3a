// RUN: loom-opt %s --split-input-file --loom-cpu-parallel-loops | FileCheck %s
// RUN: loom-opt %s --split-input-file --loom-cpu-parallel-loops=min-work=1 | FileCheck %s --check-prefix=ALL

// A large loop keeps its threads: 256 x 1024 iterations.
// CHECK-LABEL: func.func @large
// CHECK: scf.parallel (%{{.*}}) = (%c0) to (%c256) step (%c1)
// CHECK: scf.for %{{.*}} = %c0 to %c1024 step %c1
func.func @large(%a: memref<256x1024xf32>) {
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %c256 = arith.constant 256 : index
  %c1024 = arith.constant 1024 : index
  %one = arith.constant 1.0 : f32
  scf.parallel (%i, %j) = (%c0, %c0) to (%c256, %c1024) step (%c1, %c1) {
    memref.store %one, %a[%i, %j] : memref<256x1024xf32>
  }
  return
}

// -----

// A small loop (16 x 16 = 256 iterations) is not worth a team: sequential.
// CHECK-LABEL: func.func @small
// CHECK-NOT: scf.parallel
// CHECK: scf.for %[[I:.*]] = %c0 to %c16 step %c1
// CHECK: scf.for %[[J:.*]] = %c0 to %c16 step %c1
// CHECK: memref.store %{{.*}}, %{{.*}}[%[[I]], %[[J]]]
// ALL-LABEL: func.func @small
// ALL: scf.parallel (%{{.*}}, %{{.*}}) = (%c0, %c0) to (%c16, %c16)
func.func @small(%a: memref<16x16xf32>) {
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %c16 = arith.constant 16 : index
  %one = arith.constant 1.0 : f32
  scf.parallel (%i, %j) = (%c0, %c0) to (%c16, %c16) step (%c1, %c1) {
    memref.store %one, %a[%i, %j] : memref<16x16xf32>
  }
  return
}

// -----

// Few outer iterations but much work inside (a reduction over 65536 per
// row): parallel over the 4 rows.
// CHECK-LABEL: func.func @reduction_rows
// CHECK: scf.parallel (%{{.*}}) = (%c0) to (%c4) step (%c1)
// CHECK: scf.for %{{.*}} = %c0 to %c65536 step %c1
func.func @reduction_rows(%a: memref<4x65536xf32>, %out: memref<4xf32>) {
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %c4 = arith.constant 4 : index
  %c65536 = arith.constant 65536 : index
  scf.parallel (%i) = (%c0) to (%c4) step (%c1) {
    scf.for %k = %c0 to %c65536 step %c1 {
      %x = memref.load %a[%i, %k] : memref<4x65536xf32>
      %y = memref.load %out[%i] : memref<4xf32>
      %s = arith.addf %x, %y : f32
      memref.store %s, %out[%i] : memref<4xf32>
    }
  }
  return
}

// -----

// A parallel loop inside another: one level of threads, the inner one
// sequential.
// CHECK-LABEL: func.func @nested
// CHECK: scf.parallel (%{{.*}}) = (%c0) to (%c512) step (%c1)
// CHECK-NOT: scf.parallel
// CHECK: scf.for %{{.*}} = %c0 to %c512 step %c1
func.func @nested(%a: memref<512x512xf32>) {
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %c512 = arith.constant 512 : index
  %one = arith.constant 1.0 : f32
  scf.parallel (%i) = (%c0) to (%c512) step (%c1) {
    scf.parallel (%j) = (%c0) to (%c512) step (%c1) {
      memref.store %one, %a[%i, %j] : memref<512x512xf32>
    }
  }
  return
}
