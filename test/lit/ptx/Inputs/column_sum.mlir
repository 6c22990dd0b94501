func.func @fusion(%arg0: tensor<?x?x?xf32>, %arg1: tensor<?xf32>) -> (tensor<?xf32>) {
  %d0 = "fusion.size"(%arg0) {dim = 0 : i64} : (tensor<?x?x?xf32>) -> index
  %d1 = "fusion.size"(%arg0) {dim = 1 : i64} : (tensor<?x?x?xf32>) -> index
  %d2 = "fusion.size"(%arg0) {dim = 2 : i64} : (tensor<?x?x?xf32>) -> index
  %w = "fusion.broadcast_in_dim"(%arg1, %d0, %d1, %d2) {broadcast_dims = array<i64: 2>, shape = array<i64: -1, -1, -1>} : (tensor<?xf32>, index, index, index) -> tensor<?x?x?xf32>
  %xw = "fusion.mul"(%arg0, %w) : (tensor<?x?x?xf32>, tensor<?x?x?xf32>) -> tensor<?x?x?xf32>
  %s = "fusion.sum"(%xw) {axes = array<i64: 0, 1>, keepdim = false} : (tensor<?x?x?xf32>) -> tensor<?xf32>
  return %s : tensor<?xf32>
}
