"""The ops of models, by axis name: one_hot, gather (embeddings), topk, pad (convolution and
pooling, by axis roles, are conv.py).

Each names the axes it works on; the lowering finds their positions and calls nest's
positional op.
"""
import numbers

import numpy as np

from . import _capi
from ._capi import lib
from .axes import Axes, Axis, AxisError
from .graph import as_tensor, lowering, make, resolve, union_axes
from .ops import convert


def one_hot(indices, axis, dtype=None):
    """A tensor with the new `axis` (an Axis: its length is the number of classes) first, then
    the axes of indices: 1 where the element of indices equals the position along axis, else 0
    (an index outside the axis, or a float that is no integer, gives zeros). The type is
    indices' (nest's one_hot), or dtype."""
    indices = as_tensor(indices)
    if not isinstance(axis, Axis):
        raise TypeError("one_hot: the new axis must be an Axis (its length is the number of "
                        "classes), not %r" % (axis,))
    if axis.name in indices.axes.names:
        raise AxisError("one_hot: %s is already an axis of %s" % (axis, indices.describe()))
    out = make("one_hot", (indices,), Axes(axis) + indices.axes)
    return out if dtype is None else convert(out, dtype)


@lowering("one_hot")
def _lower_one_hot(b, node, vals):
    shape = node.axes.lengths
    return b.check(lib.nest_one_hot(b.fn, vals[0], len(shape), b.c_shape(shape), 0))


def gather(x, indices, axis):
    """numpy.take(x, indices, axis): x's axes with `axis` replaced, in its place, by the axes
    of indices (int32 or int64). An index in [-n, n) takes that element (negative ones count
    from the end); one outside is clamped: nothing outside x is read. An embedding lookup is
    gather(table, ids, V) for a table with axes (V, E)."""
    x, indices = as_tensor(x), as_tensor(indices)
    a = resolve(x, [axis], "gather")[0]
    i = x.axes.index(a)
    rest = x.axes - Axes(a)
    union_axes((x, indices), "gather")
    if rest & indices.axes:
        raise AxisError("gather: the axes of the indices %s and of %s other than %s share "
                        "names: (%s)" % (indices.describe(), x.describe(), a,
                                         ", ".join(map(str, rest & indices.axes))))
    out = Axes(list(x.axes[:i]) + list(indices.axes) + list(x.axes[i + 1:]))
    return make("gather", (x, indices), out, {"axis": i})


@lowering("gather")
def _lower_gather(b, node, vals):
    return b.check(lib.nest_gather(b.fn, vals[0], vals[1], node.attrs["axis"]))


def topk(x, k, axis, largest=True):
    """(values, indices): the k largest (or smallest) elements of x along axis, best first,
    and their int64 indices; both have x's axes, axis with length k (the same name, as a
    slice). Equal elements keep their index order; a NaN counts as beyond every number."""
    x = as_tensor(x)
    a = resolve(x, [axis], "topk")[0]
    if isinstance(k, bool) or not isinstance(k, numbers.Integral) or not 0 <= k <= a.length:
        raise ValueError("topk: k must be an integer in [0, %d] (the length of %s), not %r"
                         % (a.length, a, k))
    out = Axes(Axis(k, a.name) if b is a else b for b in x.axes)
    key = object()  # the two results share one nest_topk
    attrs = {"k": int(k), "axis": x.axes.index(a), "largest": bool(largest), "key": key}
    return (make("topk_values", (x,), out, dict(attrs, element=0)),
            make("topk_indices", (x,), out, dict(attrs, element=1)))


@lowering("topk_values", "topk_indices")
def _lower_topk(b, node, vals):
    at = node.attrs
    t = b.shared.get(at["key"])
    if t is None:
        t = b.shared[at["key"]] = b.check(lib.nest_topk(b.fn, vals[0], at["k"], at["axis"],
                                                        int(at["largest"])))
    return b.check(lib.nest_get(b.fn, t, at["element"]))


def pad(x, paddings, value=0, interior=None):
    """x padded with `value` (a scalar of x's type): paddings is {axis or name: (below,
    above)}; interior {axis or name: n} puts n values between neighbours. Negative amounts
    crop. A padded axis keeps its name with its new length, as a slice."""
    x = as_tensor(x)
    below, above, inner = [0] * len(x.axes), [0] * len(x.axes), [0] * len(x.axes)
    for name, amounts in (paddings or {}).items():
        i = x.axes.index(resolve(x, [name], "pad")[0])
        try:
            below[i], above[i] = (int(v) for v in amounts)
        except (TypeError, ValueError):
            raise ValueError("pad: the padding of axis %s is (below, above), not %r"
                             % (x.axes[i], amounts)) from None
    for name, n in (interior or {}).items():
        inner[x.axes.index(resolve(x, [name], "pad")[0])] = int(n)
    out = []
    for a, lo, hi, n in zip(x.axes, below, above, inner):
        length = lo + hi + (a.length - 1) * (n + 1) + 1 if a.length else lo + hi
        if length < 0:
            raise AxisError("pad: axis %s would have length %d" % (a, length))
        out.append(a if length == a.length else Axis(length, a.name))
    value = np.asarray(value)
    if value.ndim or value.dtype.kind not in "biuf":
        raise TypeError("pad: the value must be a number, not %r" % (value,))
    if x.dtype.kind in "iu" and not float(value).is_integer():
        raise TypeError("pad: %r cannot pad %s" % (float(value), x.describe()))
    return make("pad", (x,), Axes(out), {"below": below, "above": above, "interior": inner,
                                         "value": value})


@lowering("pad")
def _lower_pad(b, node, vals):
    at = node.attrs
    dtype = node.args[0].dtype
    with np.errstate(all="ignore"):
        value = b.scalar(at["value"].astype(dtype), dtype)
    return b.check(lib.nest_pad(b.fn, vals[0], value, _capi.int64s(at["below"]),
                                _capi.int64s(at["above"]), _capi.int64s(at["interior"])))
