func.func @fusion(%arg0: tensor<?x?x?xf32>) -> (tensor<?x?xf32>) {
  %s = "fusion.sum"(%arg0) {axes = array<i64: 1>, keepdim = false} : (tensor<?x?x?xf32>) -> tensor<?x?xf32>
  return %s : tensor<?x?xf32>
}
