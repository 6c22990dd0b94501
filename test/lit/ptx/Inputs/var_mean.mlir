func.func @fusion(%arg0: tensor<?x?xf32>) -> (tensor<?xf32>, tensor<?xf32>) {
  %t2:2 = "fusion.var_mean"(%arg0) {axes = array<i64: 1>, keepdim = false, correction = 1.0 : f64} : (tensor<?x?xf32>) -> (tensor<?xf32>, tensor<?xf32>)
  return %t2#0, %t2#1 : tensor<?xf32>, tensor<?xf32>
}
