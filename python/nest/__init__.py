"""nest from Python: tensor graphs with named axes, compiled to C by nest.

    import numpy as np
    import nest as ng

    N = ng.make_axis(length=1 << 20, name="N")
    a = ng.placeholder([N])
    b = ng.placeholder([N])
    d = a - b
    l2 = ng.computation(ng.dot(d, d), a, b)     # compiled once, in process
    l2(np.ones(1 << 20, np.float32), np.zeros(1 << 20, np.float32))   # array(1048576.)

Pure Python over libnest.so (ctypes) and numpy; docs/python.md is the guide.
"""
from ._capi import NestError
from .axes import Axes, Axis, AxisError, make_axes, make_axis
from .computation import Computation, computation
from .conv import avg_pool, convolution, max_pool
from .graph import Tensor
from .nn import gather, one_hot, pad, topk
from .onnx import load_onnx
from .ops import (absolute, acos, add, argmax, argmin, asin, atan, axes_with_order, broadcast,
                  cast_axes, ceil, concat_along_axis, constant, convert, cos, cosh,
                  cross_entropy_multi, divide, dot, equal, erf, exp, flatten_axes, floor,
                  greater, greater_equal, less, less_equal, log, logical_and, logical_not,
                  logical_or, max, maximum, mean, min, minimum, multiply, negative, not_equal,
                  placeholder, power, prod, reciprocal, relu, reverse, select, sigmoid, sign, sin,
                  sinh, softmax, sqrt, square, subtract, sum, tan, tanh, tensor_slice, transpose,
                  unflatten_axes)
from .state import (assign, deriv, normal, persistent_tensor, set_value, uniform, value_of,
                    variable)

__all__ = [
    # axes, tensors, computations
    "NestError", "Axes", "Axis", "AxisError", "make_axes", "make_axis", "Computation",
    "computation", "Tensor", "load_onnx", "placeholder", "constant", "variable",
    "persistent_tensor", "assign", "deriv", "uniform", "normal", "value_of", "set_value",
    # element-wise
    "absolute", "add", "subtract", "multiply", "divide", "power", "maximum", "minimum",
    "negative", "reciprocal", "square", "exp", "log", "sqrt", "tanh", "sin", "cos", "tan",
    "asin", "acos", "atan", "sinh", "cosh", "floor", "ceil", "erf", "sign", "relu", "sigmoid",
    "equal", "not_equal", "less", "less_equal", "greater", "greater_equal", "logical_and",
    "logical_or", "logical_not", "select", "convert",
    # products, reductions, axes
    "dot", "sum", "max", "min", "prod", "mean", "argmax", "argmin", "softmax",
    "cross_entropy_multi", "axes_with_order", "transpose", "broadcast", "cast_axes",
    "flatten_axes", "unflatten_axes", "tensor_slice", "concat_along_axis", "reverse",
    # models
    "one_hot", "gather", "topk", "pad", "convolution", "max_pool", "avg_pool",
]
