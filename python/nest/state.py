"""State and training: variables (trainable) and persistent tensors keep their values across
calls, ng.assign gives them new ones, ng.deriv differentiates through the C library's
reverse mode (nest_grad).

A state tensor's value is one numpy array, shared by every computation that reads or assigns
it (a training step and a prediction see the same weights): each computation's module declares
the state tensors it uses, and its state object (nest_state_wrap) is made of those arrays, read
and written in place by the kernel. In a call, reads see the values of the call's entry and
assignments take effect when it returns (nest.h's semantics).
"""
import ctypes
import itertools
import numbers
import threading

import numpy as np

from . import _capi
from ._capi import NestError, lib
from .axes import AxisError, as_axes
from .graph import (PERSISTENT, PLACEHOLDER, STATE_KINDS, VARIABLE, Builder, Tensor, as_tensor,
                    dtype_of, lowering, make, module_error, valid_name)

# Each state tensor has a lock; a call takes the locks of the tensors its computation uses, in
# the order of their creation (the same order everywhere: no deadlock). Calls that share a
# tensor take turns, calls on distinct tensors run at once.
_serial = itertools.count()


def state_locks(tensors):
    """The locks of some state tensors as one context manager, taken in creation order: the
    tensor's own lock when there is one tensor (the cheapest), else a StateLocks."""
    values = sorted({id(t.value): t.value for t in tensors}.values(), key=lambda v: v.order)
    return values[0].lock if len(values) == 1 else StateLocks(tuple(v.lock for v in values))


class StateLocks:
    """Several locks as one context manager, taken in the order given (their bound methods
    kept: a call with state takes them all)."""
    __slots__ = ("acquires", "releases")

    def __init__(self, locks):
        self.acquires = tuple(lock.acquire for lock in locks)
        self.releases = tuple(lock.release for lock in reversed(locks))

    def __enter__(self):
        got = 0
        try:
            for acquire in self.acquires:
                acquire()
                got += 1
        except BaseException:  # interrupted while waiting: give back what was taken
            for release in self.releases[len(self.releases) - got:]:
                release()
            raise
        return self

    def __exit__(self, *exc):
        for release in self.releases:
            release()


class Initializer:
    """How a state tensor starts, by nest's generator (the same values in Python, in the C
    library and in a .so's NAME_state_new): ng.uniform(low, high, seed=) or
    ng.normal(mean, std, seed=)."""
    __slots__ = ("kind", "a", "b", "seed")

    def __init__(self, kind, a, b, seed):
        if isinstance(seed, bool) or not isinstance(seed, numbers.Integral) or \
                not 0 <= seed < 1 << 64:
            raise ValueError("the seed must be an integer in [0, 2**64), not %r" % (seed,))
        self.kind, self.a, self.b, self.seed = kind, float(a), float(b), int(seed)

    def c_init(self):
        return _capi.Init(self.kind, self.a, self.b, self.seed)

    def __repr__(self):
        what = "uniform" if self.kind == _capi.INIT_UNIFORM else "normal"
        return "ng.%s(%r, %r, seed=%d)" % (what, self.a, self.b, self.seed)


def uniform(low=0.0, high=1.0, seed=0):
    """An initializer: uniform in [low, high), from seed (float types)."""
    return Initializer(_capi.INIT_UNIFORM, low, high, seed)


def normal(mean=0.0, std=1.0, seed=0):
    """An initializer: normal with mean and standard deviation std, from seed (float
    types)."""
    return Initializer(_capi.INIT_NORMAL, mean, std, seed)


class StateValue:
    """The storage of a state tensor: its array (fixed for the tensor's life: computations
    hold its address), the nest_init its declarations carry and, for an initial value given
    as an array, a copy of that array (initial: a .so's NAME_state_new starts from it); the
    lock that calls using the tensor hold, and its place in the order locks are taken in."""
    __slots__ = ("array", "addr", "init", "initial", "lock", "order")

    def __init__(self, array, init, initial=None):
        self.array = array
        self.addr = array.__array_interface__["data"][0]
        self.init = init
        self.initial = initial
        self.lock = threading.Lock()
        self.order = next(_serial)


def _generated(init, dtype, shape, name):
    """The values of init for a tensor (named in errors), by the C library's generator."""
    m = lib.nest_module_new(b"init")
    if not m:
        raise MemoryError("nest_module_new")
    try:
        cname = name if valid_name(name) else "value"
        if lib.nest_variable(m, cname.encode(), _capi.CODES[dtype], len(shape),
                             _capi.int64s(shape), ctypes.byref(init)) != 0:
            raise module_error(m)
        st = lib.nest_state_new(m)
        if not st:
            raise module_error(m)
        try:
            out = np.empty(shape, dtype)
            if out.nbytes:
                ctypes.memmove(out.ctypes.data, lib.nest_state_data(st, 0), out.nbytes)
            return out
        finally:
            lib.nest_state_free(st)
    finally:
        lib.nest_module_free(m)


def _state(kind, axes, dtype, initial_value, name):
    axes = as_axes(axes)
    for a in axes:
        if a.symbolic:
            raise AxisError("%s%s: axis %s is symbolic, and state tensors have fixed lengths"
                            % (kind, " " + name if name else "", a))
    dtype = dtype_of(dtype)
    if name is not None and not isinstance(name, str):
        raise TypeError("a tensor name is a string, not %r" % (name,))
    what = "%s %s" % (kind, name or "")
    if isinstance(initial_value, Initializer):
        init = initial_value.c_init()
        arr = _generated(init, dtype, axes.lengths, name)
    else:
        v = np.asarray(initial_value if initial_value is not None else 0)
        if v.ndim and v.shape != axes.lengths:
            raise AxisError("%s: the initial value has shape %s and the axes (%s) have lengths "
                            "%s" % (what, v.shape, ", ".join(map(str, axes)), axes.lengths))
        if v.dtype.kind not in "biuf":
            raise TypeError("%s: the initial value is not a number (%s)" % (what, v.dtype))
        arr = np.empty(axes.lengths, dtype)
        with np.errstate(all="ignore"):
            arr[...] = v
        if v.ndim:  # declared with the array itself (nest_variable_data)
            init = _capi.Init(_capi.INIT_DATA, 0, 0, 0)
            return Tensor(kind, (), axes, dtype, name=name,
                          value=StateValue(arr, init, arr.copy()))
        scalar = float(arr.flat[0]) if arr.size else 0.0
        init = _capi.Init(_capi.INIT_CONSTANT if scalar else _capi.INIT_ZEROS, scalar, 0, 0)
    return Tensor(kind, (), axes, dtype, name=name, value=StateValue(arr, init))


def variable(axes, dtype=np.float32, initial_value=0, name=None):
    """A trainable tensor kept across calls: initial_value is a scalar that fills it, an array
    of its shape (copied), or ng.uniform / ng.normal."""
    return _state(VARIABLE, axes, dtype, initial_value, name)


def persistent_tensor(axes, dtype=np.float32, initial_value=0, name=None):
    """A tensor kept across calls that is not trained (a momentum, a counter)."""
    return _state(PERSISTENT, axes, dtype, initial_value, name)


def _check_state(t, prefix=""):
    if not (isinstance(t, Tensor) and t.op in STATE_KINDS):
        raise TypeError("%s%r is not a variable or a persistent tensor" % (prefix, t))


def assign(tensor, value):
    """Gives a variable or persistent tensor a new value when the call returns (reads in the
    same call see the old one). value's axes must be among the tensor's; it is broadcast to
    them."""
    _check_state(tensor, "assign: ")
    value = as_tensor(value, tensor)
    extra = value.axes - tensor.axes
    if extra:
        raise AxisError("assign: the value %s has axes (%s) that %s lacks"
                        % (value.describe(), ", ".join(map(str, extra)), tensor.describe()))
    for a in value.axes:
        if tensor.axes.find(a.name).length != a.length:
            raise AxisError("assign: axis %s has length %s in the value and %s in %s"
                            % (a.name, a.length, tensor.axes.find(a.name).length,
                               tensor.describe()))
    if value.dtype != tensor.dtype:
        raise TypeError("assign: the value is %s and %s is %s (convert it: ng.convert)"
                        % (value.dtype, tensor.describe(), tensor.dtype))
    return Tensor("assign", (tensor, value), as_axes(()), None)


def deriv(loss, wrt):
    """d loss / d wrt: a tensor with wrt's axes (a list of them for a list of wrt). loss is a
    float scalar (no axes); wrt a variable or a float placeholder. All the derivatives of one
    loss in a computation come from one reverse pass of the C library (nest_grad), whose ops
    fuse and tile like any others; zeros where loss does not depend on wrt."""
    if isinstance(wrt, (list, tuple)):
        return [deriv(loss, w) for w in wrt]
    loss = as_tensor(loss)
    if len(loss.axes):
        raise AxisError("deriv: the loss must be a scalar, and %s has axes: reduce it first "
                        "(ng.sum, ng.mean)" % loss.describe())
    if not isinstance(wrt, Tensor) or wrt.op not in (VARIABLE, PLACEHOLDER):
        if isinstance(wrt, Tensor) and wrt.op == PERSISTENT:
            raise TypeError("deriv: %s is a persistent tensor, which is not trained (make it "
                            "an ng.variable)" % wrt.describe())
        raise TypeError("deriv: %r is not a variable or a placeholder" % (wrt,))
    return make("deriv", (loss, wrt), wrt.axes)


@lowering("deriv")
def _lower_deriv(b, node, vals):
    loss, wrt = node.args
    got = b.grads.get(loss)
    if got is None:  # one nest_grad for every derivative of this loss
        wrts = b.deriv_groups.get(loss) or [wrt]
        wv = [vals[1] if w is wrt else b.memo[w] for w in wrts]
        arr = (ctypes.c_int32 * len(wv))(*wv)
        t = b.check(lib.nest_grad(b.fn, vals[0], len(wv), arr))
        got = b.grads[loss] = (t, {w: i for i, w in enumerate(wrts)})
    t, index = got
    return b.check(lib.nest_get(b.fn, t, index[wrt]))


def value_of(tensor):
    """A copy of the current value of a variable or persistent tensor."""
    _check_state(tensor)
    with tensor.value.lock:
        return tensor.value.array.copy()


def set_value(tensor, value):
    """Sets a variable or persistent tensor (a numpy array of its shape, or a scalar)."""
    _check_state(tensor)
    v = np.asarray(value)
    if v.ndim and v.shape != tensor.axes.lengths:
        raise AxisError("set_value: %s takes shape %s, not %s"
                        % (tensor.describe(), tensor.axes.lengths, v.shape))
    with tensor.value.lock:
        np.copyto(tensor.value.array, v, casting="same_kind")


class Declared:
    """The module of a computation with state: its state tensors declared under C names, and
    the state object over their arrays (made once the function is built)."""

    def __init__(self, builder, tensors, names):
        self.tensors = tensors
        self.names = names
        self.builder = builder
        self.state = None
        self.locks = state_locks(tensors)

    @classmethod
    def declare(cls, name, tensors):
        """A module NAME declaring `tensors` (variables and persistent tensors, in order) and a
        builder of its function NAME; names: the tensors' names, or state0, state1..."""
        m = lib.nest_module_new(name.encode())
        if not m:
            raise MemoryError("nest_module_new")
        if lib.nest_module_errcode(m):
            err = module_error(m)
            lib.nest_module_free(m)
            raise err
        taken, names = {name}, []
        try:
            for i, t in enumerate(tensors):
                cname = t.name if t.name not in taken and valid_name(t.name) else None
                k = i
                while cname is None or cname in taken:
                    cname, k = "state%d" % k, k + 1
                taken.add(cname)
                names.append(cname)
                shape = _capi.int64s(t.axes.lengths)
                if t.value.initial is not None:
                    declare = (lib.nest_variable_data if t.op == VARIABLE
                               else lib.nest_persistent_data)
                    init = t.value.initial.__array_interface__["data"][0]
                else:
                    declare = lib.nest_variable if t.op == VARIABLE else lib.nest_persistent
                    init = ctypes.byref(t.value.init)
                if declare(m, cname.encode(), _capi.CODES[t.dtype], len(t.axes), shape,
                           init) != 0:
                    raise module_error(m)
        except BaseException:
            lib.nest_module_free(m)
            raise
        b = Builder(name, m)  # owns m from here (frees it on failure)
        for n in names:
            b.reserve(n)
        return cls(b, tensors, names)

    def reads(self):
        """{tensor: its nest_read value} in the builder's function."""
        return {t: self.builder.check(lib.nest_read(self.builder.fn, n.encode()))
                for t, n in zip(self.tensors, self.names)}

    def wrap(self):
        """The state object over the tensors' arrays."""
        m = self.builder.m
        data = (ctypes.c_void_p * max(len(self.tensors), 1))(
            *[t.value.addr for t in self.tensors])
        st = lib.nest_state_wrap(m, data)
        if not st:
            raise module_error(m)
        self.state = ctypes.c_void_p(st)
        return self.state

    def free(self):
        if self.state:
            lib.nest_state_free(self.state)
            self.state = None

    def save(self, path):
        self._file(lib.nest_state_save, path)

    def load(self, path):
        self._file(lib.nest_state_load, path)

    def _file(self, op, path):
        with self.locks:
            rc = op(self.state, path)
        if rc != 0:
            raise NestError(lib.nest_state_errmsg(self.state).decode("utf-8", "replace"), rc)
