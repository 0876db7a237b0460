"""The front end's graph: Tensor nodes with named axes, and their lowering to nest's positional
C ops through a Builder (one nest_function).

A Tensor is an op over other tensors, with axes and an element type. Each op has one lowering
(LOWER[op]) that emits nest ops for it: aligning its operands' axes by name with reshape (an
axis order) and broadcast, then the positional op. The same lowering runs twice: once when the
tensor is made, on a throwaway function whose parameters stand for the operands, so that the C
library checks the op and infers its type at construction (its message is the error); and
again when a computation is compiled.
"""
import ctypes
import numbers

import numpy as np

from . import _capi
from ._capi import NONE, NestError, lib
from .axes import Axes, AxisError, Symbolic, as_axes, length_text

LOWER = {}


def lowering(*ops):
    """Registers a function (builder, node, operand values) -> nest value for ops."""
    def register(fn):
        for op in ops:
            LOWER[op] = fn
        return fn
    return register


# Kinds of leaves (seeds/000's table) and of state tensors.
PLACEHOLDER, CONSTANT, VARIABLE, PERSISTENT = "placeholder", "constant", "variable", "persistent"
STATE_KINDS = (VARIABLE, PERSISTENT)


def dtype_of(dtype):
    """A numpy dtype nest supports (float32, float64, int32, int64, bool), or TypeError."""
    try:
        d = np.dtype(dtype)
    except TypeError:
        raise TypeError("%r is not a dtype" % (dtype,)) from None
    if d not in _capi.CODES:
        raise TypeError("nest has no element type for %s (float32, float64, int32, int64, bool)"
                        % d)
    return d


class Tensor:
    """A tensor of the graph: `axes` (named), `dtype`, `op` and its operands `args`.

    Operators: + - * / ** and unary -, abs(), < <= > >= (bool results; == and != stay Python's
    identity comparisons so that tensors can be dict keys: use ng.equal, ng.not_equal), and
    x[...] slices by position or {axis: slice} by axis. Python scalars take the tensor's type.
    """
    __slots__ = ("op", "args", "attrs", "axes", "dtype", "name", "value", "__weakref__")
    __array_ufunc__ = None  # numpy defers to these operators: np.float32(2) * x is a Tensor

    def __init__(self, op, args, axes, dtype, attrs=None, name=None, value=None):
        self.op = op
        self.args = tuple(args)
        self.attrs = attrs or {}
        self.axes = axes
        self.dtype = dtype
        self.name = name
        self.value = value

    def named(self, name):
        """Names the tensor (in messages and, when it is an identifier, in the generated C);
        returns the tensor."""
        if not isinstance(name, str):
            raise TypeError("a tensor name is a string, not %r" % (name,))
        self.name = name
        return self

    @property
    def shape(self):
        """The lengths of the axes, in order."""
        return self.axes.lengths

    @property
    def kind(self):
        return self.op if self.op in (PLACEHOLDER, CONSTANT, VARIABLE, PERSISTENT) else "op"

    def __repr__(self):
        return "<%s %s(%s) %s>" % (self.op, self.name or "", ", ".join(map(str, self.axes)),
                                   self.dtype)

    def describe(self):
        """'x: float32 (N=3, H=4)', for messages."""
        return "%s%s (%s)" % (self.name + ": " if self.name else self.op + " ", self.dtype,
                              ", ".join(map(str, self.axes)))

    def __bool__(self):
        raise TypeError("the truth value of a graph tensor is not known until it runs "
                        "(compare with ng.equal and run a computation)")

    def __len__(self):
        raise TypeError("a tensor has no len(): use x.axes or x.shape")

    # operators: defined in ops.py, installed by it (they build op nodes)


def as_tensor(x, like=None):
    """x if it is a Tensor; a Python or numpy scalar becomes a scalar constant of like's type
    (float32 without one). Arrays need their axes: ng.constant(array, axes)."""
    if isinstance(x, Tensor):
        return x
    if isinstance(x, np.ndarray) and x.ndim > 0:
        raise TypeError("a numpy array in a graph needs axes: ng.constant(array, axes)")
    if isinstance(x, (numbers.Number, np.generic, np.ndarray)):
        dtype = like.dtype if like is not None else None
        return constant_node(x, Axes(), dtype)
    raise TypeError("%r is not a tensor or a scalar" % (x,))


def constant_node(value, axes, dtype=None):
    axes = as_axes(axes)
    for a in axes:
        if a.symbolic:
            raise AxisError("constant: axis %s is symbolic, and a constant has fixed lengths (a "
                            "scalar meets a tensor with symbolic axes by itself: x * 2)" % a)
    if dtype is None:
        v = np.asarray(value)
        dtype = v.dtype if v.dtype.kind in "bi" and v.dtype in _capi.CODES else np.float32
    dtype = dtype_of(dtype)
    if isinstance(value, (bool, np.bool_)) != (dtype.kind == "b") and np.ndim(value) == 0:
        raise TypeError("the scalar %r cannot be a %s constant" % (value, dtype))
    if dtype.kind in "iu" and np.ndim(value) == 0 and not float(value).is_integer():
        raise TypeError("the scalar %r cannot be a %s constant (convert the tensor: "
                        "ng.convert(x, np.float32))" % (value, dtype))
    arr = np.asarray(value)
    if arr.shape != axes.lengths:
        if arr.ndim != 0:
            raise AxisError("constant: the value has shape %s and the axes (%s) have lengths "
                            "%s" % (arr.shape, ", ".join(map(str, axes)), axes.lengths))
        arr = np.broadcast_to(arr, axes.lengths)
    with np.errstate(all="ignore"):
        arr = np.array(arr, dtype=dtype, order="C")  # a copy (ascontiguousarray makes 0-d 1-d)
    return Tensor(CONSTANT, (), axes, dtype, value=arr)


def make(op, args, axes, attrs=None):
    """A new op node; the C library checks it (and gives its type) by lowering it once."""
    node = Tensor(op, args, axes, None, attrs)
    node.dtype = check_node(node)
    return node


def check_node(node):
    b = Builder("check")
    try:
        vals = []
        for i, a in enumerate(node.args):
            vals.append(b.parameter(b.unique(a.name, "xyzw"[i] if i < 4 else "x%d" % i),
                                    a.dtype, a.axes.lengths))
        v = LOWER[node.op](b, node, vals)
        shape = b.shape(v)
        if shape != node.axes.lengths:  # the front end's axes and the library disagree
            raise AssertionError("%s: axes (%s) but the library made shape %s"
                                 % (node.op, ", ".join(map(str, node.axes)), shape))
        return b.dtype(v)
    finally:
        b.free()


def module_error(m):
    msg = lib.nest_module_errmsg(m)
    return NestError(msg.decode("utf-8", "replace") if msg else "error",
                     lib.nest_module_errcode(m))


def valid_name(name):
    """Whether the C library takes `name` for a function, parameter or state tensor (an
    identifier that is no C keyword, does not start with nest_, ...): it is asked."""
    if not (isinstance(name, str) and name.isidentifier() and name.isascii()
            and len(name) <= 64):
        return False
    f = lib.nest_function_new(name.encode())
    if not f:
        raise MemoryError("nest_function_new")
    ok = lib.nest_errcode(f) == 0
    lib.nest_function_free(f)
    return ok


class Builder:
    """One nest_function being built, on its own or in a module (nest_module_new, which the
    builder then owns: a function that reads or assigns state); every failing call raises
    NestError with the library's message."""

    def __init__(self, name, module=None):
        self.m = module
        self._names = set()
        self.memo = {}
        self.grads = {}         # loss node -> (the tuple of nest_grad, {wrt node: index})
        self.deriv_groups = {}  # loss node -> every wrt node it is derived for, in order
        self.shared = {}        # values that several nodes share (a topk's tuple), by key
        self.dims = {}          # Symbolic -> its dim in fn (nest_named_dim), and back
        self.dim_lengths = {}
        if module is not None:
            self.fn = lib.nest_module_add_function(module, name.encode())
            if not self.fn:
                err = module_error(module)
                self.free()
                raise err
        else:
            self.fn = lib.nest_function_new(name.encode())
            if not self.fn:
                raise MemoryError("nest_function_new")
        if lib.nest_errcode(self.fn):
            err = self.error()
            self.free()
            raise err

    @classmethod
    def adopt(cls, fn):
        """A builder over a function made elsewhere (it takes the function over)."""
        b = cls.__new__(cls)
        b.fn, b.m = fn, None
        b._names, b.memo, b.grads, b.deriv_groups, b.shared = set(), {}, {}, {}, {}
        b.dims, b.dim_lengths = {}, {}
        return b

    def free(self):
        if self.m is not None:
            lib.nest_module_free(self.m)  # frees its function too
        else:
            lib.nest_function_free(self.fn)
        self.fn = self.m = None

    def reserve(self, name):
        """Takes a name (a state tensor's) so that no parameter or value gets it."""
        self._names.add(name)

    def name(self):
        return lib.nest_function_name(self.fn).decode()

    def value_name(self, v):
        n = lib.nest_value_name(self.fn, v)
        return n.decode() if n else None

    def error(self):
        msg = lib.nest_errmsg(self.fn)
        return NestError(msg.decode("utf-8", "replace") if msg else "error",
                         lib.nest_errcode(self.fn))

    def check(self, v):
        if v < 0:
            raise self.error()
        return v

    def unique(self, name, fallback):
        """A parameter or state name: `name` if it is a plain identifier not yet taken, else
        fallback (made unique)."""
        ok = (isinstance(name, str) and name.isidentifier() and name.isascii()
              and not name.startswith(("nest_", "__")) and len(name) <= 64)
        base = name if ok else fallback
        cand, i = base, 1
        while cand in self._names:
            i += 1
            cand = "%s_%d" % (base, i)
        self._names.add(cand)
        return cand

    def c_shape(self, lengths):
        """The lengths as the C library's shape: a Symbolic becomes its named dim in fn."""
        out = []
        for n in lengths:
            if isinstance(n, Symbolic):
                d = self.dims.get(n)
                if d is None:
                    d = lib.nest_named_dim(self.fn, n.name.encode())
                    if d == _capi.DIM_NONE:
                        raise self.error()
                    self.dims[n], self.dim_lengths[d] = d, n
                n = d
            out.append(n)
        return _capi.int64s(out)

    def parameter(self, name, dtype, shape):
        v = lib.nest_parameter(self.fn, name.encode(), _capi.CODES[dtype], len(shape),
                               self.c_shape(shape), _capi.ROW_MAJOR)
        if v < 0 and lib.nest_errcode(self.fn) == _capi.ERR_ARG:  # a C keyword, a reserved name
            lib.nest_clear_error(self.fn)
            return self.parameter(self.unique(None, "p"), dtype, shape)
        return self.check(v)

    def set_name(self, v, name):
        """Names a value in the generated C when the name is a free identifier; else nothing."""
        if name and name not in self._names and name.isidentifier() and name.isascii():
            if lib.nest_set_name(self.fn, v, name.encode()) == 0:
                self._names.add(name)
            else:
                lib.nest_clear_error(self.fn)

    def dtype(self, v):
        return _capi.DTYPES[lib.nest_value_type(self.fn, v)]

    def shape(self, v):
        """The shape of v: ints, and the Symbolic of each named dim (another dim expression
        stays the C library's negative number)."""
        rank = lib.nest_value_rank(self.fn, v)
        p = lib.nest_value_shape(self.fn, v)
        return tuple(self.dim_lengths.get(p[i], p[i]) for i in range(rank))

    def constant(self, arr):
        arr = np.require(arr, requirements="C")
        return self.check(lib.nest_constant(self.fn, _capi.CODES[arr.dtype], arr.ndim,
                                            _capi.int64s(arr.shape),
                                            arr.ctypes.data_as(ctypes.c_void_p), arr.size))

    def scalar(self, value, dtype):
        return self.constant(np.asarray(value, dtype=dtype))

    def op(self, name, *vals):
        return self.check(getattr(lib, "nest_" + name)(self.fn, *vals))

    def convert(self, v, dtype):
        return self.check(lib.nest_convert(self.fn, v, _capi.CODES[dtype]))

    def reshape(self, v, shape, order=None):
        return self.check(lib.nest_reshape(self.fn, v, _capi.int64s(order) if order else None,
                                           len(shape), self.c_shape(shape)))

    def broadcast(self, v, shape, new_axes):
        return self.check(lib.nest_broadcast(self.fn, v, len(shape), self.c_shape(shape),
                                             len(new_axes), _capi.int64s(new_axes)))

    def reduce(self, kind, v, positions):
        return self.check(getattr(lib, "nest_" + kind)(self.fn, v, len(positions),
                                                       _capi.int64s(positions)))

    def slice(self, v, lower, upper, strides):
        return self.check(lib.nest_slice(self.fn, v, _capi.int64s(lower), self.c_shape(upper),
                                         _capi.int64s(strides)))

    def concat(self, vals, position):
        arr = (ctypes.c_int32 * len(vals))(*vals)
        return self.check(lib.nest_concat(self.fn, len(vals), arr, position))

    def reorder(self, v, src, dst):
        """v with axes src laid out in the order of dst (the same axes)."""
        order = [src.index(a) for a in dst]
        if order == list(range(len(order))):
            return v
        return self.reshape(v, [a.length for a in dst], order)

    def align(self, v, src, dst):
        """v with axes src (a subset of dst) transposed and broadcast to the axes dst."""
        kept = Axes(a for a in dst if a.name in src.names)
        v = self.reorder(v, src, kept)
        if len(kept) == len(dst):
            return v
        new = [i for i, a in enumerate(dst) if a.name not in src.names]
        return self.broadcast(v, dst.lengths, new)

    def lower(self, roots, bound):
        """The values of roots, lowering what they depend on once each (iteratively: graphs may
        be deeper than Python's recursion limit). `bound` maps leaves to their values."""
        memo = self.memo
        memo.update(bound)
        stack = [(r, False) for r in reversed(roots)]
        while stack:
            node, ready = stack.pop()
            if node in memo:
                continue
            if ready:
                v = LOWER[node.op](self, node, [memo[a] for a in node.args])
                self.set_name(v, node.name)
                memo[node] = v
                continue
            if node.op in (PLACEHOLDER, VARIABLE, PERSISTENT):
                raise ValueError("%s is used but is not an argument of the computation"
                                 % node.describe())
            stack.append((node, True))
            stack.extend((a, False) for a in reversed(node.args) if a not in memo)
        return [memo[r] for r in roots]


@lowering(CONSTANT)
def _lower_constant(b, node, vals):
    return b.constant(node.value)


def resolve(x, names, what):
    """The axes of x named by `names` (Axis objects or names), in the given order."""
    out = []
    for n in as_axis_list(names):
        a = x.axes.find(n)
        if a is None:
            raise AxisError("%s: %s is not an axis of %s" % (what, n, x.describe()))
        if not isinstance(n, str) and n.length != a.length:
            raise AxisError("%s: axis %r and axis %r of %s share a name but not a length"
                            % (what, n, a, x.describe()))
        out.append(a)
    return Axes(out)


def as_axis_list(names):
    if names is None:
        return []
    if isinstance(names, (str, Axes)) or not hasattr(names, "__iter__"):
        names = [names] if not isinstance(names, Axes) else list(names)
    return list(names)


def union_axes(tensors, what):
    """The axes of an element-wise result: the first operand's, then each other operand's
    new ones, in order; a name with two lengths is an AxisError naming both."""
    seen = {}
    for t in tensors:
        for a in t.axes:
            prev = seen.get(a.name)
            if prev is None:
                seen[a.name] = (a, t)
            elif prev[0].length != a.length:
                raise AxisError("%s: axis %s has %s in %s and %s in %s"
                                % (what, a.name, length_text(prev[0].length),
                                   prev[1].describe(), length_text(a.length), t.describe()))
    return Axes(a for a, _ in seen.values())
