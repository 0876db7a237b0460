"""The C library, libnest.so, through ctypes: finding it, the signatures of the calls the
front end makes, and NestError, the exception that carries the library's messages.

The library is looked for, in order:
  1. $NEST_LIBRARY, the path of a libnest.so (an explicit choice: nothing else is tried);
  2. the directory recorded by `make install` (nest/_install.py);
  3. the build tree this package sits in (python/nest -> build/lib/libnest.so);
  4. the system's library path (ctypes.util.find_library("nest")).
"""
import ctypes
import ctypes.util
import os

import numpy as np

F32, F64, I32, I64, BOOL = 0, 1, 2, 3, 4
ROW_MAJOR = 0
ERR_ARG = 2  # NEST_ERR_ARG
ERR_IO = 8  # NEST_ERR_IO
NONE = -1  # NEST_NONE, a failed builder
DIM_NONE = -(1 << 63)  # NEST_DIM_NONE, a failed dim

DTYPES = {F32: np.dtype(np.float32), F64: np.dtype(np.float64), I32: np.dtype(np.int32),
          I64: np.dtype(np.int64), BOOL: np.dtype(np.bool_)}
CODES = {d: c for c, d in DTYPES.items()}
TYPE_NAMES = {F32: "f32", F64: "f64", I32: "i32", I64: "i64", BOOL: "bool"}

_c_int64_p = ctypes.POINTER(ctypes.c_int64)
_vp = ctypes.c_void_p


class NestError(Exception):
    """An error reported by the C library: `status` is its code (nest.h's NEST_ERR_*),
    `status_name` the code's description, str(e) the library's message."""

    def __init__(self, message, status=None):
        super().__init__(message)
        self.status = status

    @property
    def status_name(self):
        return status_str(self.status) if self.status is not None else ""


class Options(ctypes.Structure):
    """nest_options. The tail is room for fields a newer library may add after these:
    nest_options_init fills the whole struct, so it must not write past ours."""
    _fields_ = [("opt_level", ctypes.c_int), ("march", ctypes.c_char_p),
                ("cc", ctypes.c_char_p), ("fuse", ctypes.c_int), ("openmp", ctypes.c_int),
                ("cache", ctypes.c_int), ("verbose", ctypes.c_int),
                ("flush_denormals", ctypes.c_int), ("_reserved", ctypes.c_char * 256)]


class Dim(ctypes.Structure):
    """nest_dim: the value of a named dimension of an ONNX model."""
    _fields_ = [("name", ctypes.c_char_p), ("value", ctypes.c_int64)]


class OnnxOptions(ctypes.Structure):
    """nest_onnx_options, with room after it as for Options (zeros: a newer library's
    defaults)."""
    _fields_ = [("name", ctypes.c_char_p), ("dims", ctypes.POINTER(Dim)),
                ("ndims", ctypes.c_int), ("data_dir", ctypes.c_char_p),
                ("_reserved", ctypes.c_char * 256)]


class Init(ctypes.Structure):
    """nest_init: how a state tensor starts (kind: ZEROS, CONSTANT a, UNIFORM [a, b), NORMAL
    mean a, deviation b; seed for the last two)."""
    _fields_ = [("kind", ctypes.c_int), ("a", ctypes.c_double), ("b", ctypes.c_double),
                ("seed", ctypes.c_uint64)]


INIT_ZEROS, INIT_CONSTANT, INIT_UNIFORM, INIT_NORMAL, INIT_DATA = 0, 1, 2, 3, 4

# name: (restype, argtypes). Values and statuses are int32; handles are void pointers.
_SIGNATURES = {
    "nest_status_str": (ctypes.c_char_p, [ctypes.c_int]),
    "nest_function_new": (_vp, [ctypes.c_char_p]),
    "nest_function_free": (None, [_vp]),
    "nest_errcode": (ctypes.c_int, [_vp]),
    "nest_errmsg": (ctypes.c_char_p, [_vp]),
    "nest_clear_error": (None, [_vp]),
    "nest_parameter": (ctypes.c_int32, [_vp, ctypes.c_char_p, ctypes.c_int, ctypes.c_int,
                                        _c_int64_p, ctypes.c_int]),
    "nest_set_name": (ctypes.c_int, [_vp, ctypes.c_int32, ctypes.c_char_p]),
    "nest_constant": (ctypes.c_int32, [_vp, ctypes.c_int, ctypes.c_int, _c_int64_p, _vp,
                                       ctypes.c_int64]),
    "nest_convert": (ctypes.c_int32, [_vp, ctypes.c_int32, ctypes.c_int]),
    "nest_dot": (ctypes.c_int32, [_vp, ctypes.c_int32, ctypes.c_int32]),
    "nest_broadcast": (ctypes.c_int32, [_vp, ctypes.c_int32, ctypes.c_int, _c_int64_p,
                                        ctypes.c_int, _c_int64_p]),
    "nest_reshape": (ctypes.c_int32, [_vp, ctypes.c_int32, _c_int64_p, ctypes.c_int,
                                      _c_int64_p]),
    "nest_slice": (ctypes.c_int32, [_vp, ctypes.c_int32, _c_int64_p, _c_int64_p, _c_int64_p]),
    "nest_concat": (ctypes.c_int32, [_vp, ctypes.c_int, ctypes.POINTER(ctypes.c_int32),
                                     ctypes.c_int64]),
    "nest_select": (ctypes.c_int32, [_vp, ctypes.c_int32, ctypes.c_int32, ctypes.c_int32]),
    "nest_tuple": (ctypes.c_int32, [_vp, ctypes.c_int, ctypes.POINTER(ctypes.c_int32)]),
    "nest_get": (ctypes.c_int32, [_vp, ctypes.c_int32, ctypes.c_int64]),
    "nest_return": (ctypes.c_int, [_vp, ctypes.c_int, ctypes.POINTER(ctypes.c_int32), _vp]),
    "nest_param_count": (ctypes.c_int, [_vp]),
    "nest_result_count": (ctypes.c_int, [_vp]),
    "nest_value_type": (ctypes.c_int, [_vp, ctypes.c_int32]),
    "nest_value_rank": (ctypes.c_int, [_vp, ctypes.c_int32]),
    "nest_value_shape": (_c_int64_p, [_vp, ctypes.c_int32]),
    "nest_result": (ctypes.c_int32, [_vp, ctypes.c_int]),
    "nest_param": (ctypes.c_int32, [_vp, ctypes.c_int]),
    "nest_value_name": (ctypes.c_char_p, [_vp, ctypes.c_int32]),
    "nest_function_name": (ctypes.c_char_p, [_vp]),
    "nest_named_dim": (ctypes.c_int64, [_vp, ctypes.c_char_p]),
    "nest_dim_count": (ctypes.c_int, [_vp]),
    "nest_dim_name": (ctypes.c_char_p, [_vp, ctypes.c_int]),
    "nest_import_onnx": (_vp, [ctypes.c_char_p, ctypes.c_void_p]),
    "nest_import_onnx_mem": (_vp, [ctypes.c_void_p, ctypes.c_size_t, ctypes.c_void_p]),
    "nest_print": (_vp, [ctypes.POINTER(_vp), ctypes.c_int]),
    "nest_string_free": (None, [_vp]),
    "nest_evaluate": (ctypes.c_int, [_vp, _vp, ctypes.c_int, _vp, ctypes.c_int]),
    "nest_options_init": (None, [ctypes.POINTER(Options)]),
    "nest_emit": (_vp, [ctypes.POINTER(_vp), ctypes.c_int, ctypes.c_int,
                        ctypes.POINTER(Options)]),
    "nest_compile": (_vp, [_vp, ctypes.POINTER(Options)]),
    # nest_call is called with raw pointer arrays on the hot path: no argtypes conversion
    "nest_call": (ctypes.c_int, None),
    "nest_call_dims": (ctypes.c_int, None),
    "nest_evaluate_dims": (ctypes.c_int, [_vp, _vp, ctypes.c_int, _vp, ctypes.c_int, _vp,
                                          ctypes.c_int]),
    "nest_kernel_errmsg": (ctypes.c_char_p, [_vp]),
    "nest_kernel_cache_hit": (ctypes.c_int, [_vp]),
    "nest_kernel_workspace_size": (ctypes.c_size_t, [_vp]),
    "nest_kernel_compile_ms": (ctypes.c_double, [_vp]),
    "nest_kernel_free": (None, [_vp]),
    "nest_module_new": (_vp, [ctypes.c_char_p]),
    "nest_module_free": (None, [_vp]),
    "nest_module_errcode": (ctypes.c_int, [_vp]),
    "nest_module_errmsg": (ctypes.c_char_p, [_vp]),
    "nest_module_add_function": (_vp, [_vp, ctypes.c_char_p]),
    "nest_module_print": (_vp, [_vp]),
    "nest_variable": (ctypes.c_int, [_vp, ctypes.c_char_p, ctypes.c_int, ctypes.c_int,
                                     _c_int64_p, ctypes.POINTER(Init)]),
    "nest_persistent": (ctypes.c_int, [_vp, ctypes.c_char_p, ctypes.c_int, ctypes.c_int,
                                       _c_int64_p, ctypes.POINTER(Init)]),
    "nest_variable_data": (ctypes.c_int, [_vp, ctypes.c_char_p, ctypes.c_int, ctypes.c_int,
                                          _c_int64_p, _vp]),
    "nest_persistent_data": (ctypes.c_int, [_vp, ctypes.c_char_p, ctypes.c_int, ctypes.c_int,
                                            _c_int64_p, _vp]),
    "nest_read": (ctypes.c_int32, [_vp, ctypes.c_char_p]),
    "nest_assign": (ctypes.c_int, [_vp, ctypes.c_int32, ctypes.c_int32]),
    "nest_grad": (ctypes.c_int32, [_vp, ctypes.c_int32, ctypes.c_int,
                                   ctypes.POINTER(ctypes.c_int32)]),
    "nest_state_new": (_vp, [_vp]),
    "nest_state_wrap": (_vp, [_vp, ctypes.POINTER(_vp)]),
    "nest_state_free": (None, [_vp]),
    "nest_state_count": (ctypes.c_int, [_vp]),
    "nest_state_data": (_vp, [_vp, ctypes.c_int]),
    "nest_state_save": (ctypes.c_int, [_vp, ctypes.c_char_p]),
    "nest_state_load": (ctypes.c_int, [_vp, ctypes.c_char_p]),
    "nest_state_errmsg": (ctypes.c_char_p, [_vp]),
    "nest_evaluate_state": (ctypes.c_int, [_vp, _vp, _vp, ctypes.c_int, _vp, ctypes.c_int]),
    # as nest_call: raw pointer arrays, no argtypes conversion
    "nest_call_state": (ctypes.c_int, None),
    "nest_call_state_dims": (ctypes.c_int, None),
    "nest_evaluate_state_dims": (ctypes.c_int, [_vp, _vp, _vp, ctypes.c_int, _vp, ctypes.c_int,
                                                _vp, ctypes.c_int]),
    # windows: x, w, strides, dilation, pad_below, pad_above, data_dilation, groups
    "nest_convolution": (ctypes.c_int32, [_vp, ctypes.c_int32, ctypes.c_int32] +
                         [_c_int64_p] * 5 + [ctypes.c_int64]),
    "nest_max_pool": (ctypes.c_int32, [_vp, ctypes.c_int32] + [_c_int64_p] * 4),
    "nest_avg_pool": (ctypes.c_int32, [_vp, ctypes.c_int32] + [_c_int64_p] * 4 + [ctypes.c_int]),
    "nest_pad": (ctypes.c_int32, [_vp, ctypes.c_int32, ctypes.c_int32, _c_int64_p, _c_int64_p,
                                  _c_int64_p]),
    "nest_replace_slice": (ctypes.c_int32, [_vp, ctypes.c_int32, ctypes.c_int32, _c_int64_p,
                                            _c_int64_p, _c_int64_p]),
    "nest_one_hot": (ctypes.c_int32, [_vp, ctypes.c_int32, ctypes.c_int, _c_int64_p,
                                      ctypes.c_int64]),
    "nest_gather": (ctypes.c_int32, [_vp, ctypes.c_int32, ctypes.c_int32, ctypes.c_int64]),
    "nest_argmax": (ctypes.c_int32, [_vp, ctypes.c_int32, ctypes.c_int64]),
    "nest_argmin": (ctypes.c_int32, [_vp, ctypes.c_int32, ctypes.c_int64]),
    "nest_topk": (ctypes.c_int32, [_vp, ctypes.c_int32, ctypes.c_int64, ctypes.c_int64,
                                   ctypes.c_int]),
    "nest_build_so": (ctypes.c_int, [ctypes.POINTER(_vp), ctypes.c_int, ctypes.c_char_p,
                                     ctypes.c_char_p, ctypes.POINTER(Options),
                                     ctypes.POINTER(_vp)]),
}

# The builders of one or two operands, by the op names the front end uses.
UNARY = ("negative", "abs", "exp", "log", "sqrt", "tanh", "sin", "cos", "tan", "asin", "acos",
         "atan", "sinh", "cosh", "floor", "ceiling", "erf", "sign", "relu", "sigmoid", "not")
BINARY = ("add", "subtract", "multiply", "divide", "maximum", "minimum", "power",
          "less", "greater", "equal", "not_equal", "less_eq", "greater_eq", "and", "or",
          "batch_dot")
# ops over a list of axes: nest_sum(f, a, naxes, axes)
REDUCTIONS = ("sum", "max", "min", "product", "softmax", "reverse")
for _n in UNARY:
    _SIGNATURES["nest_" + _n] = (ctypes.c_int32, [_vp, ctypes.c_int32])
for _n in BINARY:
    _SIGNATURES["nest_" + _n] = (ctypes.c_int32, [_vp, ctypes.c_int32, ctypes.c_int32])
for _n in REDUCTIONS:
    _SIGNATURES["nest_" + _n] = (ctypes.c_int32, [_vp, ctypes.c_int32, ctypes.c_int,
                                                  _c_int64_p])


def _candidates():
    here = os.path.dirname(os.path.abspath(__file__))
    try:
        from . import _install  # written by `make install`
        yield os.path.join(_install.LIBDIR, "libnest.so")
    except ImportError:
        pass
    yield os.path.join(here, "..", "..", "build", "lib", "libnest.so")
    found = ctypes.util.find_library("nest")
    if found:
        yield found


def _load():
    env = os.environ.get("NEST_LIBRARY")
    paths = [env] if env else list(_candidates())
    tried = []
    for path in paths:
        if os.sep in path and not os.path.exists(path):
            tried.append("%s: not found" % path)
            continue
        try:
            return ctypes.CDLL(path)
        except OSError as e:
            tried.append("%s: %s" % (path, e))
    raise ImportError("nest: libnest.so cannot be loaded (set NEST_LIBRARY to its path); "
                      "tried:\n  " + "\n  ".join(tried or ["(no candidate)"]))


lib = _load()
for _name, (_res, _args) in _SIGNATURES.items():
    _f = getattr(lib, _name)
    _f.restype = _res
    if _args is not None:
        _f.argtypes = _args


def status_str(status):
    s = lib.nest_status_str(status)
    return s.decode() if s else "?"


def take_string(ptr):
    """A char * the library returned (the caller's to free), as a Python str."""
    if not ptr:
        return None
    try:
        return ctypes.string_at(ptr).decode("utf-8", "replace")
    finally:
        lib.nest_string_free(ptr)


def int64s(values):
    values = [int(v) for v in values]
    return (ctypes.c_int64 * max(len(values), 1))(*values)


def options(opt_level=3, march=None, cc=None, fuse=True, openmp=True, cache=True,
            flush_denormals=None):
    """nest_options; flush_denormals: True, False, or None for the library's default (flushed
    in the functions that assign state)."""
    o = Options()
    lib.nest_options_init(ctypes.byref(o))
    if not 0 <= opt_level <= 3:
        raise ValueError("opt_level must be 0..3, not %r" % (opt_level,))
    o.opt_level = opt_level
    if march is not None:
        o.march = march.encode()
    if cc is not None:
        o.cc = cc.encode()
    o.fuse, o.openmp, o.cache = int(bool(fuse)), int(bool(openmp)), int(bool(cache))
    if flush_denormals is not None:
        o.flush_denormals = int(bool(flush_denormals))
    return o
