"""ng.computation: a graph lowered to one nest function, compiled once in process, called with
numpy arrays.

The function's parameters are the placeholders, in the order given; its results the requested
tensors. A computation that reads or assigns state is a function of a module (nest_module)
declaring the state tensors it uses, called with a state object over their arrays
(nest_state_wrap, nest_call_state). A call checks each argument's type, shape and layout,
allocates the results and calls the kernel through arrays of pointers prepared once.
"""
import ctypes
import os
import threading

import numpy as np

from . import _capi
from ._capi import NestError, lib
from .axes import Axes, Axis, Symbolic
from .graph import PLACEHOLDER, STATE_KINDS, Builder, Tensor
from .state import Declared


_from_buffer = ctypes.c_char.from_buffer
_addressof = ctypes.addressof


def _address(a):
    """The address of a numpy array's first element: through the buffer protocol (a third of
    the cost of a.ctypes.data), or the array interface for read-only and empty arrays."""
    try:
        return _addressof(_from_buffer(a))
    except (TypeError, ValueError):
        return a.__array_interface__["data"][0]


def _graph(roots):
    """Every node the roots depend on, each once, in a deterministic order."""
    seen, order, stack = set(), [], list(reversed(roots))
    while stack:
        n = stack.pop()
        if id(n) in seen:
            continue
        seen.add(id(n))
        order.append(n)
        stack.extend(reversed(n.args))
    return order


class Computation:
    """A compiled computation: call it with one numpy array per placeholder (in the order
    given to ng.computation); it returns a numpy array, or a list of them when results was a
    list (None in the place of an ng.assign)."""

    def __init__(self, results, *placeholders, name="computation", opt_level=3, march=None,
                 fuse=True, openmp=True, cache=True, flush_denormals=None):
        self._single = isinstance(results, Tensor)
        results = [results] if self._single else list(results)
        for r in results:
            if not isinstance(r, Tensor):
                raise TypeError("computation: the results must be tensors, not %r" % (r,))
        for p in placeholders:
            if not isinstance(p, Tensor) or p.op != PLACEHOLDER:
                raise TypeError("computation: %r is not a placeholder" % (p,))
        if len(set(map(id, placeholders))) != len(placeholders):
            raise ValueError("computation: a placeholder is given twice")
        self._setup(name, _capi.options(opt_level, march, None, fuse, openmp, cache,
                                              flush_denormals))

        nodes = _graph(results)
        given = set(map(id, placeholders))
        for n in nodes:
            if n.op == PLACEHOLDER and id(n) not in given:
                raise ValueError("computation: %s is used but not given as a placeholder "
                                 "argument" % n.describe())
        assigns = [r for r in results if r.op == "assign"]
        targets = [a.args[0] for a in assigns]
        if len(set(map(id, targets))) != len(targets):
            twice = next(t for t in targets if sum(t is u for u in targets) > 1)
            raise ValueError("computation: %s is assigned twice" % twice.describe())
        self._state = [n for n in nodes if n.op in STATE_KINDS]
        self.placeholders = tuple(placeholders)
        # symbolic axes: each length is taken from the first placeholder that has it
        self._dim_from = {}
        for i, p in enumerate(self.placeholders):
            for k, a in enumerate(p.axes):
                if a.symbolic:
                    self._dim_from.setdefault(a.length, (i, k))
        for n in nodes:
            for a in n.axes:
                if a.symbolic and a.length not in self._dim_from:
                    raise ValueError("computation: axis %s of %s is symbolic and no placeholder "
                                     "has it: its length could not be taken from the arguments"
                                     % (a, n.describe()))
        self._build(results, assigns, nodes)
        self._compile()

    def _setup(self, name, options):
        self.name = name
        self._options = options
        self._k = None
        self._b = None
        self._decl = None
        self._st = None
        self._dims = ()  # the C function's dims, in the order of its ABI (Symbolic lengths)

    @classmethod
    def of_function(cls, builder, options):
        """A computation of a nest function made elsewhere (an ONNX import): its parameters
        are the placeholders (axes named PARAM_0, PARAM_1, ...), its results the results.
        Takes the builder over."""
        self = cls.__new__(cls)
        self._setup(builder.name(), options)
        self._b = builder
        phs = []
        for i in range(lib.nest_param_count(builder.fn)):
            v = lib.nest_param(builder.fn, i)
            pname = builder.value_name(v) or "arg%d" % i
            axes = [Axis(n, "%s_%d" % (pname, k)) for k, n in enumerate(builder.shape(v))]
            phs.append(Tensor(PLACEHOLDER, (), Axes(axes), builder.dtype(v), name=pname))
        self.placeholders = tuple(phs)
        self._state = []
        self._dim_from = {}
        outs = [lib.nest_result(builder.fn, i) for i in range(lib.nest_result_count(builder.fn))]
        self._outs = [(builder.shape(v), builder.dtype(v)) for v in outs]
        self._slots = list(range(len(outs)))
        self._single = len(outs) == 1
        self._compile()
        return self

    # ---- building and compiling

    def _build(self, results, assigns, nodes):
        if self._state:
            self._decl = Declared.declare(self.name, self._state)
            self._b = b = self._decl.builder
            bound = self._decl.reads()
        else:
            self._b = b = Builder(self.name)
            bound = {}
        for i, p in enumerate(self.placeholders):
            bound[p] = b.parameter(b.unique(p.name, "arg%d" % i), p.dtype, p.axes.lengths)
        for n in nodes:  # the derivatives of each loss, for one nest_grad
            if n.op == "deriv":
                group = b.deriv_groups.setdefault(n.args[0], [])
                if n.args[1] not in group:
                    group.append(n.args[1])
        outs = [r for r in results if r.op != "assign"]
        vals = b.lower(outs + [a.args[1] for a in assigns], bound)
        for k, a in enumerate(assigns):
            target, value = a.args
            v = b.align(vals[len(outs) + k], value.axes, target.axes)
            if lib.nest_assign(b.fn, bound[target], v) != 0:
                raise b.error()
        vals = vals[:len(outs)]
        arr = (ctypes.c_int32 * max(len(vals), 1))(*vals)
        if lib.nest_return(b.fn, len(vals), arr, None) != 0:
            raise b.error()
        # where each requested result lands: an index among the outputs, or None (an assign)
        slots, k = [], 0
        for r in results:
            slots.append(None if r.op == "assign" else k)
            k += r.op != "assign"
        self._slots = slots
        self._outs = [(tuple(r.axes.lengths), r.dtype) for r in outs]

    def _compile(self):
        b = self._b
        k = lib.nest_compile(b.fn, ctypes.byref(self._options))
        if not k:
            raise b.error()
        self._k = ctypes.c_void_p(k)
        if self._decl is not None:
            self._st = self._decl.wrap()
            self._locks = self._decl.locks
        self._nargs, self._nres = len(self.placeholders), len(self._outs)
        self._argv, self._resv = self._pointer_arrays()
        self._tls = threading.local()
        # (dtype, shape, alignment mask) of each argument
        self._specs = [(p.dtype, tuple(p.axes.lengths), p.dtype.alignment - 1)
                       for p in self.placeholders]
        ndims = lib.nest_dim_count(b.fn)
        if ndims:
            names = [lib.nest_dim_name(b.fn, i).decode() for i in range(ndims)]
            self._dims = tuple(Symbolic(n) for n in names)
            missing = [d for d in self._dims if d not in self._dim_from]
            if missing:  # a front end bug: every dim comes from a placeholder's axis
                raise AssertionError("computation %s: dims %s have no placeholder"
                                     % (self.name, missing))

    def __del__(self):
        if getattr(self, "_k", None):
            lib.nest_kernel_free(self._k)
            self._k = None
        if getattr(self, "_decl", None) is not None:
            self._decl.free()
        if getattr(self, "_b", None):
            self._b.free()
            self._b = None

    # ---- calling

    def _argument(self, i, a):
        """The array for placeholder i, or TypeError / ValueError saying what is wrong."""
        dtype, shape, _ = self._specs[i]
        p = self.placeholders[i]
        what = "%s: argument %d (%s)" % (self.name, i + 1, p.describe())
        if not isinstance(a, np.ndarray):
            if shape == () and isinstance(a, (int, float, bool, np.generic)):
                return np.asarray(a, dtype)
            raise TypeError("%s: expected a numpy array, got %s" % (what, type(a).__name__))
        if a.dtype != dtype:
            raise TypeError("%s: expected %s elements, got %s (convert with .astype(np.%s))"
                            % (what, dtype, a.dtype, dtype))
        if a.shape != shape and (len(a.shape) != len(shape) or any(
                n != m for n, m in zip(a.shape, shape) if not isinstance(m, Symbolic))):
            raise ValueError("%s: expected shape %s, got %s" % (what, shape, a.shape))
        if not a.flags.c_contiguous:
            raise ValueError("%s: the array is not contiguous in row-major order (pass "
                             "np.ascontiguousarray(x))" % what)
        if not a.flags.aligned:
            raise ValueError("%s: the array is not aligned for %s" % (what, dtype))
        return a

    def __call__(self, *args):
        specs = self._specs
        if self._dims:
            return self._call_dims(args)
        if len(args) != len(specs):
            raise self._arity_error(len(args))
        ptrs, keep = [], []  # keep: converted arguments, alive until the call returns
        for i, a in enumerate(args):
            dtype, shape, mask = specs[i]
            if (type(a) is np.ndarray and a.dtype is dtype and a.shape == shape
                    and a.flags.c_contiguous):
                p = _address(a)
                if not p & mask:  # aligned
                    ptrs.append(p)
                    continue
            a = self._argument(i, a)  # converts a scalar, or says what is wrong
            keep.append(a)
            ptrs.append(_address(a))
        outs = [np.empty(shape, dtype) for shape, dtype in self._outs]
        rptrs = [_address(o) for o in outs]
        if self._st:  # calls that share a state tensor take turns, each on its pointer arrays
            with self._locks:
                self._run(self._argv, self._resv, ptrs, rptrs)
        else:  # calls from several threads run at once, each with its own pointer arrays
            argv, resv = self._thread_arrays()
            self._run(argv, resv, ptrs, rptrs)
        return self._pick(outs)

    def _arity_error(self, given):
        n = len(self._specs)
        return TypeError("%s takes %d argument%s (%s), given %d"
                         % (self.name, n, "" if n == 1 else "s",
                            ", ".join(p.describe() for p in self.placeholders), given))

    def _thread_arrays(self):
        """The calling thread's pointer arrays of arguments and results."""
        try:
            return self._tls.arrays
        except AttributeError:
            self._tls.arrays = self._pointer_arrays()
            return self._tls.arrays

    def _raise_call_error(self, rc):
        msg = lib.nest_kernel_errmsg(self._k)
        raise NestError(msg.decode("utf-8", "replace") if msg else "call failed", rc)

    def _sizes(self, arrays):
        """{Symbolic: its length} from the arguments (checked: ValueError when two arguments
        give one symbolic axis two lengths)."""
        sizes = {}
        for i, (a, p) in enumerate(zip(arrays, self.placeholders)):
            for k, ax in enumerate(p.axes):
                if ax.symbolic:
                    n = a.shape[k]
                    first = sizes.setdefault(ax.length, (n, i))
                    if first[0] != n:
                        j = first[1]
                        raise ValueError(
                            "%s: symbolic axis %s has length %d in argument %d (%s) and %d in "
                            "argument %d (%s)" % (self.name, ax.length, first[0], j + 1,
                                                  self.placeholders[j].describe(), n, i + 1,
                                                  p.describe()))
        return {d: n for d, (n, _) in sizes.items()}

    def _result_arrays(self, sizes):
        return [np.empty(tuple(sizes[n] if isinstance(n, Symbolic) else n for n in shape), dtype)
                for shape, dtype in self._outs]

    def _call_dims(self, args):
        """A call of a computation with symbolic axes: their lengths from the arrays."""
        if len(args) != len(self._specs):
            raise self._arity_error(len(args))
        arrays = [self._argument(i, a) for i, a in enumerate(args)]
        sizes = self._sizes(arrays)
        dims = (ctypes.c_int64 * len(self._dims))(*[sizes[d] for d in self._dims])
        outs = self._result_arrays(sizes)
        argv, resv = self._thread_arrays()
        argv[:len(arrays)] = [_address(a) for a in arrays]
        resv[:len(outs)] = [_address(o) for o in outs]
        if self._st:  # calls that share a state tensor take turns
            with self._locks:
                rc = lib.nest_call_state_dims(self._k, self._st, dims, len(self._dims), argv,
                                              self._nargs, resv, self._nres)
        else:
            rc = lib.nest_call_dims(self._k, dims, len(self._dims), argv, self._nargs, resv,
                                    self._nres)
        if rc != 0:
            self._raise_call_error(rc)
        return self._pick(outs)

    def _pointer_arrays(self):
        return (ctypes.c_void_p * max(self._nargs, 1))(), (ctypes.c_void_p * max(self._nres, 1))()

    def _run(self, argv, resv, ptrs, rptrs):
        argv[:len(ptrs)] = ptrs
        resv[:len(rptrs)] = rptrs
        if self._st:
            rc = lib.nest_call_state(self._k, self._st, argv, self._nargs, resv, self._nres)
        else:
            rc = lib.nest_call(self._k, argv, self._nargs, resv, self._nres)
        if rc != 0:
            self._raise_call_error(rc)

    def _pick(self, outs):
        if self._single:
            k = self._slots[0]
            return None if k is None else outs[k]
        return [None if k is None else outs[k] for k in self._slots]

    # ---- inspection, state, ahead of time

    @property
    def compile_ms(self):
        return lib.nest_kernel_compile_ms(self._k)

    @property
    def cache_hit(self):
        return bool(lib.nest_kernel_cache_hit(self._k))

    @property
    def workspace_size(self):
        return lib.nest_kernel_workspace_size(self._k)

    def _emit(self, kind):
        fns = (ctypes.c_void_p * 1)(self._b.fn)
        s = _capi.take_string(lib.nest_emit(fns, 1, kind, ctypes.byref(self._options)))
        if s is None:
            raise self._b.error()
        return s

    def c_source(self):
        """The generated C, as nest_build_so would compile it (self-contained C99)."""
        return self._emit(0)

    def c_header(self):
        """The header declaring the entry points of the generated C."""
        return self._emit(1)

    def ir(self):
        """The nest function in the canonical text form (.nest); with its module's state
        declarations when it has state."""
        if self._b.m is not None:
            s = _capi.take_string(lib.nest_module_print(self._b.m))
        else:
            fns = (ctypes.c_void_p * 1)(self._b.fn)
            s = _capi.take_string(lib.nest_print(fns, 1))
        if s is None:
            raise self._b.error()
        return s

    def save(self, path, cc=None):
        """Compiles the computation ahead of time: PATH.so (PATH is given with or without
        .so) and its header PATH.h, exporting NAME and NAME_call (nest's ABI, see nest.h).
        With state, NAME and NAME_call take a NAME_state first, and the .so exports
        NAME_state_new, NAME_state_load (which reads what save_state writes) and the rest of
        docs/api.md's state functions. Returns (so_path, h_path)."""
        path = os.fspath(path)
        stem = path[:-3] if path.endswith(".so") else path
        so_path, h_path = stem + ".so", stem + ".h"
        opts = _capi.options(self._options.opt_level,
                             self._options.march.decode() if self._options.march else None, cc,
                             self._options.fuse, self._options.openmp, self._options.cache)
        opts.flush_denormals = self._options.flush_denormals
        fns = (ctypes.c_void_p * 1)(self._b.fn)
        if lib.nest_build_so(fns, 1, so_path.encode(), h_path.encode(), ctypes.byref(opts),
                             None) != 0:
            raise self._b.error()
        return so_path, h_path

    def evaluate(self, *args):
        """The results by nest's reference interpreter (slow). With state, as a call: reads
        see the state, assignments change it."""
        if len(args) != len(self._specs):
            raise TypeError("%s takes %d arguments, given %d"
                            % (self.name, len(self._specs), len(args)))
        arrays = [self._argument(i, a) for i, a in enumerate(args)]
        sizes = self._sizes(arrays)
        outs = self._result_arrays(sizes)
        argv = (ctypes.c_void_p * max(len(arrays), 1))(*map(_address, arrays))
        resv = (ctypes.c_void_p * max(len(outs), 1))(*map(_address, outs))
        if self._dims and self._st:
            dims = (ctypes.c_int64 * len(self._dims))(*[sizes[d] for d in self._dims])
            with self._locks:
                rc = lib.nest_evaluate_state_dims(self._b.fn, self._st, dims, len(self._dims),
                                                  argv, len(arrays), resv, len(outs))
        elif self._dims:
            dims = (ctypes.c_int64 * len(self._dims))(*[sizes[d] for d in self._dims])
            rc = lib.nest_evaluate_dims(self._b.fn, dims, len(self._dims), argv, len(arrays),
                                        resv, len(outs))
        elif self._st:
            with self._locks:
                rc = lib.nest_evaluate_state(self._b.fn, self._st, argv, len(arrays), resv,
                                             len(outs))
        else:
            rc = lib.nest_evaluate(self._b.fn, argv, len(arrays), resv, len(outs))
        if rc:
            raise self._b.error()
        return self._pick(outs)

    @property
    def state(self):
        """{name: a copy of the value} of the state tensors the computation uses, under their
        names in its module (the tensor's name, or state0, state1... for one without a
        usable name)."""
        if self._decl is None:
            return {}
        with self._locks:
            return {n: t.value.array.copy() for n, t in self.state_tensors.items()}

    @property
    def state_tensors(self):
        """{name: tensor} of the state tensors the computation uses."""
        if self._decl is None:
            return {}
        return dict(zip(self._decl.names, self._decl.tensors))

    def _need_state(self, what):
        if self._decl is None:
            raise ValueError("%s: computation %s has no state" % (what, self.name))

    def save_state(self, path):
        """Writes the values of the computation's state tensors to a state file (nest's format,
        docs/api.md: what NAME_state_load of a .so from save() reads)."""
        self._need_state("save_state")
        self._decl.save(os.fsencode(path))

    def load_state(self, path):
        """Reads a state file of the same state tensors (names, types and shapes), written by
        save_state, a .so's NAME_state_save or nestc. The file is checked whole first: on any
        error nothing changes (NestError with the reason)."""
        self._need_state("load_state")
        self._decl.load(os.fsencode(path))


def computation(results, *placeholders, **options):
    """Compiles results (a tensor, or a list of tensors and ng.assign's) as a function of the
    placeholders, in order. Options: name= (the C function's name), opt_level=, march=,
    fuse=, openmp=, cache=, flush_denormals= (True: denormal floats read and written as zero
    during a call; False: IEEE; None, the default: flushed when the function assigns state)."""
    return Computation(results, *placeholders, **options)
