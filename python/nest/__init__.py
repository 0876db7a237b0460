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
from .graph import Tensor
from .onnx import load_onnx
from .ops import (absolute, add, axes_with_order, broadcast, cast_axes, concat_along_axis,
                  constant, convert, cross_entropy_multi, divide, dot, equal, exp, greater,
                  greater_equal, less, less_equal, log, max, maximum, mean, min, minimum,
                  multiply, negative, not_equal, placeholder, power, reciprocal, relu, select,
                  sigmoid, softmax, sqrt, square, subtract, sum, tanh, tensor_slice, transpose)
from .state import assign, persistent_tensor, set_value, value_of, variable

__all__ = [
    "NestError", "Axes", "Axis", "AxisError", "make_axes", "make_axis", "Computation",
    "computation", "Tensor", "load_onnx", "absolute", "add", "axes_with_order", "broadcast", "cast_axes",
    "concat_along_axis", "constant", "convert", "cross_entropy_multi", "divide", "dot",
    "equal", "exp", "greater", "greater_equal", "less", "less_equal", "log", "max", "maximum",
    "mean", "min", "minimum", "multiply", "negative", "not_equal", "placeholder", "power",
    "reciprocal", "relu", "select", "sigmoid", "softmax", "sqrt", "square", "subtract", "sum",
    "tanh", "tensor_slice", "transpose", "assign", "persistent_tensor", "set_value",
    "value_of", "variable",
]
