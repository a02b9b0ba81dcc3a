// RUN: loom-opt %s --split-input-file --loom-remat="memory-budget=90000" | FileCheck %s --check-prefix=ROOMY
// RUN: loom-opt %s --split-input-file --loom-remat="memory-budget=70000" | FileCheck %s --check-prefix=TIGHT
// RUN: loom-opt %s --split-input-file --loom-remat="mode=full" | FileCheck %s --check-prefix=FULL
// RUN: loom-opt %s --split-input-file --loom-remat="memory-budget=90000 mode=none" | FileCheck %s --check-prefix=NONE
// The budgets are checked against the planner itself: the arena that
// loom-prepare-codegen (loom-fuse, loom-plan-memory) gives the rewritten
// function is the one loom-remat recorded.
// RUN: loom-opt %s --split-input-file --loom-remat="memory-budget=70000" --loom-fuse --loom-plan-memory | FileCheck %s --check-prefix=PLANNED

// %a = exp(x) is read by the first GEMM and again after the chain of GEMMs,
// where x is read anyway. Without remat the arena holds x, w, a and two GEMM
// results at the third GEMM: 81920 bytes. Within 90000 nothing changes.
// ROOMY-LABEL: func.func @saved(
// ROOMY-SAME:    loom.remat = {arena = 81920 : i64, arena_before = 81920 : i64, budget = 90000 : i64, recompute_flops = 0 : i64, recomputed = {}
// ROOMY-COUNT-1: loom.exp
// ROOMY-NOT:     loom.exp
// Within 70000 the exp is made again just before its late reader.
// TIGHT-LABEL: func.func @saved(
// TIGHT-SAME:    %[[X:[^:]+]]: tensor<64x64xf32>
// TIGHT-SAME:    loom.remat = {arena = 65536 : i64, arena_before = 81920 : i64, budget = 70000 : i64, recompute_flops = 4096 : i64, recomputed = {exp = 1 : i64}
// TIGHT:         %[[A:.+]] = loom.exp %[[X]]
// TIGHT:         %[[M1:.+]] = loom.matmul %[[A]]
// TIGHT:         %[[M2:.+]] = loom.matmul %[[M1]]
// TIGHT:         %[[M3:.+]] = loom.matmul %[[M2]]
// TIGHT-NEXT:    %[[A2:.+]] = loom.exp %[[X]]
// TIGHT-NEXT:    loom.mul %[[M3]], %[[A2]]
// PLANNED-LABEL: func.func @saved(
// PLANNED-SAME:    loom.arena_bytes = 65536
// PLANNED-SAME:    loom.remat = {arena = 65536 : i64
// NONE-LABEL:  func.func @saved(
// NONE-NOT:      loom.remat
// NONE-COUNT-1:  loom.exp
// NONE-NOT:      loom.exp
func.func @saved(%x: tensor<64x64xf32>, %w: tensor<64x64xf32>) -> tensor<64x64xf32> {
  %a = loom.exp %x : tensor<64x64xf32>
  %m1 = loom.matmul %a, %w : (tensor<64x64xf32>, tensor<64x64xf32>) -> tensor<64x64xf32>
  %m2 = loom.matmul %m1, %w : (tensor<64x64xf32>, tensor<64x64xf32>) -> tensor<64x64xf32>
  %m3 = loom.matmul %m2, %w : (tensor<64x64xf32>, tensor<64x64xf32>) -> tensor<64x64xf32>
  %g = loom.mul %m3, %a : tensor<64x64xf32>
  %h = loom.add %g, %x : tensor<64x64xf32>
  return %h : tensor<64x64xf32>
}

// -----

// Two values are live across the peak: a pointwise one (exp) and a GEMM's
// (%p, read only late). Within 90000 one of them must go, and it is the
// pointwise one; within 70000 both go: the GEMM, read only late, is moved
// there (nothing recomputed), so only the exp counts as recomputed.
// ROOMY-LABEL: func.func @tiers(
// ROOMY-SAME:    arena = 81920 : i64, arena_before = 98304 : i64, {{.*}} recomputed = {exp = 1 : i64}
// ROOMY:         loom.matmul %arg0, %arg1
// ROOMY-COUNT-3: loom.matmul
// ROOMY-NEXT:    loom.exp
// TIGHT-LABEL: func.func @tiers(
// TIGHT-SAME:    arena = 65536 : i64, arena_before = 98304 : i64, {{.*}} recompute_flops = 4096 : i64, recomputed = {exp = 1 : i64}
// TIGHT:         loom.exp
// TIGHT-COUNT-3: loom.matmul
// TIGHT-NEXT:    loom.exp
// TIGHT-NEXT:    loom.mul
// TIGHT-NEXT:    loom.matmul %arg0, %arg1
// NONE-LABEL: func.func @tiers(
// FULL-LABEL: func.func @tiers(
// FULL-SAME:    arena = 65536 : i64
func.func @tiers(%x: tensor<64x64xf32>, %w: tensor<64x64xf32>) -> tensor<64x64xf32> {
  %a = loom.exp %x : tensor<64x64xf32>
  %p = loom.matmul %x, %w : (tensor<64x64xf32>, tensor<64x64xf32>) -> tensor<64x64xf32>
  %m1 = loom.matmul %a, %w : (tensor<64x64xf32>, tensor<64x64xf32>) -> tensor<64x64xf32>
  %m2 = loom.matmul %m1, %w : (tensor<64x64xf32>, tensor<64x64xf32>) -> tensor<64x64xf32>
  %m3 = loom.matmul %m2, %w : (tensor<64x64xf32>, tensor<64x64xf32>) -> tensor<64x64xf32>
  %g = loom.mul %m3, %a : tensor<64x64xf32>
  %k = loom.mul %g, %p : tensor<64x64xf32>
  %h = loom.add %k, %x : tensor<64x64xf32>
  return %h : tensor<64x64xf32>
}

// -----

// Dropout is recomputed from its seed and stream: the copy has both, so it
// draws the same mask.
// TIGHT-LABEL: func.func @dropout(
// TIGHT-SAME:    %[[X:[^:]+]]: tensor<64x64xf32>, %{{[^:]+}}: tensor<64x64xf32>, %[[S:[^:]+]]: tensor<i64>
// TIGHT:         loom.dropout %[[X]], %[[S]] ratio = 1.000000e-01 stream = 3
// TIGHT-COUNT-3: loom.matmul
// TIGHT-NEXT:    %[[D2:.+]] = loom.dropout %[[X]], %[[S]] ratio = 1.000000e-01 stream = 3
// TIGHT-NEXT:    loom.mul %{{.+}}, %[[D2]]
func.func @dropout(%x: tensor<64x64xf32>, %w: tensor<64x64xf32>, %seed: tensor<i64>) -> tensor<64x64xf32> {
  %a = loom.dropout %x, %seed ratio = 0.1 stream = 3 : tensor<64x64xf32>, tensor<i64>
  %m1 = loom.matmul %a, %w : (tensor<64x64xf32>, tensor<64x64xf32>) -> tensor<64x64xf32>
  %m2 = loom.matmul %m1, %w : (tensor<64x64xf32>, tensor<64x64xf32>) -> tensor<64x64xf32>
  %m3 = loom.matmul %m2, %w : (tensor<64x64xf32>, tensor<64x64xf32>) -> tensor<64x64xf32>
  %g = loom.mul %m3, %a : tensor<64x64xf32>
  %h = loom.add %g, %x : tensor<64x64xf32>
  return %h : tensor<64x64xf32>
}
