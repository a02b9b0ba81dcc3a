// A loss through each differentiable collective, on 2 ranks
// (test/Interp/collective-gradients.test).
module attributes {loom.mesh_axes = ["dp"], loom.mesh_shape = array<i64: 2>} {
  func.func @forward(%a: tensor<4xf32> {loom.param = "a"},
                     %g: tensor<2xf32> {loom.param = "g"},
                     %s: tensor<4xf32> {loom.param = "s"},
                     %ca: tensor<4xf32> {loom.input = "ca"},
                     %cg: tensor<4xf32> {loom.input = "cg"},
                     %cs: tensor<2xf32> {loom.input = "cs"})
      -> (tensor<f32> {loom.output = "loss"}) {
    %ya = loom.all_reduce %a over "dp" reduce = mean : tensor<4xf32>
    %yg = loom.all_gather %g over "dp" : tensor<2xf32> -> tensor<4xf32>
    %ys = loom.reduce_scatter %s over "dp" reduce = sum : tensor<4xf32> -> tensor<2xf32>
    %pa = loom.mul %ya, %ca : tensor<4xf32>
    %pg = loom.mul %yg, %cg : tensor<4xf32>
    %ps = loom.mul %ys, %cs : tensor<2xf32>
    %la = loom.reduce_sum %pa dims = [0] : tensor<4xf32> -> tensor<f32>
    %lg = loom.reduce_sum %pg dims = [0] : tensor<4xf32> -> tensor<f32>
    %ls = loom.reduce_sum %ps dims = [0] : tensor<2xf32> -> tensor<f32>
    %l1 = loom.add %la, %lg : tensor<f32>
    %l = loom.add %l1, %ls : tensor<f32>
    return %l : tensor<f32>
  }
}
