// The fusion dialect. Generated from mlirfuse/dialects/optable.py by
// `python -m mlirfuse.dialects.gen_irdl`; do not edit by hand.
irdl.dialect @fusion {
  irdl.operation @neg {
    %T = irdl.base "!builtin.tensor"
    irdl.operands(x: %T)
    irdl.results(result: %T)
  }
  irdl.operation @abs {
    %T = irdl.base "!builtin.tensor"
    irdl.operands(x: %T)
    irdl.results(result: %T)
  }
  irdl.operation @exp {
    %T = irdl.base "!builtin.tensor"
    irdl.operands(x: %T)
    irdl.results(result: %T)
  }
  irdl.operation @exp2 {
    %T = irdl.base "!builtin.tensor"
    irdl.operands(x: %T)
    irdl.results(result: %T)
  }
  irdl.operation @expm1 {
    %T = irdl.base "!builtin.tensor"
    irdl.operands(x: %T)
    irdl.results(result: %T)
  }
  irdl.operation @log {
    %T = irdl.base "!builtin.tensor"
    irdl.operands(x: %T)
    irdl.results(result: %T)
  }
  irdl.operation @log2 {
    %T = irdl.base "!builtin.tensor"
    irdl.operands(x: %T)
    irdl.results(result: %T)
  }
  irdl.operation @log1p {
    %T = irdl.base "!builtin.tensor"
    irdl.operands(x: %T)
    irdl.results(result: %T)
  }
  irdl.operation @sqrt {
    %T = irdl.base "!builtin.tensor"
    irdl.operands(x: %T)
    irdl.results(result: %T)
  }
  irdl.operation @rsqrt {
    %T = irdl.base "!builtin.tensor"
    irdl.operands(x: %T)
    irdl.results(result: %T)
  }
  irdl.operation @reciprocal {
    %T = irdl.base "!builtin.tensor"
    irdl.operands(x: %T)
    irdl.results(result: %T)
  }
  irdl.operation @sin {
    %T = irdl.base "!builtin.tensor"
    irdl.operands(x: %T)
    irdl.results(result: %T)
  }
  irdl.operation @cos {
    %T = irdl.base "!builtin.tensor"
    irdl.operands(x: %T)
    irdl.results(result: %T)
  }
  irdl.operation @tan {
    %T = irdl.base "!builtin.tensor"
    irdl.operands(x: %T)
    irdl.results(result: %T)
  }
  irdl.operation @asin {
    %T = irdl.base "!builtin.tensor"
    irdl.operands(x: %T)
    irdl.results(result: %T)
  }
  irdl.operation @acos {
    %T = irdl.base "!builtin.tensor"
    irdl.operands(x: %T)
    irdl.results(result: %T)
  }
  irdl.operation @atan {
    %T = irdl.base "!builtin.tensor"
    irdl.operands(x: %T)
    irdl.results(result: %T)
  }
  irdl.operation @sinh {
    %T = irdl.base "!builtin.tensor"
    irdl.operands(x: %T)
    irdl.results(result: %T)
  }
  irdl.operation @cosh {
    %T = irdl.base "!builtin.tensor"
    irdl.operands(x: %T)
    irdl.results(result: %T)
  }
  irdl.operation @asinh {
    %T = irdl.base "!builtin.tensor"
    irdl.operands(x: %T)
    irdl.results(result: %T)
  }
  irdl.operation @acosh {
    %T = irdl.base "!builtin.tensor"
    irdl.operands(x: %T)
    irdl.results(result: %T)
  }
  irdl.operation @atanh {
    %T = irdl.base "!builtin.tensor"
    irdl.operands(x: %T)
    irdl.results(result: %T)
  }
  irdl.operation @log10 {
    %T = irdl.base "!builtin.tensor"
    irdl.operands(x: %T)
    irdl.results(result: %T)
  }
  irdl.operation @erfc {
    %T = irdl.base "!builtin.tensor"
    irdl.operands(x: %T)
    irdl.results(result: %T)
  }
  irdl.operation @tanh {
    %T = irdl.base "!builtin.tensor"
    irdl.operands(x: %T)
    irdl.results(result: %T)
  }
  irdl.operation @sigmoid {
    %T = irdl.base "!builtin.tensor"
    irdl.operands(x: %T)
    irdl.results(result: %T)
  }
  irdl.operation @erf {
    %T = irdl.base "!builtin.tensor"
    irdl.operands(x: %T)
    irdl.results(result: %T)
  }
  irdl.operation @relu {
    %T = irdl.base "!builtin.tensor"
    irdl.operands(x: %T)
    irdl.results(result: %T)
  }
  irdl.operation @silu {
    %T = irdl.base "!builtin.tensor"
    irdl.operands(x: %T)
    irdl.results(result: %T)
  }
  irdl.operation @floor {
    %T = irdl.base "!builtin.tensor"
    irdl.operands(x: %T)
    irdl.results(result: %T)
  }
  irdl.operation @ceil {
    %T = irdl.base "!builtin.tensor"
    irdl.operands(x: %T)
    irdl.results(result: %T)
  }
  irdl.operation @round {
    %T = irdl.base "!builtin.tensor"
    irdl.operands(x: %T)
    irdl.results(result: %T)
  }
  irdl.operation @trunc {
    %T = irdl.base "!builtin.tensor"
    irdl.operands(x: %T)
    irdl.results(result: %T)
  }
  irdl.operation @sign {
    %T = irdl.base "!builtin.tensor"
    irdl.operands(x: %T)
    irdl.results(result: %T)
  }
  irdl.operation @isnan {
    %T = irdl.base "!builtin.tensor"
    %result = irdl.base "!builtin.tensor"
    irdl.operands(x: %T)
    irdl.results(result: %result)
  }
  irdl.operation @isinf {
    %T = irdl.base "!builtin.tensor"
    %result = irdl.base "!builtin.tensor"
    irdl.operands(x: %T)
    irdl.results(result: %result)
  }
  irdl.operation @logical_not {
    %T = irdl.base "!builtin.tensor"
    irdl.operands(x: %T)
    irdl.results(result: %T)
  }
  irdl.operation @bitwise_not {
    %T = irdl.base "!builtin.tensor"
    irdl.operands(x: %T)
    irdl.results(result: %T)
  }
  irdl.operation @add {
    %T = irdl.base "!builtin.tensor"
    irdl.operands(lhs: %T, rhs: %T)
    irdl.results(result: %T)
  }
  irdl.operation @sub {
    %T = irdl.base "!builtin.tensor"
    irdl.operands(lhs: %T, rhs: %T)
    irdl.results(result: %T)
  }
  irdl.operation @mul {
    %T = irdl.base "!builtin.tensor"
    irdl.operands(lhs: %T, rhs: %T)
    irdl.results(result: %T)
  }
  irdl.operation @div {
    %T = irdl.base "!builtin.tensor"
    irdl.operands(lhs: %T, rhs: %T)
    irdl.results(result: %T)
  }
  irdl.operation @pow {
    %T = irdl.base "!builtin.tensor"
    irdl.operands(lhs: %T, rhs: %T)
    irdl.results(result: %T)
  }
  irdl.operation @fmod {
    %T = irdl.base "!builtin.tensor"
    irdl.operands(lhs: %T, rhs: %T)
    irdl.results(result: %T)
  }
  irdl.operation @remainder {
    %T = irdl.base "!builtin.tensor"
    irdl.operands(lhs: %T, rhs: %T)
    irdl.results(result: %T)
  }
  irdl.operation @maximum {
    %T = irdl.base "!builtin.tensor"
    irdl.operands(lhs: %T, rhs: %T)
    irdl.results(result: %T)
  }
  irdl.operation @minimum {
    %T = irdl.base "!builtin.tensor"
    irdl.operands(lhs: %T, rhs: %T)
    irdl.results(result: %T)
  }
  irdl.operation @atan2 {
    %T = irdl.base "!builtin.tensor"
    irdl.operands(lhs: %T, rhs: %T)
    irdl.results(result: %T)
  }
  irdl.operation @eq {
    %T = irdl.base "!builtin.tensor"
    %result = irdl.base "!builtin.tensor"
    irdl.operands(lhs: %T, rhs: %T)
    irdl.results(result: %result)
  }
  irdl.operation @ne {
    %T = irdl.base "!builtin.tensor"
    %result = irdl.base "!builtin.tensor"
    irdl.operands(lhs: %T, rhs: %T)
    irdl.results(result: %result)
  }
  irdl.operation @lt {
    %T = irdl.base "!builtin.tensor"
    %result = irdl.base "!builtin.tensor"
    irdl.operands(lhs: %T, rhs: %T)
    irdl.results(result: %result)
  }
  irdl.operation @le {
    %T = irdl.base "!builtin.tensor"
    %result = irdl.base "!builtin.tensor"
    irdl.operands(lhs: %T, rhs: %T)
    irdl.results(result: %result)
  }
  irdl.operation @gt {
    %T = irdl.base "!builtin.tensor"
    %result = irdl.base "!builtin.tensor"
    irdl.operands(lhs: %T, rhs: %T)
    irdl.results(result: %result)
  }
  irdl.operation @ge {
    %T = irdl.base "!builtin.tensor"
    %result = irdl.base "!builtin.tensor"
    irdl.operands(lhs: %T, rhs: %T)
    irdl.results(result: %result)
  }
  irdl.operation @logical_and {
    %T = irdl.base "!builtin.tensor"
    irdl.operands(lhs: %T, rhs: %T)
    irdl.results(result: %T)
  }
  irdl.operation @logical_or {
    %T = irdl.base "!builtin.tensor"
    irdl.operands(lhs: %T, rhs: %T)
    irdl.results(result: %T)
  }
  irdl.operation @bitwise_and {
    %T = irdl.base "!builtin.tensor"
    irdl.operands(lhs: %T, rhs: %T)
    irdl.results(result: %T)
  }
  irdl.operation @bitwise_or {
    %T = irdl.base "!builtin.tensor"
    irdl.operands(lhs: %T, rhs: %T)
    irdl.results(result: %T)
  }
  irdl.operation @bitwise_xor {
    %T = irdl.base "!builtin.tensor"
    irdl.operands(lhs: %T, rhs: %T)
    irdl.results(result: %T)
  }
  irdl.operation @bitwise_left_shift {
    %T = irdl.base "!builtin.tensor"
    irdl.operands(lhs: %T, rhs: %T)
    irdl.results(result: %T)
  }
  irdl.operation @bitwise_right_shift {
    %T = irdl.base "!builtin.tensor"
    irdl.operands(lhs: %T, rhs: %T)
    irdl.results(result: %T)
  }
  irdl.operation @logical_right_shift {
    %T = irdl.base "!builtin.tensor"
    irdl.operands(lhs: %T, rhs: %T)
    irdl.results(result: %T)
  }
  irdl.operation @trunc_div {
    %T = irdl.base "!builtin.tensor"
    irdl.operands(lhs: %T, rhs: %T)
    irdl.results(result: %T)
  }
  irdl.operation @gcd {
    %T = irdl.base "!builtin.tensor"
    irdl.operands(lhs: %T, rhs: %T)
    irdl.results(result: %T)
  }
  irdl.operation @nextafter {
    %T = irdl.base "!builtin.tensor"
    irdl.operands(lhs: %T, rhs: %T)
    irdl.results(result: %T)
  }
  irdl.operation @straight_through {
    %T = irdl.base "!builtin.tensor"
    irdl.operands(lhs: %T, rhs: %T)
    irdl.results(result: %T)
  }
  irdl.operation @where {
    %condition = irdl.base "!builtin.tensor"
    %T = irdl.base "!builtin.tensor"
    irdl.operands(condition: %condition, lhs: %T, rhs: %T)
    irdl.results(result: %T)
  }
  irdl.operation @clamp {
    %T = irdl.base "!builtin.tensor"
    irdl.operands(a: %T, b: %T, c: %T)
    irdl.results(result: %T)
  }
  irdl.operation @lerp {
    %T = irdl.base "!builtin.tensor"
    irdl.operands(a: %T, b: %T, c: %T)
    irdl.results(result: %T)
  }
  irdl.operation @fma {
    %T = irdl.base "!builtin.tensor"
    irdl.operands(a: %T, b: %T, c: %T)
    irdl.results(result: %T)
  }
  irdl.operation @sum {
    %input = irdl.base "!builtin.tensor"
    %result = irdl.base "!builtin.tensor"
    %axes_attr = irdl.base "#builtin.dense_array"
    %keepdim_attr = irdl.base "#builtin.integer"
    irdl.attributes {"axes" = %axes_attr, "keepdim" = %keepdim_attr}
    irdl.operands(input: %input)
    irdl.results(result: %result)
  }
  irdl.operation @prod {
    %input = irdl.base "!builtin.tensor"
    %result = irdl.base "!builtin.tensor"
    %axes_attr = irdl.base "#builtin.dense_array"
    %keepdim_attr = irdl.base "#builtin.integer"
    irdl.attributes {"axes" = %axes_attr, "keepdim" = %keepdim_attr}
    irdl.operands(input: %input)
    irdl.results(result: %result)
  }
  irdl.operation @max {
    %input = irdl.base "!builtin.tensor"
    %result = irdl.base "!builtin.tensor"
    %axes_attr = irdl.base "#builtin.dense_array"
    %keepdim_attr = irdl.base "#builtin.integer"
    irdl.attributes {"axes" = %axes_attr, "keepdim" = %keepdim_attr}
    irdl.operands(input: %input)
    irdl.results(result: %result)
  }
  irdl.operation @min {
    %input = irdl.base "!builtin.tensor"
    %result = irdl.base "!builtin.tensor"
    %axes_attr = irdl.base "#builtin.dense_array"
    %keepdim_attr = irdl.base "#builtin.integer"
    irdl.attributes {"axes" = %axes_attr, "keepdim" = %keepdim_attr}
    irdl.operands(input: %input)
    irdl.results(result: %result)
  }
  irdl.operation @mean {
    %input = irdl.base "!builtin.tensor"
    %result = irdl.base "!builtin.tensor"
    %axes_attr = irdl.base "#builtin.dense_array"
    %keepdim_attr = irdl.base "#builtin.integer"
    irdl.attributes {"axes" = %axes_attr, "keepdim" = %keepdim_attr}
    irdl.operands(input: %input)
    irdl.results(result: %result)
  }
  irdl.operation @var {
    %input = irdl.base "!builtin.tensor"
    %result = irdl.base "!builtin.tensor"
    %axes_attr = irdl.base "#builtin.dense_array"
    %keepdim_attr = irdl.base "#builtin.integer"
    %correction_attr = irdl.base "#builtin.float"
    irdl.attributes {"axes" = %axes_attr, "keepdim" = %keepdim_attr, "correction" = %correction_attr}
    irdl.operands(input: %input)
    irdl.results(result: %result)
  }
  irdl.operation @var_mean {
    %input = irdl.base "!builtin.tensor"
    %var = irdl.base "!builtin.tensor"
    %mean = irdl.base "!builtin.tensor"
    %axes_attr = irdl.base "#builtin.dense_array"
    %keepdim_attr = irdl.base "#builtin.integer"
    %correction_attr = irdl.base "#builtin.float"
    irdl.attributes {"axes" = %axes_attr, "keepdim" = %keepdim_attr, "correction" = %correction_attr}
    irdl.operands(input: %input)
    irdl.results(var: %var, mean: %mean)
  }
  irdl.operation @broadcast_in_dim {
    %input = irdl.base "!builtin.tensor"
    %index = irdl.is index
    %result = irdl.base "!builtin.tensor"
    %shape_attr = irdl.base "#builtin.dense_array"
    %broadcast_dims_attr = irdl.base "#builtin.dense_array"
    irdl.attributes {"shape" = %shape_attr, "broadcast_dims" = %broadcast_dims_attr}
    irdl.operands(input: %input, sizes: variadic %index)
    irdl.results(result: %result)
  }
  irdl.operation @expand {
    %input = irdl.base "!builtin.tensor"
    %index = irdl.is index
    %result = irdl.base "!builtin.tensor"
    %shape_attr = irdl.base "#builtin.dense_array"
    irdl.attributes {"shape" = %shape_attr}
    irdl.operands(input: %input, sizes: variadic %index)
    irdl.results(result: %result)
  }
  irdl.operation @reshape {
    %input = irdl.base "!builtin.tensor"
    %index = irdl.is index
    %result = irdl.base "!builtin.tensor"
    %shape_attr = irdl.base "#builtin.dense_array"
    irdl.attributes {"shape" = %shape_attr}
    irdl.operands(input: %input, sizes: variadic %index)
    irdl.results(result: %result)
  }
  irdl.operation @permute {
    %input = irdl.base "!builtin.tensor"
    %result = irdl.base "!builtin.tensor"
    %dims_attr = irdl.base "#builtin.dense_array"
    irdl.attributes {"dims" = %dims_attr}
    irdl.operands(input: %input)
    irdl.results(result: %result)
  }
  irdl.operation @squeeze {
    %input = irdl.base "!builtin.tensor"
    %result = irdl.base "!builtin.tensor"
    %dims_attr = irdl.base "#builtin.dense_array"
    irdl.attributes {"dims" = %dims_attr}
    irdl.operands(input: %input)
    irdl.results(result: %result)
  }
  irdl.operation @unsqueeze {
    %input = irdl.base "!builtin.tensor"
    %result = irdl.base "!builtin.tensor"
    %dim_attr = irdl.base "#builtin.integer"
    irdl.attributes {"dim" = %dim_attr}
    irdl.operands(input: %input)
    irdl.results(result: %result)
  }
  irdl.operation @iota {
    %index = irdl.is index
    %result = irdl.base "!builtin.tensor"
    %shape_attr = irdl.base "#builtin.dense_array"
    %dim_attr = irdl.base "#builtin.integer"
    %start_attr = irdl.any
    %step_attr = irdl.any
    irdl.attributes {"shape" = %shape_attr, "dim" = %dim_attr, "start" = %start_attr, "step" = %step_attr}
    irdl.operands(sizes: variadic %index)
    irdl.results(result: %result)
  }
  irdl.operation @slice {
    %input = irdl.base "!builtin.tensor"
    %index = irdl.is index
    %result = irdl.base "!builtin.tensor"
    %shape_attr = irdl.base "#builtin.dense_array"
    %starts_attr = irdl.base "#builtin.dense_array"
    %steps_attr = irdl.base "#builtin.dense_array"
    irdl.attributes {"shape" = %shape_attr, "starts" = %starts_attr, "steps" = %steps_attr}
    irdl.operands(input: %input, sizes: variadic %index)
    irdl.results(result: %result)
  }
  irdl.operation @cat {
    %lhs = irdl.base "!builtin.tensor"
    %rhs = irdl.base "!builtin.tensor"
    %result = irdl.base "!builtin.tensor"
    %dim_attr = irdl.base "#builtin.integer"
    irdl.attributes {"dim" = %dim_attr}
    irdl.operands(lhs: %lhs, rhs: %rhs)
    irdl.results(result: %result)
  }
  irdl.operation @pad {
    %input = irdl.base "!builtin.tensor"
    %value = irdl.base "!builtin.tensor"
    %result = irdl.base "!builtin.tensor"
    %low_attr = irdl.base "#builtin.dense_array"
    %high_attr = irdl.base "#builtin.dense_array"
    irdl.attributes {"low" = %low_attr, "high" = %high_attr}
    irdl.operands(input: %input, value: %value)
    irdl.results(result: %result)
  }
  irdl.operation @gather {
    %input = irdl.base "!builtin.tensor"
    %index = irdl.base "!builtin.tensor"
    %result = irdl.base "!builtin.tensor"
    %dim_attr = irdl.base "#builtin.integer"
    irdl.attributes {"dim" = %dim_attr}
    irdl.operands(input: %input, index: %index)
    irdl.results(result: %result)
  }
  irdl.operation @cast {
    %input = irdl.base "!builtin.tensor"
    %result = irdl.base "!builtin.tensor"
    irdl.operands(input: %input)
    irdl.results(result: %result)
  }
  irdl.operation @constant {
    %result = irdl.base "!builtin.tensor"
    %value_attr = irdl.any
    irdl.attributes {"value" = %value_attr}
    irdl.operands()
    irdl.results(result: %result)
  }
  irdl.operation @uniform {
    %minval = irdl.base "!builtin.tensor"
    %maxval = irdl.base "!builtin.tensor"
    %seed = irdl.base "!builtin.tensor"
    %offset = irdl.base "!builtin.tensor"
    %index = irdl.is index
    %result = irdl.base "!builtin.tensor"
    %shape_attr = irdl.base "#builtin.dense_array"
    irdl.attributes {"shape" = %shape_attr}
    irdl.operands(minval: %minval, maxval: %maxval, seed: %seed, offset: %offset, sizes: variadic %index)
    irdl.results(result: %result)
  }
  irdl.operation @rand_like {
    %input = irdl.base "!builtin.tensor"
    %seed = irdl.base "!builtin.tensor"
    %offset = irdl.base "!builtin.tensor"
    %result = irdl.base "!builtin.tensor"
    irdl.operands(input: %input, seed: %seed, offset: %offset)
    irdl.results(result: %result)
  }
  irdl.operation @size {
    %input = irdl.base "!builtin.tensor"
    %idx = irdl.is index
    %dim_attr = irdl.base "#builtin.integer"
    irdl.attributes {"dim" = %dim_attr}
    irdl.operands(input: %input)
    irdl.results(result: %idx)
  }
  irdl.operation @matmul {
    %lhs = irdl.base "!builtin.tensor"
    %rhs = irdl.base "!builtin.tensor"
    %result = irdl.base "!builtin.tensor"
    irdl.operands(lhs: %lhs, rhs: %rhs)
    irdl.results(result: %result)
  }
  irdl.operation @linear {
    %input = irdl.base "!builtin.tensor"
    %weight = irdl.base "!builtin.tensor"
    %bias = irdl.base "!builtin.tensor"
    %result = irdl.base "!builtin.tensor"
    irdl.operands(input: %input, weight: %weight, bias: optional %bias)
    irdl.results(result: %result)
  }
  irdl.operation @cumsum {
    %input = irdl.base "!builtin.tensor"
    %result = irdl.base "!builtin.tensor"
    %dim_attr = irdl.base "#builtin.integer"
    %reverse_attr = irdl.base "#builtin.integer"
    irdl.attributes {"dim" = %dim_attr, "reverse" = %reverse_attr}
    irdl.operands(input: %input)
    irdl.results(result: %result)
  }
  irdl.operation @cumprod {
    %input = irdl.base "!builtin.tensor"
    %result = irdl.base "!builtin.tensor"
    %dim_attr = irdl.base "#builtin.integer"
    irdl.attributes {"dim" = %dim_attr}
    irdl.operands(input: %input)
    irdl.results(result: %result)
  }
  irdl.operation @cummax {
    %input = irdl.base "!builtin.tensor"
    %result = irdl.base "!builtin.tensor"
    %dim_attr = irdl.base "#builtin.integer"
    irdl.attributes {"dim" = %dim_attr}
    irdl.operands(input: %input)
    irdl.results(result: %result)
  }
  irdl.operation @cummin {
    %input = irdl.base "!builtin.tensor"
    %result = irdl.base "!builtin.tensor"
    %dim_attr = irdl.base "#builtin.integer"
    irdl.attributes {"dim" = %dim_attr}
    irdl.operands(input: %input)
    irdl.results(result: %result)
  }
  irdl.operation @cumprod_grad {
    %grad = irdl.base "!builtin.tensor"
    %input = irdl.base "!builtin.tensor"
    %output = irdl.base "!builtin.tensor"
    %result = irdl.base "!builtin.tensor"
    %dim_attr = irdl.base "#builtin.integer"
    irdl.attributes {"dim" = %dim_attr}
    irdl.operands(grad: %grad, input: %input, output: %output)
    irdl.results(result: %result)
  }
  irdl.operation @cummaxmin_grad {
    %grad = irdl.base "!builtin.tensor"
    %input = irdl.base "!builtin.tensor"
    %output = irdl.base "!builtin.tensor"
    %result = irdl.base "!builtin.tensor"
    %dim_attr = irdl.base "#builtin.integer"
    %max_attr = irdl.base "#builtin.integer"
    irdl.attributes {"dim" = %dim_attr, "max" = %max_attr}
    irdl.operands(grad: %grad, input: %input, output: %output)
    irdl.results(result: %result)
  }
}
