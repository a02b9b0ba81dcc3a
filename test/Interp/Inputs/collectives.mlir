// Every collective on a 2 x 2 mesh (test/Interp/collectives.test).
module attributes {loom.mesh_axes = ["dp", "tp"], loom.mesh_shape = array<i64: 2, 2>} {
  func.func @main(%x: tensor<4xf32> {loom.input = "x"})
      -> (tensor<4xf32> {loom.output = "sum_dp"},
          tensor<4xf32> {loom.output = "max_tp"},
          tensor<4xf32> {loom.output = "mean_dp"},
          tensor<2xf32> {loom.output = "rs_tp"},
          tensor<2xf32> {loom.output = "rs_mean_dp"},
          tensor<8xf32> {loom.output = "ag_dp"},
          tensor<2xf32> {loom.output = "slice_tp"}) {
    %0 = loom.all_reduce %x over "dp" reduce = sum : tensor<4xf32>
    %1 = loom.all_reduce %x over "tp" reduce = max : tensor<4xf32>
    %2 = loom.all_reduce %x over "dp" reduce = mean : tensor<4xf32>
    %3 = loom.reduce_scatter %x over "tp" reduce = sum : tensor<4xf32> -> tensor<2xf32>
    %4 = loom.reduce_scatter %x over "dp" reduce = mean : tensor<4xf32> -> tensor<2xf32>
    %5 = loom.all_gather %x over "dp" : tensor<4xf32> -> tensor<8xf32>
    %6 = loom.rank_slice %x over "tp" : tensor<4xf32> -> tensor<2xf32>
    return %0, %1, %2, %3, %4, %5, %6 : tensor<4xf32>, tensor<4xf32>, tensor<4xf32>, tensor<2xf32>, tensor<2xf32>, tensor<8xf32>, tensor<2xf32>
  }
}
