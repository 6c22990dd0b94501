func.func @fusion(%arg0: tensor<?x?xf64>) -> (tensor<?xf64>) {
  %t2 = "fusion.max"(%arg0) {axes = array<i64: 1>, keepdim = false} : (tensor<?x?xf64>) -> tensor<?xf64>
  return %t2 : tensor<?xf64>
}
