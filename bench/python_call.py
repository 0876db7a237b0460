"""The cost of calling a computation from Python (`make bench` appends it to build/bench.md).

For small arrays, per workload and size, the best of several rounds of batches, in turn:
  numpy    the same operation written in numpy (results allocated per call, as people write it)
  torch    the same in PyTorch eager on tensors sharing the numpy arrays (one thread), when
           python3-torch is installed
  nest     the computation called from Python: argument checks, result allocation, the call
  kernel   the kernel alone: nest_call (nest_call_state for a computation with state) through
           ctypes with prepared pointer arrays, minus the same ctypes call on a NULL kernel
           (which returns at once)
  overhead nest - kernel: what the Python layer adds to a call (the goal: under 20 us)
The last workload assigns a variable (w = w + x): the path of a training step (a state object,
the locks of its state tensors, which calls that share one take turns under).

Run with Debian's interpreter from the repository: /usr/bin/python3 bench/python_call.py
"""
import ctypes
import os
import sys
import time

import numpy as np

try:
    import torch
    torch.set_num_threads(1)
except ImportError:
    torch = None

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "python"))
import nest as ng  # noqa: E402
from nest._capi import lib  # noqa: E402

ROUNDS = 7
BATCH_S = 0.02


def per_call(fn):
    """Seconds per call: the best over ROUNDS batches of at least BATCH_S seconds each."""
    n = 1
    while True:
        t = time.perf_counter()
        for _ in range(n):
            fn()
        dt = time.perf_counter() - t
        if dt >= BATCH_S:
            break
        n *= 4
    best = dt / n
    for _ in range(ROUNDS - 1):
        t = time.perf_counter()
        for _ in range(n):
            fn()
        best = min(best, (time.perf_counter() - t) / n)
    return best


def workloads(n):
    """(name, result over placeholders, placeholders, arrays, numpy function)."""
    rng = np.random.default_rng(0)
    N = ng.make_axis(length=n, name="N")
    x, y, z, w = (ng.placeholder([N]) for _ in range(4))
    a, b, c, d = (rng.standard_normal(n).astype(np.float32) for _ in range(4))
    ta, tb, tc, td = (torch.from_numpy(v) for v in (a, b, c, d)) if torch else (None,) * 4
    yield ("x + y", x + y, (x, y), (a, b), lambda: a + b, lambda: ta + tb)
    yield ("(a+b)*c-d", (x + y) * z - w, (x, y, z, w), (a, b, c, d),
           lambda: (a + b) * c - d, lambda: (ta + tb) * tc - td)
    t = x - y
    yield ("l2: dot(x-y, x-y)", ng.dot(t, t), (x, y), (a, b), lambda: np.dot(a - b, a - b),
           lambda: torch.dot(ta - tb, ta - tb))
    v = ng.variable([N], name="w")
    vn, tv = np.zeros(n, np.float32), torch.zeros(n) if torch else None

    def numpy_acc():
        vn[...] = vn + a

    def torch_acc():
        tv.add_(ta)
    yield ("w = w + x (state)", ng.assign(v, v + x), (x,), (a,), numpy_acc, torch_acc)


def main():
    rows = []
    for n in (16, 1024, 16384):
        for name, result, phs, arrays, numpy_fn, torch_fn in workloads(n):
            comp = ng.computation(result, *phs, name="bench")
            argv = (ctypes.c_void_p * len(arrays))(*[a.ctypes.data for a in arrays])
            out = comp(*arrays)
            nres = 0 if out is None else 1
            res = (ctypes.c_void_p * 1)(None if out is None else out.ctypes.data)
            k, nargs = comp._k, len(arrays)
            if comp._st:  # as Computation calls it: nest_call_state under its tensors' locks
                st, lock, call = comp._st, comp._locks, lib.nest_call_state

                def raw():
                    with lock:
                        call(k, st, argv, nargs, res, nres)

                def noop():
                    with lock:
                        call(None, st, argv, nargs, res, nres)
            else:
                def raw():
                    lib.nest_call(k, argv, nargs, res, nres)

                def noop():
                    lib.nest_call(None, argv, nargs, res, nres)
            fns = {"numpy": numpy_fn, "nest": lambda: comp(*arrays), "raw": raw, "noop": noop}
            if torch:
                fns["torch"] = torch_fn
            times = {key: [] for key in fns}
            for _ in range(3):  # in turn, so that load changes hit every contender alike
                for key, fn in fns.items():
                    times[key].append(per_call(fn))
            best = {key: min(v) for key, v in times.items()}
            kernel = max(best["raw"] - best["noop"], 0.0)
            rows.append((name, n, best["numpy"], best.get("torch"), best["nest"], kernel,
                         best["nest"] - kernel))
    print("## Calling from Python (microseconds per call, best of batches)")
    print()
    print("Load average at the start: %.2f %.2f %.2f." % os.getloadavg())
    print()
    print("| workload | elements | numpy | PyTorch | nest from Python | kernel | overhead |")
    print("|---|---|---|---|---|---|---|")
    for name, n, t_np, t_torch, t_nest, t_k, over in rows:
        print("| %s | %d | %.2f | %s | %.2f | %.2f | %.2f |"
              % (name, n, t_np * 1e6, "%.2f" % (t_torch * 1e6) if t_torch else "-",
                 t_nest * 1e6, t_k * 1e6, over * 1e6))
    worst = max(r[6] for r in rows) * 1e6
    print()
    print("largest overhead: %.2f us (goal: under 20 us)" % worst)


if __name__ == "__main__":
    main()
