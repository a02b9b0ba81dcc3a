// Tests the elementwise ops against NumPy, NaN handling of compare and
// max/min, and constants.

// RUN: rm -rf %t && mkdir -p %t
// RUN: %python -c "import numpy as np; r = np.random.RandomState(9); \
// RUN:   np.save('%t/x.npy', r.randn(3, 4).astype(np.float32)); \
// RUN:   np.save('%t/y.npy', (r.rand(3, 4) + 0.5).astype(np.float32)); \
// RUN:   np.save('%t/n.npy', np.array([1.0, np.nan, 3.0, -2.0], dtype=np.float32)); \
// RUN:   np.save('%t/m.npy', np.array([1.0, 2.0, np.nan, 5.0], dtype=np.float32))"
// RUN: loom-interp %s --input x=%t/x.npy --input y=%t/y.npy --input n=%t/n.npy --input m=%t/m.npy --output-dir %t/out
// RUN: %python -c "import sys, math; sys.path.insert(0, '%S/Inputs'); import numpy as np, ref; \
// RUN:   L = lambda n: np.load('%t/' + n + '.npy').astype(np.float64); O = lambda n: np.load('%t/out/' + n + '.npy'); \
// RUN:   x, y = L('x'), L('y'); erf = np.vectorize(math.erf); \
// RUN:   want = dict(add=x + y, sub=x - y, mul=x * y, div=x / y, pow=np.power(y, x), max=np.maximum(x, y), min=np.minimum(x, y), \
// RUN:     neg=-x, abs=np.abs(x), exp=np.exp(x), log=np.log(y), tanh=np.tanh(x), sigmoid=1 / (1 + np.exp(-x)), relu=np.maximum(x, 0), \
// RUN:     erf=erf(x), sqrt=np.sqrt(y), rsqrt=1 / np.sqrt(y), floor=np.floor(x * 3), cos=np.cos(x), sin=np.sin(x), \
// RUN:     gelu=0.5 * x * (1 + erf(x / np.sqrt(2))), gelu_tanh=0.5 * x * (1 + np.tanh(np.sqrt(2 / np.pi) * (x + 0.044715 * x ** 3))), \
// RUN:     select=np.where(x < y, x, y), stop_gradient=x, const=x + np.array([1.0, 2.0, 3.0, 4.0]), splat=x * 0.5); \
// RUN:   [ref.check(k, O(k), v) for k, v in want.items()]; \
// RUN:   print('compare', O('lt').tolist(), O('ne').tolist(), O('ge').tolist()); \
// RUN:   print('nan max/min', O('nmax').tolist(), O('nmin').tolist())" | FileCheck %s

// CHECK: OK add
// CHECK: OK sub
// CHECK: OK mul
// CHECK: OK div
// CHECK: OK pow
// CHECK: OK max
// CHECK: OK min
// CHECK: OK neg
// CHECK: OK abs
// CHECK: OK exp
// CHECK: OK log
// CHECK: OK tanh
// CHECK: OK sigmoid
// CHECK: OK relu
// CHECK: OK erf
// CHECK: OK sqrt
// CHECK: OK rsqrt
// CHECK: OK floor
// CHECK: OK cos
// CHECK: OK sin
// CHECK: OK gelu
// CHECK: OK gelu_tanh
// CHECK: OK select
// CHECK: OK stop_gradient
// CHECK: OK const
// CHECK: OK splat
// CHECK: compare [False, False, False, True] [False, True, True, True] [True, False, False, False]
// CHECK: nan max/min [1.0, nan, nan, 5.0] [1.0, nan, nan, -2.0]

func.func @forward(%x: tensor<3x4xf32> {loom.input = "x"},
                   %y: tensor<3x4xf32> {loom.input = "y"},
                   %n: tensor<4xf32> {loom.input = "n"},
                   %m: tensor<4xf32> {loom.input = "m"})
    -> (tensor<3x4xf32> {loom.output = "add"}, tensor<3x4xf32> {loom.output = "sub"},
        tensor<3x4xf32> {loom.output = "mul"}, tensor<3x4xf32> {loom.output = "div"},
        tensor<3x4xf32> {loom.output = "pow"}, tensor<3x4xf32> {loom.output = "max"},
        tensor<3x4xf32> {loom.output = "min"}, tensor<3x4xf32> {loom.output = "neg"},
        tensor<3x4xf32> {loom.output = "abs"}, tensor<3x4xf32> {loom.output = "exp"},
        tensor<3x4xf32> {loom.output = "log"}, tensor<3x4xf32> {loom.output = "tanh"},
        tensor<3x4xf32> {loom.output = "sigmoid"}, tensor<3x4xf32> {loom.output = "relu"},
        tensor<3x4xf32> {loom.output = "erf"}, tensor<3x4xf32> {loom.output = "sqrt"},
        tensor<3x4xf32> {loom.output = "rsqrt"}, tensor<3x4xf32> {loom.output = "floor"},
        tensor<3x4xf32> {loom.output = "cos"}, tensor<3x4xf32> {loom.output = "sin"},
        tensor<3x4xf32> {loom.output = "gelu"}, tensor<3x4xf32> {loom.output = "gelu_tanh"},
        tensor<3x4xf32> {loom.output = "select"}, tensor<3x4xf32> {loom.output = "stop_gradient"},
        tensor<3x4xf32> {loom.output = "const"}, tensor<3x4xf32> {loom.output = "splat"},
        tensor<4xi1> {loom.output = "lt"}, tensor<4xi1> {loom.output = "ne"},
        tensor<4xi1> {loom.output = "ge"},
        tensor<4xf32> {loom.output = "nmax"}, tensor<4xf32> {loom.output = "nmin"}) {
  %add = loom.add %x, %y : tensor<3x4xf32>
  %sub = loom.sub %x, %y : tensor<3x4xf32>
  %mul = loom.mul %x, %y : tensor<3x4xf32>
  %div = loom.div %x, %y : tensor<3x4xf32>
  %pow = loom.pow %y, %x : tensor<3x4xf32>
  %max = loom.max %x, %y : tensor<3x4xf32>
  %min = loom.min %x, %y : tensor<3x4xf32>
  %neg = loom.neg %x : tensor<3x4xf32>
  %abs = loom.abs %x : tensor<3x4xf32>
  %exp = loom.exp %x : tensor<3x4xf32>
  %log = loom.log %y : tensor<3x4xf32>
  %tanh = loom.tanh %x : tensor<3x4xf32>
  %sigmoid = loom.sigmoid %x : tensor<3x4xf32>
  %relu = loom.relu %x : tensor<3x4xf32>
  %erf = loom.erf %x : tensor<3x4xf32>
  %sqrt = loom.sqrt %y : tensor<3x4xf32>
  %rsqrt = loom.rsqrt %y : tensor<3x4xf32>
  %three = loom.constant dense<3.0> : tensor<3x4xf32>
  %x3 = loom.mul %x, %three : tensor<3x4xf32>
  %floor = loom.floor %x3 : tensor<3x4xf32>
  %cos = loom.cos %x : tensor<3x4xf32>
  %sin = loom.sin %x : tensor<3x4xf32>
  %gelu = loom.gelu %x : tensor<3x4xf32>
  %gelu_tanh = loom.gelu %x approximate = tanh : tensor<3x4xf32>
  %lt_xy = loom.compare lt, %x, %y : tensor<3x4xf32> -> tensor<3x4xi1>
  %select = loom.select %lt_xy, %x, %y : tensor<3x4xi1>, tensor<3x4xf32>
  %sg = loom.stop_gradient %x : tensor<3x4xf32>
  %row = loom.constant dense<[1.0, 2.0, 3.0, 4.0]> : tensor<4xf32>
  %rows = loom.broadcast_in_dim %row dims = [1] : tensor<4xf32> -> tensor<3x4xf32>
  %const = loom.add %x, %rows : tensor<3x4xf32>
  %half = loom.constant dense<0.5> : tensor<3x4xf32>
  %splat = loom.mul %x, %half : tensor<3x4xf32>
  %lt = loom.compare lt, %n, %m : tensor<4xf32> -> tensor<4xi1>
  %ne = loom.compare ne, %n, %m : tensor<4xf32> -> tensor<4xi1>
  %ge = loom.compare ge, %n, %m : tensor<4xf32> -> tensor<4xi1>
  %nmax = loom.max %n, %m : tensor<4xf32>
  %nmin = loom.min %n, %m : tensor<4xf32>
  return %add, %sub, %mul, %div, %pow, %max, %min, %neg, %abs, %exp, %log, %tanh, %sigmoid, %relu, %erf, %sqrt, %rsqrt, %floor, %cos, %sin, %gelu, %gelu_tanh, %select, %sg, %const, %splat, %lt, %ne, %ge, %nmax, %nmin
      : tensor<3x4xf32>, tensor<3x4xf32>, tensor<3x4xf32>, tensor<3x4xf32>, tensor<3x4xf32>, tensor<3x4xf32>, tensor<3x4xf32>, tensor<3x4xf32>, tensor<3x4xf32>, tensor<3x4xf32>, tensor<3x4xf32>, tensor<3x4xf32>, tensor<3x4xf32>, tensor<3x4xf32>, tensor<3x4xf32>, tensor<3x4xf32>, tensor<3x4xf32>, tensor<3x4xf32>, tensor<3x4xf32>, tensor<3x4xf32>, tensor<3x4xf32>, tensor<3x4xf32>, tensor<3x4xf32>, tensor<3x4xf32>, tensor<3x4xf32>, tensor<3x4xf32>, tensor<4xi1>, tensor<4xi1>, tensor<4xi1>, tensor<4xf32>, tensor<4xf32>
}
