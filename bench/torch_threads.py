"""Matching PyTorch's threads to nest's in the peers of `make bench`.

torch.set_num_threads sets the threads of PyTorch's own kernels (OpenMP, oneDNN), not those of
the BLAS it calls for matrix products: Debian's PyTorch calls OpenBLAS (libblas.so.3), whose
pthreads pool takes every core unless OPENBLAS_NUM_THREADS or OMP_NUM_THREADS was set before it
loaded. A "one thread" PyTorch then ran its products (Linear layers, 1x1 convolutions that
oneDNN hands to a GEMM, its backward) on two cores: measured here, a 2048 x 2048 product at 159
GFLOP/s of wall time for 174 ms of CPU per 108 ms call; with the BLAS held to one thread, 97
GFLOP/s. set_threads() sets both, so a peer that changes its thread count between calls (one
server for the 1- and 2-thread rows) is matched every time.

pin() puts the calling thread on one core, as the C driver puts itself for a one-thread round
(bench/benchutil.h, round_core: the vCPUs of a shared guest need not run at one speed), and
pin(None) gives it back the cores it started with.
"""
import ctypes
import os

import torch


def _blas_setters():
    """openblas_set_num_threads of every OpenBLAS this process has loaded."""
    setters = []
    seen = set()
    with open("/proc/self/maps") as maps:
        for line in maps:
            path = line.split()[-1]
            if not path.startswith("/") or "blas" not in path.lower() or path in seen:
                continue
            seen.add(path)
            try:
                fn = getattr(ctypes.CDLL(path), "openblas_set_num_threads", None)
            except OSError:
                continue
            if fn is not None:
                fn.argtypes = [ctypes.c_int]
                setters.append(fn)
    return setters


def set_threads(threads):
    """PyTorch's threads and its BLAS's, both to THREADS."""
    torch.set_num_threads(threads)
    for fn in _blas_setters():
        fn(threads)


_START_CORES = os.sched_getaffinity(0)


def pin(core):
    """The calling thread on CORE alone, or with None on the cores the process started with."""
    os.sched_setaffinity(0, _START_CORES if core is None else {core})


def time_options(words):
    """The options after "time T SECONDS" of a peer's command: "cpu" (time.process_time for
    time.perf_counter) and "core K" (the round's core, see pin); pins the thread and returns
    whether to take the CPU time."""
    core = None
    if "core" in words:
        core = int(words[words.index("core") + 1])
    pin(core)
    return "cpu" in words
