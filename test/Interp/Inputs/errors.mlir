// Functions for errors.test: each fails in its own way.
module attributes {loom.params_file = "errors.safetensors"} {
  func.func @forward(%x: tensor<1x3xf32> {loom.input = "x"},
                     %w: tensor<3x2xf32> {loom.param = "fc.w"})
      -> (tensor<1x2xf32> {loom.output = "y"}) {
    %y = loom.matmul %x, %w : (tensor<1x3xf32>, tensor<3x2xf32>) -> tensor<1x2xf32>
    return %y : tensor<1x2xf32>
  }
  func.func @gather_oob(%t: tensor<5x3xf32> {loom.input = "t"},
                        %ids: tensor<2xi64> {loom.input = "ids"}) -> tensor<2x3xf32> {
    %e = loom.gather %t[%ids] axis = 0 : (tensor<5x3xf32>, tensor<2xi64>) -> tensor<2x3xf32>
    return %e : tensor<2x3xf32>
  }
  func.func @label_oob(%l: tensor<2x4xf32> {loom.input = "l"},
                       %y: tensor<2xi64> {loom.input = "y"}) -> tensor<f32> {
    %loss = loom.cross_entropy %l, %y reduction = mean : (tensor<2x4xf32>, tensor<2xi64>) -> tensor<f32>
    return %loss : tensor<f32>
  }
  func.func @no_rule(%a: tensor<2xf32> {loom.input = "a"}) -> tensor<2xf32> {
    %b = arith.addf %a, %a : tensor<2xf32>
    return %b : tensor<2xf32>
  }
  func.func @pool_grad_oob(%g: tensor<1x1x2x2xf32> {loom.input = "pg"},
                           %i: tensor<1x1x2x2xi64> {loom.input = "pi"}) -> tensor<1x1x4x4xf32> {
    %dx = loom.max_pool2d_grad %g[%i] {kernel = array<i64: 2, 2>, strides = array<i64: 2, 2>, padding = array<i64: 0, 0, 0, 0>} : (tensor<1x1x2x2xf32>, tensor<1x1x2x2xi64>) -> tensor<1x1x4x4xf32>
    return %dx : tensor<1x1x4x4xf32>
  }
}
