"""ONNX models: nest.load_onnx imports a model with the C library's importer and compiles it."""
import ctypes
import os

from . import _capi
from ._capi import lib
from .computation import Computation
from .graph import Builder


def load_onnx(path, name=None, dims=None, data_dir=None, opt_level=3, march=None, fuse=True,
              openmp=True, cache=True, flush_denormals=None):
    """Imports the ONNX model at path (bytes of a model are accepted too) and compiles it: a
    Computation whose arguments are the graph inputs that are not initializers, in order
    (numpy arrays), and whose results are the graph outputs. name: the C function's name
    (default: the file's stem); dims: {name: value} for the named dimensions of the inputs
    (each must be given: a Computation takes arrays of plain sizes);
    data_dir: the folder of external data (default: the model's); flush_denormals: as for
    ng.computation. Errors raise NestError with the importer's message ("FILE: node N 'name'
    (Op, opset K): what")."""
    o = _capi.OnnxOptions()
    keep = []
    if name is not None:
        o.name = name.encode()
    if dims:
        arr = (_capi.Dim * len(dims))(*[_capi.Dim(str(k).encode(), int(v))
                                         for k, v in dims.items()])
        keep.append(arr)
        o.dims, o.ndims = arr, len(dims)
    if data_dir is not None:
        o.data_dir = os.fsencode(data_dir)
    if isinstance(path, (bytes, bytearray, memoryview)):
        data = bytes(path)
        fn = lib.nest_import_onnx_mem(data, len(data), ctypes.byref(o))
    else:
        fn = lib.nest_import_onnx(os.fsencode(path), ctypes.byref(o))
    if not fn:
        raise MemoryError("nest_import_onnx")
    b = Builder.adopt(fn)
    if lib.nest_errcode(fn):
        err = b.error()
        b.free()
        raise err
    if lib.nest_dim_count(fn) > 0:  # a Computation takes arrays of plain sizes
        names = [lib.nest_dim_name(fn, i).decode() for i in range(lib.nest_dim_count(fn))]
        b.free()
        raise _capi.NestError("%s: the model's dims %s are symbolic (dim_param); give their "
                              "sizes: dims={%s}" % (path if isinstance(path, str) else "<memory>",
                                                    ", ".join(names),
                                                    ", ".join("%r: N" % n for n in names)),
                              _capi.ERR_ARG)
    options = _capi.options(opt_level, march, None, fuse, openmp, cache, flush_denormals)
    try:
        return Computation.of_function(b, options)
    except BaseException:
        b.free()
        raise
