// Tests rounding to the element type after every op: f16 and bf16 round to
// nearest even, integer division truncates, integers wrap at their width,
// casts truncate toward zero and i1 is x != 0; bf16 results are written as
// float32 and i1 results as bool.

// RUN: rm -rf %t && mkdir -p %t
// RUN: %python -c "import numpy as np; r = np.random.RandomState(10); \
// RUN:   np.save('%t/a.npy', r.randn(64).astype(np.float32)); np.save('%t/b.npy', r.randn(64).astype(np.float32)); \
// RUN:   np.save('%t/h.npy', r.randn(64).astype(np.float16)); \
// RUN:   np.save('%t/p.npy', np.array([-7, 7, -7, 6], dtype=np.int64)); np.save('%t/q.npy', np.array([2, -2, -2, 3], dtype=np.int64)); \
// RUN:   np.save('%t/big.npy', np.array([2147483647, -5], dtype=np.int32)); \
// RUN:   np.save('%t/small.npy', np.array([100, -100, 7], dtype=np.int8)); \
// RUN:   np.save('%t/f.npy', np.array([-2.7, 2.7, -0.5, 0.0], dtype=np.float32))"
// RUN: loom-interp %s --input a=%t/a.npy --input b=%t/b.npy --input h=%t/h.npy --input p=%t/p.npy --input q=%t/q.npy \
// RUN:   --input big=%t/big.npy --input small=%t/small.npy --input f=%t/f.npy --output-dir %t/out
// RUN: %python -c "import numpy as np; \
// RUN:   L = lambda n: np.load('%t/' + n + '.npy'); O = lambda n: np.load('%t/out/' + n + '.npy'); \
// RUN:   u = lambda v: v.astype(np.float32).view(np.uint32).astype(np.uint64); \
// RUN:   bf16 = lambda v: ((((u(v) + 0x7FFF + ((u(v) >> 16) & 1)) >> 16) << 16).astype(np.uint32)).view(np.float32); \
// RUN:   a, b = L('a'), L('b'); \
// RUN:   print('f16 add', O('h_add').dtype, np.array_equal(O('h_add'), L('h') + a.astype(np.float16))); \
// RUN:   print('bf16 round', O('to_bf16').dtype, np.array_equal(O('to_bf16'), bf16(a))); \
// RUN:   print('bf16 add', np.array_equal(O('bf16_add'), bf16(bf16(a).astype(np.float64) + bf16(b)))); \
// RUN:   print('int div', O('div').tolist()); \
// RUN:   print('i32 wrap', O('wrap32').tolist(), 'i8 wrap', O('wrap8').tolist()); \
// RUN:   print('to i32', O('to_i32').tolist(), 'to i1', O('to_i1').dtype, O('to_i1').tolist(), 'i1 to f32', O('from_i1').tolist())" | FileCheck %s

// CHECK: f16 add float16 True
// CHECK: bf16 round float32 True
// CHECK: bf16 add True
// CHECK: int div [-3, -3, 3, 2]
// CHECK: i32 wrap [-2147483648, -4] i8 wrap [44, -44, 21]
// CHECK: to i32 [-2, 2, 0, 0] to i1 bool [True, True, True, False] i1 to f32 [1.0, 1.0, 1.0, 0.0]

func.func @forward(%a: tensor<64xf32> {loom.input = "a"},
                   %b: tensor<64xf32> {loom.input = "b"},
                   %h: tensor<64xf16> {loom.input = "h"},
                   %p: tensor<4xi64> {loom.input = "p"},
                   %q: tensor<4xi64> {loom.input = "q"},
                   %big: tensor<2xi32> {loom.input = "big"},
                   %small: tensor<3xi8> {loom.input = "small"},
                   %f: tensor<4xf32> {loom.input = "f"})
    -> (tensor<64xf16> {loom.output = "h_add"},
        tensor<64xbf16> {loom.output = "to_bf16"},
        tensor<64xbf16> {loom.output = "bf16_add"},
        tensor<4xi64> {loom.output = "div"},
        tensor<2xi32> {loom.output = "wrap32"},
        tensor<3xi8> {loom.output = "wrap8"},
        tensor<4xi32> {loom.output = "to_i32"},
        tensor<4xi1> {loom.output = "to_i1"},
        tensor<4xf32> {loom.output = "from_i1"}) {
  %ah = loom.cast %a : tensor<64xf32> -> tensor<64xf16>
  %h_add = loom.add %h, %ah : tensor<64xf16>
  %abf = loom.cast %a : tensor<64xf32> -> tensor<64xbf16>
  %bbf = loom.cast %b : tensor<64xf32> -> tensor<64xbf16>
  %bf_add = loom.add %abf, %bbf : tensor<64xbf16>
  %div = loom.div %p, %q : tensor<4xi64>
  %one = loom.constant dense<1> : tensor<2xi32>
  %wrap32 = loom.add %big, %one : tensor<2xi32>
  %three = loom.constant dense<3> : tensor<3xi8>
  %wrap8 = loom.mul %small, %three : tensor<3xi8>
  %to_i32 = loom.cast %f : tensor<4xf32> -> tensor<4xi32>
  %to_i1 = loom.cast %f : tensor<4xf32> -> tensor<4xi1>
  %from_i1 = loom.cast %to_i1 : tensor<4xi1> -> tensor<4xf32>
  return %h_add, %abf, %bf_add, %div, %wrap32, %wrap8, %to_i32, %to_i1, %from_i1
      : tensor<64xf16>, tensor<64xbf16>, tensor<64xbf16>, tensor<4xi64>, tensor<2xi32>, tensor<3xi8>, tensor<4xi32>, tensor<4xi1>, tensor<4xf32>
}
