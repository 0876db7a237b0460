"""Convolution and pooling by axis roles: the caller names the spatial axes (and the front end
finds the channels and batch by name), so a tensor's axes can be in any order. Lowered to nest's
convolution, max_pool and avg_pool, which take x as [N, C, d1..dk] and w as [K, C/groups,
f1..fk]: the operands are reordered (and extra batch axes merged) around the call.
"""
import numbers

from . import _capi
from ._capi import lib
from .axes import Axes, Axis, AxisError, as_axes
from .graph import as_tensor, lowering, make, resolve


def _spatial_index(key, spatial, what):
    """The position in spatial of the axis key (an Axis or a name)."""
    name = getattr(key, "name", key)
    if name not in spatial.names:
        raise AxisError("%s: %s is not a spatial axis (%s)"
                        % (what, key, ", ".join(map(str, spatial))))
    return spatial.names.index(name)


def _per_axis(value, spatial, what, default):
    """One integer per spatial axis from an int (all alike), a sequence in the order of
    spatial, or a dict {axis or name: int} (the others take default)."""
    k = len(spatial)
    if value is None:
        return [default] * k
    if isinstance(value, numbers.Integral):
        return [int(value)] * k
    if isinstance(value, dict):
        out = [default] * k
        for key, v in value.items():
            out[_spatial_index(key, spatial, what)] = int(v)
        return out
    value = [int(v) for v in value]
    if len(value) != k:
        raise ValueError("%s: %d values for %d spatial axes (%s)"
                         % (what, len(value), k, ", ".join(map(str, spatial))))
    return value


def _padding(padding, spatial):
    """(below, above) per spatial axis: an int, a sequence of ints or of (below, above) pairs,
    or a dict {axis: int or (below, above)}."""
    k = len(spatial)
    if isinstance(padding, dict):
        pairs = [(0, 0)] * k
        for key, v in padding.items():
            i = _spatial_index(key, spatial, "padding")
            pairs[i] = (v, v) if isinstance(v, numbers.Integral) else v
    elif isinstance(padding, numbers.Integral):
        pairs = [(padding, padding)] * k
    else:
        pairs = [(p, p) if isinstance(p, numbers.Integral) else p for p in padding]
        if len(pairs) != k:
            raise ValueError("padding: %d values for %d spatial axes" % (len(pairs), k))
    return [int(p[0]) for p in pairs], [int(p[1]) for p in pairs]


def _window_out(n, f, stride, dilation, below, above, data_dilation):
    """The output extent of a window, nest's rule (nest.h); None when it does not fit (the
    library then says why)."""
    def dilated(m, s):
        return 0 if m == 0 else (m - 1) * s + 1
    span = dilated(n, data_dilation) + below + above - dilated(f, dilation)
    if stride < 1 or span < 0:
        return None
    return span // stride + 1


def _out_axes(x, spatial, lengths, out_spatial, what):
    """The output spatial axes: out_spatial as given (checked), or the input's names with the
    new lengths."""
    if out_spatial is None:
        return [Axis(n, a.name) for a, n in zip(spatial, lengths)]
    out = list(as_axes(out_spatial))
    if len(out) != len(spatial):
        raise AxisError("%s: out_spatial has %d axes for %d spatial axes" % (what, len(out),
                                                                            len(spatial)))
    for a, n in zip(out, lengths):
        if a.length != n:
            raise AxisError("%s: out_spatial axis %r should have length %d" % (what, a, n))
    return out


def convolution(x, w, spatial, channel=None, out_channel=None, filter_spatial=None, strides=1,
                dilation=1, padding=0, data_dilation=1, groups=1, out_spatial=None):
    """Convolution of x with filters w, by axis roles.

    spatial: x's spatial axes (1 to 3, by Axis or name), in the order that pairs them with the
    filter's. channel: x's channel axis (default: the one axis x and w share by name); w has an
    axis of that name with length C / groups. out_channel: w's output channel axis, and
    filter_spatial: w's spatial axes paired with spatial; give one, the other is what remains
    of w. x's other axes are batch axes. strides, dilation, data_dilation: an int, one per
    spatial axis, or {axis: int}; padding also (below, above) pairs (negative crops). The
    result has x's axes in x's order, the channel replaced by out_channel and the spatial axes
    by out_spatial (default: the same names with the new lengths)."""
    x, w = as_tensor(x), as_tensor(w)
    spatial = resolve(x, spatial, "convolution")
    if not 1 <= len(spatial) <= 3:
        raise AxisError("convolution: 1 to 3 spatial axes, not %d" % len(spatial))
    if channel is None:
        shared = x.axes & w.axes
        if len(shared) != 1:
            raise AxisError("convolution: name the channel axis of %s (x and w share %s)"
                            % (x.describe(), ", ".join(map(str, shared)) or "no axis"))
        channel = shared[0]
    c = resolve(x, [channel], "convolution")[0]
    wc = w.axes.find(c.name)
    if wc is None:
        raise AxisError("convolution: the filters %s have no channel axis %s"
                        % (w.describe(), c.name))
    rest = w.axes - Axes(wc)
    if filter_spatial is not None:
        fs = resolve(w, filter_spatial, "convolution")
        k = rest - fs
        if len(k) != 1:
            raise AxisError("convolution: the filters %s should have one output channel axis "
                            "besides %s and (%s)" % (w.describe(), c.name,
                                                     ", ".join(map(str, fs))))
        k = k[0]
    elif out_channel is not None:
        k = resolve(w, [out_channel], "convolution")[0]
        fs = rest - Axes(k)
    else:
        raise AxisError("convolution: give out_channel or filter_spatial of %s" % w.describe())
    if len(fs) != len(spatial):
        raise AxisError("convolution: %d filter spatial axes (%s) for %d spatial axes (%s)"
                        % (len(fs), ", ".join(map(str, fs)), len(spatial),
                           ", ".join(map(str, spatial))))
    if k.name in x.axes:
        raise AxisError("convolution: the output channel axis %s is already an axis of %s"
                        % (k.name, x.describe()))
    strides = _per_axis(strides, spatial, "strides", 1)
    dilation = _per_axis(dilation, spatial, "dilation", 1)
    data_dilation = _per_axis(data_dilation, spatial, "data_dilation", 1)
    below, above = _padding(padding, spatial)
    lengths = [_window_out(a.length, f.length, s, d, b, e, dd) for a, f, s, d, b, e, dd
               in zip(spatial, fs, strides, dilation, below, above, data_dilation)]
    attrs = {"spatial": spatial, "channel": c, "filter_channel": wc, "out_channel": k,
             "filter_spatial": fs, "strides": strides, "dilation": dilation, "below": below,
             "above": above, "data_dilation": data_dilation, "groups": int(groups)}
    if None in lengths:  # the library says what does not fit
        lengths = [0] * len(spatial)
        attrs["unfit"] = True
    out = _out_axes(x, spatial, lengths, out_spatial, "convolution")
    axes = [k if a.name == c.name else out[spatial.names.index(a.name)]
            if a.name in spatial.names else a for a in x.axes]
    return make("convolution", (x, w), Axes(axes), attrs)


def _batch_first(b, v, x, roles):
    """x's value reordered to [batch axes..., roles...] and its batch axes merged into one:
    (the value, the batch axes)."""
    batch = x.axes - Axes(roles)
    v = b.reorder(v, x.axes, batch + Axes(roles))
    if len(batch) != 1:
        v = b.reshape(v, (batch.size,) + tuple(a.length for a in roles))
    return v, batch


def _unbatch(b, v, batch, middle, node):
    """The [batch merged, middle...] value back to node's axes."""
    if len(batch) != 1:
        v = b.reshape(v, batch.lengths + tuple(a.length for a in middle))
    return b.reorder(v, batch + Axes(middle), node.axes)


@lowering("convolution")
def _lower_convolution(b, node, vals):
    x, w = node.args
    at = node.attrs
    sp = at["spatial"]
    xv, batch = _batch_first(b, vals[0], x, [at["channel"]] + list(sp))
    wv = b.reorder(vals[1], w.axes, Axes([at["out_channel"], at["filter_channel"]] +
                                         list(at["filter_spatial"])))
    i64 = _capi.int64s
    v = b.check(lib.nest_convolution(b.fn, xv, wv, i64(at["strides"]), i64(at["dilation"]),
                                     i64(at["below"]), i64(at["above"]),
                                     i64(at["data_dilation"]), at["groups"]))
    out = [node.axes.find(a.name) for a in sp]
    return _unbatch(b, v, batch, [at["out_channel"]] + out, node)


def _pool(kind, x, window, spatial, strides, padding, out_spatial, include_pad=False):
    x = as_tensor(x)
    if isinstance(window, dict):
        if spatial is None:
            spatial = list(window)
        window = _per_axis(window, resolve(x, spatial, kind), "window", 0)
    if spatial is None:
        raise AxisError("%s: name the spatial axes (window={H: 2, W: 2} or spatial=)" % kind)
    spatial = resolve(x, spatial, kind)
    if not 1 <= len(spatial) <= 3:
        raise AxisError("%s: 1 to 3 spatial axes, not %d" % (kind, len(spatial)))
    window = _per_axis(window, spatial, "window", 0)
    strides = _per_axis(strides, spatial, "strides", 1)
    below, above = _padding(padding, spatial)
    lengths = [_window_out(a.length, f, s, 1, lo, hi, 1)
               for a, f, s, lo, hi in zip(spatial, window, strides, below, above)]
    attrs = {"spatial": spatial, "window": window, "strides": strides, "below": below,
             "above": above, "include_pad": int(bool(include_pad))}
    if None in lengths:
        lengths = [0] * len(spatial)
    out = _out_axes(x, spatial, lengths, out_spatial, kind)
    axes = [out[spatial.names.index(a.name)] if a.name in spatial.names else a for a in x.axes]
    return make(kind, (x,), Axes(axes), attrs)


def max_pool(x, window, spatial=None, strides=1, padding=0, out_spatial=None):
    """The largest element of each window over the spatial axes: window is {axis: size} (the
    spatial axes are its keys) or sizes in the order of spatial. strides (default 1) and padding
    as for convolution; the padding is ignored. Every other axis of x is kept as it is."""
    return _pool("max_pool", x, window, spatial, strides, padding, out_spatial)


def avg_pool(x, window, spatial=None, strides=1, padding=0, include_pad=False,
             out_spatial=None):
    """The mean of each window: divided by the elements of x in it, or with include_pad by the
    whole window (the padding counts as zeros)."""
    return _pool("avg_pool", x, window, spatial, strides, padding, out_spatial, include_pad)


@lowering("max_pool", "avg_pool")
def _lower_pool(b, node, vals):
    x = node.args[0]
    at = node.attrs
    sp = at["spatial"]
    v, batch = _batch_first(b, vals[0], x, list(sp))
    # nest's pools take [N, C, d...]: every kept axis merged into N, C = 1
    v = b.reshape(v, (batch.size, 1) + sp.lengths)
    i64 = _capi.int64s
    args = (i64(at["window"]), i64(at["strides"]), i64(at["below"]), i64(at["above"]))
    if node.op == "max_pool":
        v = b.check(lib.nest_max_pool(b.fn, v, *args))
    else:
        v = b.check(lib.nest_avg_pool(b.fn, v, *args, at["include_pad"]))
    out = [node.axes.find(a.name) for a in sp]
    v = b.reshape(v, (batch.size,) + tuple(a.length for a in out))
    return _unbatch(b, v, batch, out, node)
