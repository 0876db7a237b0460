"""The op functions of the front end (ng.exp, ng.dot, ng.sum, ...) and the Tensor operators.

Element-wise ops align their operands by axis name: the result has the first operand's axes,
then the other operands' new axes in order, and every operand is transposed and broadcast to
it. ng.dot contracts the axes its operands share. Reductions name the axes they remove.
"""
import builtins
import numbers
import operator

import numpy as np

from . import _capi
from .axes import Axes, Axis, AxisError, as_axes
from .graph import (PLACEHOLDER, Tensor, as_axis_list, as_tensor,
                    constant_node, dtype_of, lowering, make, resolve, union_axes)

# ---- leaves ------------------------------------------------------------------------------------


def placeholder(axes, dtype=np.float32, name=None):
    """An input given when the computation is called: a numpy array of `dtype` whose shape
    is the lengths of `axes`, in order."""
    return Tensor(PLACEHOLDER, (), as_axes(axes), dtype_of(dtype), name=name)


def constant(value, axes=None, dtype=None, name=None):
    """A constant tensor: a numpy array whose shape is the lengths of `axes`, or a scalar
    (which fills the axes, or is a scalar tensor without them). The value is copied. dtype
    defaults to the value's for integer and bool arrays, float32 otherwise."""
    node = constant_node(value, axes if axes is not None else Axes(), dtype)
    node.name = name
    return node


# ---- element-wise ------------------------------------------------------------------------------


def _operands(args):
    """Tensors from tensors and scalars: a scalar takes the type of the first tensor."""
    like = next((a for a in args if isinstance(a, Tensor)), None)
    return [as_tensor(a, like) for a in args]


def _elementwise(op, *args):
    ts = _operands(args)
    return make(op, ts, union_axes(ts, op))


@lowering("add", "subtract", "multiply", "divide", "maximum", "minimum", "power", "less",
          "greater", "equal", "not_equal", "less_eq", "greater_eq", "and", "or", "select",
          *_capi.UNARY)
def _lower_elementwise(b, node, vals):
    aligned = [b.align(v, a.axes, node.axes) for v, a in zip(vals, node.args)]
    return b.op(node.op, *aligned)


def add(x, y):
    """x + y, aligned by axis name."""
    return _elementwise("add", x, y)


def subtract(x, y):
    """x - y, aligned by axis name."""
    return _elementwise("subtract", x, y)


def multiply(x, y):
    """x * y, aligned by axis name."""
    return _elementwise("multiply", x, y)


def divide(x, y):
    """x / y (integers: truncated toward zero, x / 0 is 0, as nest's divide)."""
    return _elementwise("divide", x, y)


def maximum(x, y):
    """The larger of x and y (x > y ? x : y: a NaN in x gives y)."""
    return _elementwise("maximum", x, y)


def minimum(x, y):
    """The smaller of x and y (x < y ? x : y)."""
    return _elementwise("minimum", x, y)


def power(x, y):
    """x ** y."""
    return _elementwise("power", x, y)


def less(x, y):
    return _elementwise("less", x, y)


def greater(x, y):
    return _elementwise("greater", x, y)


def equal(x, y):
    return _elementwise("equal", x, y)


def not_equal(x, y):
    """x != y (a NaN differs from everything)."""
    return _elementwise("not_equal", x, y)


def less_equal(x, y):
    return _elementwise("less_eq", x, y)


def greater_equal(x, y):
    return _elementwise("greater_eq", x, y)


def logical_and(x, y):
    """x and y, of bool tensors (also x & y)."""
    return _elementwise("and", x, y)


def logical_or(x, y):
    """x or y, of bool tensors (also x | y)."""
    return _elementwise("or", x, y)


def logical_not(x):
    """not x, of a bool tensor (also ~x)."""
    return _elementwise("not", x)


def negative(x):
    return _elementwise("negative", x)


def absolute(x):
    return _elementwise("abs", x)


def exp(x):
    return _elementwise("exp", x)


def log(x):
    return _elementwise("log", x)


def sqrt(x):
    return _elementwise("sqrt", x)


def tanh(x):
    return _elementwise("tanh", x)


def square(x):
    x = as_tensor(x)
    return x * x


def reciprocal(x):
    x = as_tensor(x)
    return divide(as_tensor(1, x), x)


def relu(x):
    """x < 0 ? 0 : x (NaN stays NaN; the derivative at 0 is 0, as PyTorch's)."""
    return _elementwise("relu", x)


def sigmoid(x):
    """1 / (1 + exp(-x))."""
    return _elementwise("sigmoid", x)


def _math(op, doc):
    def fn(x):
        return _elementwise(op, x)
    fn.__name__ = fn.__qualname__ = {"ceiling": "ceil"}.get(op, op)
    fn.__doc__ = doc
    return fn


sin = _math("sin", "sin(x), of floats (as C's libm).")
cos = _math("cos", "cos(x).")
tan = _math("tan", "tan(x).")
asin = _math("asin", "asin(x).")
acos = _math("acos", "acos(x).")
atan = _math("atan", "atan(x).")
sinh = _math("sinh", "sinh(x).")
cosh = _math("cosh", "cosh(x).")
floor = _math("floor", "floor(x), of floats.")
ceil = _math("ceiling", "ceil(x), of floats.")
erf = _math("erf", "erf(x), the error function.")
sign = _math("sign", "1, -1, or x itself for 0, -0 and NaN; of floats.")


def select(cond, x, y):
    """cond ? x : y element-wise; cond is bool; all three align by axis name."""
    cond = as_tensor(cond)
    x, y = _operands((x, y))
    return make("select", (cond, x, y), union_axes((cond, x, y), "select"))


def convert(x, dtype):
    """x with elements of another type (floats to integers truncate and saturate; anything
    to bool is x != 0)."""
    x = as_tensor(x)
    dtype = dtype_of(dtype)
    if dtype == x.dtype:
        return x
    return make("convert", (x,), x.axes, {"dtype": dtype})


@lowering("convert")
def _lower_convert(b, node, vals):
    return b.convert(vals[0], node.attrs["dtype"])


# ---- products and reductions ------------------------------------------------------------------


def dot(x, y, batch_axes=None):
    """The sum of products over the axes x and y share by name; the result has x's other
    axes, then y's. Without a shared axis, the outer product. batch_axes: shared axes that are
    not summed but kept, first in the result (a product per batch element)."""
    x, y = _operands((x, y))
    union_axes((x, y), "dot")  # a shared name with two lengths is an error
    batch = Axes() if batch_axes is None else resolve(x, batch_axes, "dot")
    for a in batch:
        if a.name not in y.axes.names:
            raise AxisError("dot: the batch axis %s is not an axis of %s" % (a, y.describe()))
    shared = (x.axes & y.axes) - batch
    if not shared:
        return multiply(x, y) if not batch else axes_with_order(
            multiply(x, y), batch + ((x.axes - batch) + (y.axes - batch)))
    if batch:
        return make("batch_dot", (x, y),
                    batch + (x.axes - batch - shared) + (y.axes - batch - shared),
                    {"shared": shared, "batch": batch})
    return make("dot", (x, y), (x.axes - shared) + (y.axes - shared), {"shared": shared})


@lowering("batch_dot")
def _lower_batch_dot(b, node, vals):
    """nest's batch_dot (tiled) on [batch, x's free, shared] x [batch, shared, y's free], each
    group of axes merged into one; where the computation takes derivatives, the summed products
    instead (nest_grad has no rule for batch_dot), which fuse into one loop nest."""
    x, y = node.args
    shared, batch = node.attrs["shared"], node.attrs["batch"]
    xf, yf = x.axes - batch - shared, y.axes - batch - shared
    if b.deriv_groups:
        aligned = [b.align(v, t.axes, batch + xf + yf + shared) for v, t in zip(vals, node.args)]
        return b.reduce("sum", b.op("multiply", *aligned),
                        list(range(len(node.axes), len(node.axes) + len(shared))))
    a = b.reorder(vals[0], x.axes, batch + xf + shared)
    c = b.reorder(vals[1], y.axes, batch + shared + yf)
    a = b.reshape(a, (batch.size, xf.size, shared.size))
    c = b.reshape(c, (batch.size, shared.size, yf.size))
    return b.reshape(b.op("batch_dot", a, c), node.axes.lengths)


@lowering("dot")
def _lower_dot(b, node, vals):
    x, y = node.args
    shared = node.attrs["shared"]
    xf, yf = x.axes - shared, y.axes - shared
    # x as [x's free axes, shared axes merged], y as [shared merged, y's free axes]
    a = b.reorder(vals[0], x.axes, xf + shared)
    c = b.reorder(vals[1], y.axes, shared + yf)
    if len(shared) != 1:
        a = b.reshape(a, xf.lengths + (shared.size,))
        c = b.reshape(c, (shared.size,) + yf.lengths)
    return b.op("dot", a, c)


def _reduction_axes(x, reduction_axes, out_axes, what):
    """(the axes removed, the result's axes in order)."""
    if reduction_axes is not None and out_axes is not None:
        raise ValueError("%s: give reduction_axes or out_axes, not both" % what)
    if out_axes is not None:
        out = resolve(x, out_axes, what)
        return x.axes - out, out
    red = x.axes if reduction_axes is None else resolve(x, reduction_axes, what)
    return red, x.axes - red


def _reduce(kind, x, reduction_axes, out_axes):
    x = as_tensor(x)
    red, out = _reduction_axes(x, reduction_axes, out_axes, kind)
    if not red:
        return x if out == x.axes else axes_with_order(x, out)
    return make(kind, (x,), out, {"reduced": red})


@lowering("sum", "max", "min", "product")
def _lower_reduce(b, node, vals):
    x = node.args[0]
    red = node.attrs["reduced"]
    v = b.reduce(node.op, vals[0], [x.axes.index(a) for a in red])
    return b.reorder(v, x.axes - red, node.axes)


def sum(x, reduction_axes=None, out_axes=None):  # noqa: A001 (the seed's name)
    """The sum over reduction_axes (default: all), or over the axes not in out_axes (which
    also orders the result)."""
    return _reduce("sum", x, reduction_axes, out_axes)


def max(x, reduction_axes=None, out_axes=None):  # noqa: A001
    return _reduce("max", x, reduction_axes, out_axes)


def min(x, reduction_axes=None, out_axes=None):  # noqa: A001
    return _reduce("min", x, reduction_axes, out_axes)


def prod(x, reduction_axes=None, out_axes=None):
    """The product over reduction_axes (default: all); of nothing it is 1."""
    return _reduce("product", x, reduction_axes, out_axes)


def _arg(kind, x, axis):
    x = as_tensor(x)
    a = resolve(x, [axis], kind)[0]
    return make(kind, (x,), x.axes - Axes(a), {"axis": x.axes.index(a)})


def argmax(x, axis):
    """The index (int64) of the largest element along axis, which is removed; ties give the
    lowest index, and the first NaN wins (as numpy)."""
    return _arg("argmax", x, axis)


def argmin(x, axis):
    """The index (int64) of the smallest element along axis (see argmax)."""
    return _arg("argmin", x, axis)


@lowering("argmax", "argmin")
def _lower_arg(b, node, vals):
    return b.check(getattr(_capi.lib, "nest_" + node.op)(b.fn, vals[0], node.attrs["axis"]))


def mean(x, reduction_axes=None, out_axes=None):
    x = as_tensor(x)
    red, _ = _reduction_axes(x, reduction_axes, out_axes, "mean")
    for a in red:
        if a.symbolic:
            raise AxisError("mean: axis %s of %s is symbolic: its length is not a value of the "
                            "graph (sum over it, and divide by the length in numpy)"
                            % (a, x.describe()))
    return divide(sum(x, reduction_axes, out_axes), red.size)


# ---- axes: order, broadcast, renaming, slices, concatenation ----------------------------------


def axes_with_order(x, axes):
    """x with its axes in the given order (the same axes, by Axis or by name)."""
    x = as_tensor(x)
    order = resolve(x, axes, "axes_with_order")
    if len(order) != len(x.axes):
        raise AxisError("axes_with_order: (%s) are not all the axes of %s"
                        % (", ".join(map(str, order)), x.describe()))
    if order == x.axes:
        return x
    return make("reorder", (x,), order)


def transpose(x):
    """x with its axes in reverse order."""
    x = as_tensor(x)
    return axes_with_order(x, list(reversed(x.axes)))


@lowering("reorder")
def _lower_reorder(b, node, vals):
    return b.reorder(vals[0], node.args[0].axes, node.axes)


def broadcast(x, axes):
    """x repeated along the axes it lacks, with the axes `axes` in that order (they must
    include x's)."""
    x = as_tensor(x)
    axes = as_axes(axes)
    missing = x.axes - axes
    if missing:
        raise AxisError("broadcast: %s has axes (%s) that (%s) lack"
                        % (x.describe(), ", ".join(map(str, missing)), ", ".join(map(str, axes))))
    union_axes((x, Tensor("axes", (), axes, None, name="the target")), "broadcast")
    if axes == x.axes:
        return x
    return make("broadcast", (x,), axes)


@lowering("broadcast")
def _lower_broadcast(b, node, vals):
    return b.align(vals[0], node.args[0].axes, node.axes)


def flatten_axes(x, axes, new_axis):
    """x with the axes `axes` (by Axis or name, in the order given: the first varies slowest)
    merged into new_axis, an Axis of their total length or a name; it takes the place of the
    first of them. The inverse is unflatten_axes."""
    x = as_tensor(x)
    group = resolve(x, axes, "flatten_axes")
    if isinstance(new_axis, str):
        new_axis = Axis(group.size, new_axis)
    if new_axis.length != group.size:
        raise AxisError("flatten_axes: %r should have length %d (the product of %s)"
                        % (new_axis, group.size, ", ".join(map(str, group))))
    if new_axis.name in (x.axes - group).names:
        raise AxisError("flatten_axes: %s is already an axis of %s" % (new_axis.name,
                                                                       x.describe()))
    first = builtins.min(x.axes.index(a) for a in group)
    out = [a for a in x.axes[:first] if a not in group] + [new_axis] + \
        [a for a in x.axes[first:] if a not in group]
    return make("flatten", (x,), Axes(out), {"group": group, "pos": first})


@lowering("flatten")
def _lower_flatten(b, node, vals):
    x = node.args[0]
    group, pos = node.attrs["group"], node.attrs["pos"]
    before, after = node.axes[:pos], node.axes[pos + 1:]
    v = b.reorder(vals[0], x.axes, before + group + after)
    return b.reshape(v, node.axes.lengths)


def unflatten_axes(x, axis, new_axes):
    """x with `axis` split into new_axes (the first varies slowest), in its place."""
    x = as_tensor(x)
    a = resolve(x, [axis], "unflatten_axes")[0]
    new_axes = as_axes(new_axes)
    if new_axes.size != a.length:
        raise AxisError("unflatten_axes: (%s) do not have %d elements, as %r"
                        % (", ".join(map(str, new_axes)), a.length, a))
    i = x.axes.index(a)
    out = Axes(list(x.axes[:i]) + list(new_axes) + list(x.axes[i + 1:]))
    return make("unflatten", (x,), out)


@lowering("unflatten")
def _lower_unflatten(b, node, vals):
    return b.reshape(vals[0], node.axes.lengths)


def cast_axes(x, axes):
    """The same data under other axes of the same lengths, position by position."""
    x = as_tensor(x)
    axes = as_axes(axes)
    if axes.lengths != x.axes.lengths:
        raise AxisError("cast_axes: %s cannot take the axes (%s): the lengths differ"
                        % (x.describe(), ", ".join(map(str, axes))))
    return make("cast", (x,), axes)


@lowering("cast")
def _lower_cast(b, node, vals):
    return vals[0]


def tensor_slice(x, key):
    """A slice of x. key: one entry per axis in order (a slice, an int that drops the axis,
    or ...), or a dict {axis or name: slice or int}. A sliced axis keeps its name with its
    new length, so x[1:] - x[:-1] aligns."""
    x = as_tensor(x)
    per_axis = _slice_key(x, key)
    lower, upper, strides, out = [], [], [], []
    for a, k in zip(x.axes, per_axis):
        if a.symbolic:
            if k != slice(None):
                raise AxisError("tensor_slice: axis %s of %s is symbolic: only the whole axis "
                                "(:) can be taken" % (a, x.describe()))
            lower.append(0)
            upper.append(a.length)
            strides.append(1)
            out.append(a)
        elif isinstance(k, slice):
            start, stop, step = k.indices(a.length)
            if step <= 0:
                raise ValueError("tensor_slice: axis %s: the step must be positive, not %d"
                                 % (a, step))
            stop = start if stop < start else stop
            n = (stop - start + step - 1) // step
            lower.append(start)
            upper.append(stop)
            strides.append(step)
            out.append(a if n == a.length else Axis(n, a.name))
        else:
            i = operator.index(k)
            if not -a.length <= i < a.length:
                raise IndexError("tensor_slice: index %d is out of range for axis %s" % (i, a))
            i %= a.length
            lower.append(i)
            upper.append(i + 1)
            strides.append(1)
    if all(k == slice(None) for k in per_axis):
        return x
    return make("slice", (x,), Axes(out), {"lower": lower, "upper": upper, "strides": strides})


def _slice_key(x, key):
    n = len(x.axes)
    if isinstance(key, dict):
        per = [slice(None)] * n
        for name, k in key.items():
            per[x.axes.index(resolve(x, [name], "tensor_slice")[0])] = k
        return per
    if not isinstance(key, tuple):
        key = (key,)
    if any(k is Ellipsis for k in key):
        i = key.index(Ellipsis)
        rest = key[i + 1:]
        if Ellipsis in rest:
            raise IndexError("tensor_slice: only one ... is allowed")
        key = key[:i] + (slice(None),) * (n - len(key) + 1) + rest
    if len(key) > n:
        raise IndexError("tensor_slice: %d indexes for %s" % (len(key), x.describe()))
    for k in key:
        if not isinstance(k, (slice, numbers.Integral, np.integer)) or isinstance(k, bool):
            raise IndexError("tensor_slice: %r is not a slice or an integer" % (k,))
    return list(key) + [slice(None)] * (n - len(key))


@lowering("slice")
def _lower_slice(b, node, vals):
    at = node.attrs
    v = b.slice(vals[0], at["lower"], at["upper"], at["strides"])
    if len(node.axes) != len(node.args[0].axes):  # integer indexes drop their axes
        v = b.reshape(v, node.axes.lengths)
    return v


def concat_along_axis(tensors, axis):
    """The tensors joined along `axis` (an Axis or a name), which they all have (with any
    length); their other axes must be the same, in any order. The result has the first
    tensor's axes, the joined one with the sum of the lengths."""
    ts = _operands(list(tensors))
    if not ts:
        raise ValueError("concat_along_axis: no tensors")
    name = getattr(axis, "name", axis)
    first = ts[0]
    for t in ts:
        if t.axes.find(name) is None:
            raise AxisError("concat_along_axis: %s has no axis %s" % (t.describe(), name))
        others = t.axes - Axes(t.axes.find(name))
        if set(others.names) != set((first.axes - Axes(first.axes.find(name))).names):
            raise AxisError("concat_along_axis: %s and %s differ in axes other than %s"
                            % (first.describe(), t.describe(), name))
        for a in others:
            if first.axes.find(a.name).length != a.length:
                raise AxisError("concat_along_axis: axis %s has length %s in %s and %s in %s"
                                % (a.name, first.axes.find(a.name).length, first.describe(),
                                   a.length, t.describe()))
    total = 0
    for t in ts:
        total += t.axes.find(name).length
    out = Axes(Axis(total, name) if a.name == name else a for a in first.axes)
    return make("concat", ts, out, {"axis": name})


@lowering("concat")
def _lower_concat(b, node, vals):
    name = node.attrs["axis"]
    pos = node.axes.index(name)
    parts = []
    for v, t in zip(vals, node.args):
        target = Axes(t.axes.find(name) if a.name == name else a for a in node.axes)
        parts.append(b.reorder(v, t.axes, target))
    return b.concat(parts, pos)


# ---- composite ops -----------------------------------------------------------------------------


def softmax(x, normalization_axes=None):
    """exp(x) / sum(exp(x)) over normalization_axes (required unless x has one axis), with
    the maximum subtracted first: nest's softmax, one pass over each group."""
    x = as_tensor(x)
    if normalization_axes is None:
        if len(x.axes) != 1:
            raise AxisError("softmax: name the normalization_axes of %s" % x.describe())
        normalization_axes = x.axes
    norm = resolve(x, normalization_axes, "softmax")
    return make("softmax", (x,), x.axes, {"axes": [x.axes.index(a) for a in norm]})


@lowering("softmax", "reverse")
def _lower_axes_op(b, node, vals):
    return b.reduce(node.op, vals[0], node.attrs["axes"])


def reverse(x, axes):
    """x with the given axes read backwards (a view)."""
    x = as_tensor(x)
    rev = resolve(x, axes, "reverse")
    if not rev:
        return x
    return make("reverse", (x,), x.axes, {"axes": [x.axes.index(a) for a in rev]})


def cross_entropy_multi(y, t, reduction_axes=None):
    """-sum(t * log(y)) over reduction_axes (default: all of y's axes)."""
    return -sum(multiply(t, log(y)), reduction_axes=reduction_axes)


# ---- Tensor operators --------------------------------------------------------------------------


def _install_operators():
    def binary(fn):
        return (lambda self, other: fn(self, other),
                lambda self, other: fn(as_tensor(other, self), self))
    for names, fn in ((("__add__", "__radd__"), add), (("__sub__", "__rsub__"), subtract),
                      (("__mul__", "__rmul__"), multiply),
                      (("__truediv__", "__rtruediv__"), divide),
                      (("__pow__", "__rpow__"), power)):
        f, r = binary(fn)
        setattr(Tensor, names[0], f)
        setattr(Tensor, names[1], r)
    Tensor.__lt__ = lambda self, other: less(self, other)
    Tensor.__gt__ = lambda self, other: greater(self, other)
    Tensor.__le__ = lambda self, other: less_equal(self, other)
    Tensor.__ge__ = lambda self, other: greater_equal(self, other)
    Tensor.__and__ = lambda self, other: logical_and(self, other)
    Tensor.__rand__ = lambda self, other: logical_and(other, self)
    Tensor.__or__ = lambda self, other: logical_or(self, other)
    Tensor.__ror__ = lambda self, other: logical_or(other, self)
    Tensor.__invert__ = logical_not
    Tensor.__neg__ = negative
    Tensor.__pos__ = lambda self: self
    Tensor.__abs__ = absolute
    Tensor.__getitem__ = tensor_slice
    Tensor.T = property(transpose)
    Tensor.astype = convert


_install_operators()
